#include "gguf/gguf_file.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace ponder {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;
constexpr size_t kMaxNameLength = 256;

// Bounds-checked little-endian reads over the file image. Every read names what it was reading.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T)) {
      return Status::errorf("truncated file: {} at offset {} needs {} bytes, {} left", what, pos_,
                            sizeof(T), remaining());
    }
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string* out, const char* what) {
    uint64_t len;
    PONDER_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining()) {
      return Status::errorf("{} at offset {} claims {} bytes but only {} remain in the file", what,
                            pos_ - 8, len, remaining());
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }

  Status read_bytes(const uint8_t** out, uint64_t n, const char* what) {
    if (n > remaining()) {
      return Status::errorf("{} at offset {} needs {} bytes but only {} remain", what, pos_, n,
                            remaining());
    }
    *out = data_ + pos_;
    pos_ += n;
    return Status::ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

// Parses the header, metadata and tensor infos, checking each against the file.
class GgufParser {
 public:
  GgufParser(GgufFile* f) : f_(f), cur_(f->base_, f->size_) {
    // Metadata may cost a few times its file size in memory (string objects), never more.
    budget_ = 4 * static_cast<uint64_t>(f->size_) + (1u << 20);
  }

  Status parse() {
    uint32_t magic;
    PONDER_RETURN_IF_ERROR(cur_.read(&magic, "magic"));
    if (magic != kMagic) {
      return Status::errorf("not a GGUF file (magic {:08x}, expected 46554747 \"GGUF\")", magic);
    }
    PONDER_RETURN_IF_ERROR(cur_.read(&f_->version_, "version"));
    if (f_->version_ == 1) return Status::error("GGUF version 1 is not supported (only 2 and 3)");
    if (f_->version_ == 0x02000000 || f_->version_ == 0x03000000) {
      return Status::error("big-endian GGUF files are not supported");
    }
    if (f_->version_ != 2 && f_->version_ != 3) {
      return Status::errorf("unsupported GGUF version {} (expected 2 or 3)", f_->version_);
    }
    uint64_t n_tensors, n_kv;
    PONDER_RETURN_IF_ERROR(cur_.read(&n_tensors, "tensor count"));
    PONDER_RETURN_IF_ERROR(cur_.read(&n_kv, "metadata count"));
    // Each key-value takes at least 13 bytes and each tensor info 24: bound counts by the file.
    if (n_kv > cur_.remaining() / 13) {
      return Status::errorf("metadata count {} is impossible for a file of {} bytes", n_kv,
                            f_->size_);
    }
    if (n_tensors > cur_.remaining() / 24) {
      return Status::errorf("tensor count {} is impossible for a file of {} bytes", n_tensors,
                            f_->size_);
    }
    f_->kv_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) PONDER_RETURN_IF_ERROR(parse_kv(i));
    PONDER_RETURN_IF_ERROR(read_alignment());
    f_->tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) PONDER_RETURN_IF_ERROR(parse_tensor_info(i));
    return place_tensors();
  }

 private:
  Status charge(uint64_t bytes) {
    if (bytes > budget_) {
      return Status::errorf("metadata needs more memory than a file of {} bytes can justify",
                            f_->size_);
    }
    budget_ -= bytes;
    return Status::ok();
  }

  Status parse_kv(uint64_t index) {
    std::string key;
    PONDER_RETURN_IF_ERROR(cur_.read_string(&key, "metadata key"));
    if (key.empty()) return Status::errorf("metadata entry {} has an empty key", index);
    uint32_t raw_type;
    PONDER_RETURN_IF_ERROR(cur_.read(&raw_type, "metadata value type"));
    GgufValue value;
    PONDER_RETURN_IF_ERROR(parse_value(static_cast<GgufType>(raw_type), 0, &value)
                               .with_context(fmt::format("key {}", key)));
    if (f_->kv_index_.count(key)) return Status::errorf("duplicate metadata key {}", key);
    f_->kv_index_.emplace(key, f_->kv_.size());
    f_->kv_.emplace_back(std::move(key), std::move(value));
    return Status::ok();
  }

  Status parse_value(GgufType type, int depth, GgufValue* out) {
    const size_t scalar = gguf_scalar_size(type);
    if (scalar > 0) {
      uint64_t bits = 0;
      const uint8_t* p;
      PONDER_RETURN_IF_ERROR(cur_.read_bytes(&p, scalar, "value"));
      std::memcpy(&bits, p, scalar);
      if (type == GgufType::kBool && bits > 1) {
        return Status::errorf("bool value {} is neither 0 nor 1", bits);
      }
      *out = make_scalar(type, bits);
      return Status::ok();
    }
    if (type == GgufType::kString) {
      std::string s;
      PONDER_RETURN_IF_ERROR(cur_.read_string(&s, "string value"));
      PONDER_RETURN_IF_ERROR(charge(s.size()));
      *out = GgufValue::string(std::move(s));
      return Status::ok();
    }
    if (type != GgufType::kArray) {
      return Status::errorf("unknown value type {}", static_cast<uint32_t>(type));
    }
    if (depth >= kMaxArrayDepth)
      return Status::errorf("arrays nested deeper than {}", kMaxArrayDepth);
    uint32_t raw_elem;
    uint64_t n;
    PONDER_RETURN_IF_ERROR(cur_.read(&raw_elem, "array element type"));
    PONDER_RETURN_IF_ERROR(cur_.read(&n, "array length"));
    const auto elem = static_cast<GgufType>(raw_elem);
    const size_t elem_size = gguf_scalar_size(elem);
    if (elem_size > 0) {
      uint64_t bytes;
      if (mul_overflows(n, elem_size, &bytes) || bytes > cur_.remaining()) {
        return Status::errorf("array of {} {} needs more bytes than the {} left in the file", n,
                              gguf_type_name(elem), cur_.remaining());
      }
      const uint8_t* p;
      PONDER_RETURN_IF_ERROR(cur_.read_bytes(&p, bytes, "array data"));
      if (elem == GgufType::kBool) {
        for (uint64_t i = 0; i < n; ++i) {
          if (p[i] > 1) return Status::errorf("bool array element {} is {}", i, p[i]);
        }
      }
      PONDER_RETURN_IF_ERROR(charge(bytes));
      *out = GgufValue::scalar_array(elem, p, n);
      return Status::ok();
    }
    if (elem == GgufType::kString) {
      if (n > cur_.remaining() / 8) {
        return Status::errorf("array of {} strings cannot fit in the {} bytes left", n,
                              cur_.remaining());
      }
      PONDER_RETURN_IF_ERROR(charge(n * sizeof(std::string)));
      std::vector<std::string> strings(n);
      for (uint64_t i = 0; i < n; ++i) {
        PONDER_RETURN_IF_ERROR(cur_.read_string(&strings[i], "array string"));
        if (strings[i].size() > 15) PONDER_RETURN_IF_ERROR(charge(strings[i].size()));
      }
      *out = GgufValue::string_array(std::move(strings));
      return Status::ok();
    }
    if (elem == GgufType::kArray) {
      if (n > cur_.remaining() / 12) {
        return Status::errorf("array of {} arrays cannot fit in the {} bytes left", n,
                              cur_.remaining());
      }
      PONDER_RETURN_IF_ERROR(charge(n * sizeof(GgufValue)));
      std::vector<GgufValue> arrays(n);
      for (uint64_t i = 0; i < n; ++i) {
        PONDER_RETURN_IF_ERROR(parse_value(GgufType::kArray, depth + 1, &arrays[i]));
      }
      *out = GgufValue::array_of_arrays(std::move(arrays));
      return Status::ok();
    }
    return Status::errorf("array of unknown element type {}", raw_elem);
  }

  static GgufValue make_scalar(GgufType type, uint64_t bits) {
    switch (type) {
      case GgufType::kU8:
        return GgufValue::u8(static_cast<uint8_t>(bits));
      case GgufType::kI8:
        return GgufValue::i8(static_cast<int8_t>(bits));
      case GgufType::kU16:
        return GgufValue::u16(static_cast<uint16_t>(bits));
      case GgufType::kI16:
        return GgufValue::i16(static_cast<int16_t>(bits));
      case GgufType::kU32:
        return GgufValue::u32(static_cast<uint32_t>(bits));
      case GgufType::kI32:
        return GgufValue::i32(static_cast<int32_t>(bits));
      case GgufType::kBool:
        return GgufValue::boolean(bits != 0);
      case GgufType::kU64:
        return GgufValue::u64(bits);
      case GgufType::kI64:
        return GgufValue::i64(static_cast<int64_t>(bits));
      case GgufType::kF32: {
        float f;
        uint32_t b = static_cast<uint32_t>(bits);
        std::memcpy(&f, &b, 4);
        return GgufValue::f32(f);
      }
      default: {
        double d;
        std::memcpy(&d, &bits, 8);
        return GgufValue::f64(d);
      }
    }
  }

  Status read_alignment() {
    const GgufValue* v = f_->find("general.alignment");
    if (v == nullptr) return Status::ok();
    if (v->type() != GgufType::kU32) {
      return Status::errorf("key general.alignment: expected u32, found {}",
                            gguf_type_name(v->type()));
    }
    const uint32_t a = v->as<uint32_t>();
    if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 16)) {
      return Status::errorf("key general.alignment: {} is not a power of two in [1, 65536]", a);
    }
    f_->alignment_ = a;
    return Status::ok();
  }

  Status parse_tensor_info(uint64_t index) {
    TensorInfo t;
    PONDER_RETURN_IF_ERROR(cur_.read_string(&t.name, "tensor name"));
    if (t.name.empty() || t.name.size() > kMaxNameLength) {
      return Status::errorf("tensor {} has a name of {} bytes (expected 1..{})", index,
                            t.name.size(), kMaxNameLength);
    }
    const std::string ctx = "tensor " + t.name;
    uint32_t n_dims;
    PONDER_RETURN_IF_ERROR(cur_.read(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Status::errorf("{}: {} dimensions (expected 1..{})", ctx, n_dims, kMaxDims);
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim;
      PONDER_RETURN_IF_ERROR(cur_.read(&dim, "tensor dimension"));
      if (dim == 0) return Status::errorf("{}: dimension {} is zero", ctx, d);
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          mul_overflows(n_elements, dim, &n_elements) ||
          n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::errorf("{}: element count overflows", ctx);
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint32_t raw_type;
    PONDER_RETURN_IF_ERROR(cur_.read(&raw_type, "tensor type"));
    const GgmlTypeInfo* info = ggml_type_info(raw_type);
    if (info == nullptr) {
      return Status::errorf("{}: type {} is not supported", ctx, ggml_type_name_raw(raw_type));
    }
    t.type = info->type;
    if (t.shape[0] % info->block_size != 0) {
      return Status::errorf("{}: row length {} is not a multiple of the {} block size {}", ctx,
                            t.shape[0], info->name, info->block_size);
    }
    uint64_t n_bytes;
    if (mul_overflows(n_elements / info->block_size, info->type_size, &n_bytes) ||
        n_bytes > f_->size_) {
      return Status::errorf("{}: {} elements of {} need more bytes than the file has ({})", ctx,
                            n_elements, info->name, f_->size_);
    }
    PONDER_RETURN_IF_ERROR(cur_.read(&t.offset, "tensor offset"));
    t.n_elements = static_cast<int64_t>(n_elements);
    t.n_bytes = static_cast<int64_t>(n_bytes);
    if (f_->tensor_index_.count(t.name)) return Status::errorf("duplicate tensor name {}", t.name);
    f_->tensor_index_.emplace(t.name, f_->tensors_.size());
    f_->tensors_.push_back(std::move(t));
    return Status::ok();
  }

  Status place_tensors() {
    const uint64_t a = f_->alignment_;
    const uint64_t end_of_infos = cur_.pos();
    f_->data_offset_ = (end_of_infos + a - 1) / a * a;
    if (f_->tensors_.empty()) return Status::ok();
    if (f_->data_offset_ > f_->size_) {
      return Status::errorf(
          "truncated file: tensor data should start at offset {} but the file has {} bytes",
          f_->data_offset_, f_->size_);
    }
    const uint64_t data_size = f_->size_ - f_->data_offset_;
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(f_->tensors_.size());
    for (TensorInfo& t : f_->tensors_) {
      if (t.offset % a != 0) {
        return Status::errorf("tensor {}: offset {} is not a multiple of the alignment {}", t.name,
                              t.offset, a);
      }
      if (t.offset > data_size || static_cast<uint64_t>(t.n_bytes) > data_size - t.offset) {
        return Status::errorf(
            "tensor {}: data [{}, {}) lies past the end of the file's data section ({} bytes); "
            "file truncated?",
            t.name, t.offset, t.offset + t.n_bytes, data_size);
      }
      t.data = f_->base_ + f_->data_offset_ + t.offset;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* x, const TensorInfo* y) { return x->offset < y->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo* prev = by_offset[i - 1];
      if (prev->offset + prev->n_bytes > by_offset[i]->offset) {
        return Status::errorf("tensors {} and {} overlap in the file", prev->name,
                              by_offset[i]->name);
      }
    }
    return Status::ok();
  }

  GgufFile* f_;
  Cursor cur_;
  uint64_t budget_;
};

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Expected<GgufFile> GgufFile::open(const std::string& path) {
  PONDER_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  GgufFile f;
  f.map_ = std::move(map);
  f.base_ = f.map_.data();
  f.size_ = f.map_.size();
  f.path_ = path;
  GgufParser parser(&f);
  PONDER_RETURN_IF_ERROR(parser.parse().with_context(path));
  return f;
}

Expected<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::string name) {
  GgufFile f;
  f.base_ = data;
  f.size_ = size;
  f.path_ = std::move(name);
  GgufParser parser(&f);
  PONDER_RETURN_IF_ERROR(parser.parse().with_context(f.path_));
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status missing(std::string_view key) { return Status::errorf("key {}: missing", key); }

Status wrong_type(std::string_view key, const char* expected, const GgufValue& v) {
  std::string found = gguf_type_name(v.type());
  if (v.type() == GgufType::kArray) found = "array of " + gguf_type_name(v.elem_type());
  return Status::errorf("key {}: expected {}, found {}", key, expected, found);
}

// An integer scalar of any width: its magnitude and sign.
struct IntegerValue {
  bool negative = false;
  uint64_t magnitude = 0;
};

bool integer_value(const GgufValue& v, IntegerValue* out) {
  int64_t s = 0;
  switch (v.type()) {
    case GgufType::kU8:
      out->magnitude = v.as<uint8_t>();
      return true;
    case GgufType::kU16:
      out->magnitude = v.as<uint16_t>();
      return true;
    case GgufType::kU32:
      out->magnitude = v.as<uint32_t>();
      return true;
    case GgufType::kU64:
      out->magnitude = v.as<uint64_t>();
      return true;
    case GgufType::kI8:
      s = v.as<int8_t>();
      break;
    case GgufType::kI16:
      s = v.as<int16_t>();
      break;
    case GgufType::kI32:
      s = v.as<int32_t>();
      break;
    case GgufType::kI64:
      s = v.as<int64_t>();
      break;
    default:
      return false;
  }
  out->negative = s < 0;
  out->magnitude = s < 0 ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
  return true;
}

}  // namespace

