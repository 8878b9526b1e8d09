#include "gguf/gguf_value.h"

#include <fmt/core.h>

namespace ponder {

std::string gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

size_t gguf_scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

GgufValue GgufValue::string(std::string v) {
  GgufValue out;
  out.type_ = GgufType::kString;
  out.str_ = std::move(v);
  return out;
}

GgufValue GgufValue::scalar_array(GgufType elem_type, const void* data, uint64_t n) {
  GgufValue out;
  out.type_ = GgufType::kArray;
  out.elem_type_ = elem_type;
  const auto* p = static_cast<const uint8_t*>(data);
  out.raw_.assign(p, p + n * gguf_scalar_size(elem_type));
  return out;
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue out;
  out.type_ = GgufType::kArray;
  out.elem_type_ = GgufType::kString;
  out.strings_ = std::move(v);
  return out;
}

GgufValue GgufValue::array_of_arrays(std::vector<GgufValue> v) {
  GgufValue out;
  out.type_ = GgufType::kArray;
  out.elem_type_ = GgufType::kArray;
  out.arrays_ = std::move(v);
  return out;
}

uint64_t GgufValue::array_size() const {
  if (type_ != GgufType::kArray) return 0;
  if (elem_type_ == GgufType::kString) return strings_.size();
  if (elem_type_ == GgufType::kArray) return arrays_.size();
  return raw_.size() / gguf_scalar_size(elem_type_);
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case GgufType::kString:
      return str_ == o.str_;
    case GgufType::kArray:
      return elem_type_ == o.elem_type_ && raw_ == o.raw_ && strings_ == o.strings_ &&
             arrays_ == o.arrays_;
    default:
      return std::memcmp(scalar_, o.scalar_, gguf_scalar_size(type_)) == 0;
  }
}

std::string GgufValue::describe() const {
  switch (type_) {
    case GgufType::kU8:
      return fmt::format("u8 {}", as<uint8_t>());
    case GgufType::kI8:
      return fmt::format("i8 {}", as<int8_t>());
    case GgufType::kU16:
      return fmt::format("u16 {}", as<uint16_t>());
    case GgufType::kI16:
      return fmt::format("i16 {}", as<int16_t>());
    case GgufType::kU32:
      return fmt::format("u32 {}", as<uint32_t>());
    case GgufType::kI32:
      return fmt::format("i32 {}", as<int32_t>());
    case GgufType::kF32:
      return fmt::format("f32 {}", as<float>());
    case GgufType::kBool:
      return as<uint8_t>() ? "bool true" : "bool false";
    case GgufType::kU64:
      return fmt::format("u64 {}", as<uint64_t>());
    case GgufType::kI64:
      return fmt::format("i64 {}", as<int64_t>());
    case GgufType::kF64:
      return fmt::format("f64 {}", as<double>());
    case GgufType::kString: {
      std::string s = str_.size() > 60 ? str_.substr(0, 57) + "..." : str_;
      for (char& c : s)
        if (c == '\n') c = ' ';
      return fmt::format("string \"{}\"", s);
    }
    case GgufType::kArray:
      return fmt::format("array[{}] of {}", array_size(), gguf_type_name(elem_type_));
  }
  return "?";
}

}  // namespace ponder
