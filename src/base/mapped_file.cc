#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ponder {

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::reset() {
  if (data_ != nullptr && size_ > 0) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Expected<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::errorf("cannot open {}: {}", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::errorf("cannot stat {}: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::errorf("{} is not a regular file", path);
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void* p = mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      file.size_ = 0;
      return Status::errorf("cannot map {}: {}", path, std::strerror(err));
    }
    file.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return file;
}

void MappedFile::read_ahead() const {
  if (data_ != nullptr) madvise(const_cast<uint8_t*>(data_), size_, MADV_WILLNEED);
}

Status MappedFile::lock_in_memory() const {
  if (data_ == nullptr) return Status::ok();
  if (mlock(data_, size_) == 0) return Status::ok();
  const int err = errno;
  rlimit lim{};
  getrlimit(RLIMIT_MEMLOCK, &lim);
  return Status::errorf(
      "{}: mlock of {} MB failed ({}); the locked-memory limit is {} (ulimit -l, "
      "or run as root / with CAP_IPC_LOCK)",
      path_, size_ >> 20, std::strerror(err),
      lim.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                    : std::to_string(lim.rlim_cur >> 10) + " KB");
}

void release_pages(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace ponder