Expected<uint32_t> GgufFile::get_u32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  IntegerValue x;
  if (!integer_value(*v, &x)) return wrong_type(key, "u32", *v);
  if (x.negative || x.magnitude > std::numeric_limits<uint32_t>::max()) {
    return Status::errorf("key {}: value {}{} does not fit in u32", key, x.negative ? "-" : "",
                          x.magnitude);
  }
  return static_cast<uint32_t>(x.magnitude);
}

Expected<int64_t> GgufFile::get_i64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  IntegerValue x;
  if (!integer_value(*v, &x)) return wrong_type(key, "integer", *v);
  if (!x.negative && x.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::errorf("key {}: value {} does not fit in i64", key, x.magnitude);
  }
  return x.negative ? static_cast<int64_t>(0 - x.magnitude) : static_cast<int64_t>(x.magnitude);
}

Expected<float> GgufFile::get_f32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->type() == GgufType::kF32) return v->as<float>();
  if (v->type() == GgufType::kF64) return static_cast<float>(v->as<double>());
  return wrong_type(key, "f32", *v);
}

Expected<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->type() != GgufType::kBool) return wrong_type(key, "bool", *v);
  return v->as<uint8_t>() != 0;
}

Expected<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->type() != GgufType::kString) return wrong_type(key, "string", *v);
  return v->as_string();
}

