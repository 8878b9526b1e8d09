#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace ponder {
namespace {

// Buffered writes to a file descriptor; the first error sticks and is reported at the end.
class FileSink {
 public:
  explicit FileSink(int fd) : fd_(fd) { buf_.reserve(kBufSize); }
  void put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    if (buf_.size() + n > kBufSize) flush();
    if (n >= kBufSize) {
      write_all(b, n);
    } else {
      buf_.insert(buf_.end(), b, b + n);
    }
    offset_ += n;
  }
  template <typename T>
  void put_scalar(T v) {
    put(&v, sizeof v);
  }
  void put_string(const std::string& s) {
    put_scalar<uint64_t>(s.size());
    put(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    while (offset_ % alignment != 0) {
      put(zeros, std::min<uint64_t>(sizeof zeros, alignment - offset_ % alignment));
    }
  }
  void flush() {
    write_all(buf_.data(), buf_.size());
    buf_.clear();
  }
  uint64_t offset() const { return offset_; }
  int error() const { return errno_; }

 private:
  static constexpr size_t kBufSize = 1 << 20;
  void write_all(const uint8_t* p, size_t n) {
    while (n > 0 && errno_ == 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        errno_ = errno;
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  int fd_;
  std::vector<uint8_t> buf_;
  uint64_t offset_ = 0;
  int errno_ = 0;
};

void put_value(FileSink& out, const GgufValue& v, bool with_type) {
  if (with_type) out.put_scalar<uint32_t>(static_cast<uint32_t>(v.type()));
  switch (v.type()) {
    case GgufType::kString:
      out.put_string(v.as_string());
      return;
    case GgufType::kArray:
      out.put_scalar<uint32_t>(static_cast<uint32_t>(v.elem_type()));
      out.put_scalar<uint64_t>(v.array_size());
      if (v.elem_type() == GgufType::kString) {
        for (const std::string& s : v.strings()) out.put_string(s);
      } else if (v.elem_type() == GgufType::kArray) {
        for (const GgufValue& a : v.arrays()) put_value(out, a, false);
      } else {
        out.put(v.raw().data(), v.raw().size());
      }
      return;
    default: {
      uint64_t bits = v.as_u64_bits();
      out.put(&bits, gguf_scalar_size(v.type()));
    }
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::remove(const std::string& key) {
  std::erase_if(kv_, [&](const auto& kv) { return kv.first == key; });
}

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  set("general.alignment", GgufValue::u32(alignment));
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                              Producer producer) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (shape.empty() || shape.size() > 4) {
    return Status::errorf("tensor {}: {} dimensions (expected 1..4)", name, shape.size());
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) return Status::errorf("tensor {}: dimension {} is not positive", name, d);
    n *= d;
  }
  if (shape[0] % info.block_size != 0) {
    return Status::errorf("tensor {}: row length {} is not a multiple of the {} block size {}",
                          name, shape[0], info.name, info.block_size);
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return Status::errorf("duplicate tensor name {}", name);
  }
  tensors_.push_back(
      {name, type, std::move(shape), n / info.block_size * info.type_size, std::move(producer)});
  return Status::ok();
}

Status GgufWriter::add_tensor_bytes(const std::string& name, GgmlType type,
                                    std::vector<int64_t> shape, const void* data) {
  return add_tensor(name, type, std::move(shape), [data](uint8_t* out, int64_t n) {
    std::memcpy(out, data, static_cast<size_t>(n));
    return Status::ok();
  });
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf("cannot create {}: {}", tmp, std::strerror(errno));
  auto fail = [&](Status st) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  };

  FileSink out(fd);
  out.put_scalar<uint32_t>(0x46554747);  // "GGUF"
  out.put_scalar<uint32_t>(3);
  out.put_scalar<uint64_t>(tensors_.size());
  out.put_scalar<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    out.put_string(key);
    put_value(out, value, true);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.put_string(t.name);
    out.put_scalar<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) out.put_scalar<uint64_t>(static_cast<uint64_t>(d));
    out.put_scalar<uint32_t>(static_cast<uint32_t>(t.type));
    out.put_scalar<uint64_t>(offset);
    offset += (static_cast<uint64_t>(t.n_bytes) + alignment_ - 1) / alignment_ * alignment_;
  }
  out.pad_to(alignment_);

  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    buf.assign(static_cast<size_t>(t.n_bytes), 0);
    Status st = t.producer(buf.data(), t.n_bytes);
    if (!st.is_ok()) return fail(st.with_context("tensor " + t.name));
    out.put(buf.data(), buf.size());
    out.pad_to(alignment_);
    if (out.error() != 0) break;
    if (progress_) progress_(i + 1, tensors_.size(), t.name);
  }
  out.flush();
  if (out.error() != 0) {
    return fail(Status::errorf("cannot write {}: {}", tmp, std::strerror(out.error())));
  }
  if (::fsync(fd) != 0 && errno != EINVAL) {
    return fail(Status::errorf("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::errorf("cannot write {}: {}", tmp, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::errorf("cannot rename {} to {}: {}", tmp, path, std::strerror(err));
  }
  return Status::ok();
}

}  // namespace ponder
