// GgufValue: one metadata value of a GGUF file (scalar, string or array, arrays possibly nested).
// Owning, so the writer can hold values built in memory as well as values read from a file.
// Depends on base only.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ponder {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u32", "string", "array"...; "type 99" for a value outside the enum.
std::string gguf_type_name(GgufType type);
// Size in bytes of a scalar type; 0 for string and array.
size_t gguf_scalar_size(GgufType type);

class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue u8(uint8_t v) { return scalar(GgufType::kU8, &v, 1); }
  static GgufValue i8(int8_t v) { return scalar(GgufType::kI8, &v, 1); }
  static GgufValue u16(uint16_t v) { return scalar(GgufType::kU16, &v, 2); }
  static GgufValue i16(int16_t v) { return scalar(GgufType::kI16, &v, 2); }
  static GgufValue u32(uint32_t v) { return scalar(GgufType::kU32, &v, 4); }
  static GgufValue i32(int32_t v) { return scalar(GgufType::kI32, &v, 4); }
  static GgufValue f32(float v) { return scalar(GgufType::kF32, &v, 4); }
  static GgufValue boolean(bool v) {
    uint8_t b = v;
    return scalar(GgufType::kBool, &b, 1);
  }
  static GgufValue u64(uint64_t v) { return scalar(GgufType::kU64, &v, 8); }
  static GgufValue i64(int64_t v) { return scalar(GgufType::kI64, &v, 8); }
  static GgufValue f64(double v) { return scalar(GgufType::kF64, &v, 8); }
  static GgufValue string(std::string v);
  // An array of scalars of `elem_type`, from n elements packed little-endian at `data`.
  static GgufValue scalar_array(GgufType elem_type, const void* data, uint64_t n);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue array_of_arrays(std::vector<GgufValue> v);  // each element an array
  static GgufValue i32_array(const std::vector<int32_t>& v) {
    return scalar_array(GgufType::kI32, v.data(), v.size());
  }
  static GgufValue f32_array(const std::vector<float>& v) {
    return scalar_array(GgufType::kF32, v.data(), v.size());
  }

  GgufType type() const { return type_; }
  // For arrays: the element type and the count.
  GgufType elem_type() const { return elem_type_; }
  uint64_t array_size() const;

  // Scalars (the caller has checked type()).
  uint64_t as_u64_bits() const {
    uint64_t v = 0;
    std::memcpy(&v, scalar_, sizeof v);
    return v;
  }
  template <typename T>
  T as() const {
    T v;
    std::memcpy(&v, scalar_, sizeof(T));
    return v;
  }
  const std::string& as_string() const { return str_; }

  // Arrays: raw little-endian elements for scalar arrays, strings, or nested arrays.
  const std::vector<uint8_t>& raw() const { return raw_; }
  template <typename T>
  T raw_at(uint64_t i) const {
    T v;
    std::memcpy(&v, raw_.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<GgufValue>& arrays() const { return arrays_; }

  bool operator==(const GgufValue& o) const;
  // Short human description: "u32 28", "string \"qwen2\"", "array[151936] of string".
  std::string describe() const;

 private:
  static GgufValue scalar(GgufType t, const void* p, size_t n) {
    GgufValue v;
    v.type_ = t;
    std::memcpy(v.scalar_, p, n);
    return v;
  }
  GgufType type_ = GgufType::kU8;
  GgufType elem_type_ = GgufType::kU8;
  uint8_t scalar_[8] = {};
  std::string str_;
  std::vector<uint8_t> raw_;
  std::vector<std::string> strings_;
  std::vector<GgufValue> arrays_;
};

}  // namespace ponder