Expected<const std::vector<std::string>*> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->type() != GgufType::kArray || v->elem_type() != GgufType::kString) {
    return wrong_type(key, "array of string", *v);
  }
  return &v->strings();
}

Expected<std::vector<int32_t>> GgufFile::get_i32_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->type() != GgufType::kArray) return wrong_type(key, "array of i32", *v);
  std::vector<int32_t> out(v->array_size());
  switch (v->elem_type()) {
    case GgufType::kI32:
      for (size_t i = 0; i < out.size(); ++i) out[i] = v->raw_at<int32_t>(i);
      return out;
    case GgufType::kU32:
      for (size_t i = 0; i < out.size(); ++i) {
        const uint32_t x = v->raw_at<uint32_t>(i);
        if (x > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
          return Status::errorf("key {}: element {} = {} does not fit in i32", key, i, x);
        }
        out[i] = static_cast<int32_t>(x);
      }
      return out;
    default:
      return wrong_type(key, "array of i32", *v);
  }
}

Expected<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->type() != GgufType::kArray || v->elem_type() != GgufType::kF32) {
    return wrong_type(key, "array of f32", *v);
  }
  std::vector<float> out(v->array_size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = v->raw_at<float>(i);
  return out;
}

Expected<uint32_t> GgufFile::get_u32_or(std::string_view key, uint32_t dflt) const {
  return find(key) == nullptr ? Expected<uint32_t>(dflt) : get_u32(key);
}
Expected<float> GgufFile::get_f32_or(std::string_view key, float dflt) const {
  return find(key) == nullptr ? Expected<float>(dflt) : get_f32(key);
}
Expected<bool> GgufFile::get_bool_or(std::string_view key, bool dflt) const {
  return find(key) == nullptr ? Expected<bool>(dflt) : get_bool(key);
}

}  // namespace ponder
