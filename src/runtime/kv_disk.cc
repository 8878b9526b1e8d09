#include "runtime/kv_disk.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "base/file_io.h"
#include "base/hash128.h"
#include "base/log.h"
#include "base/timer.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'P', 'O', 'N', 'D', 'K', 'V', 'B', '1'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kAlign = 4096;  // the blocks start page-aligned

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t n_blocks;
  uint64_t key_hash;
  uint32_t n_layer, n_head_kv, block_size, k_row_bytes, v_row_bytes, reserved;
  uint64_t block_bytes;
  uint64_t header_bytes;  // this header, the entries, the padding
  uint64_t checksum;      // of this header (with checksum 0) and the entries
};
struct Entry {
  uint64_t hash;
  uint64_t checksum;  // of the block's bytes
  int32_t tokens[kKvBlockSize];
};

int64_t header_bytes_for(int64_t n_blocks) {
  const int64_t raw = static_cast<int64_t>(sizeof(FileHeader) + sizeof(Entry) * n_blocks);
  return (raw + kAlign - 1) / kAlign * kAlign;
}

uint64_t head_checksum(std::vector<uint8_t> head, int64_t n_blocks) {
  FileHeader* h = reinterpret_cast<FileHeader*>(head.data());
  h->checksum = 0;
  return checksum64(head.data(),
                    static_cast<int64_t>(sizeof(FileHeader) + sizeof(Entry) * n_blocks));
}

bool is_kv_file(const fs::path& p) { return p.extension() == ".kvb"; }

// A temporary file of write_file_atomically ("<name>.tmp.<pid>.<n>") whose writer is dead.
bool is_dead_temporary(const std::string& name) {
  const size_t at = name.find(".tmp.");
  if (at == std::string::npos) return false;
  const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

KvDisk::KvDisk(KvDiskOptions opts, const std::string& key, KvCache& cache)
    : opts_(std::move(opts)), cache_(cache) {
  Hash128 h;
  h.add(key);
  const std::string hex = h.hex();
  key_hash_ = std::strtoull(hex.substr(0, 16).c_str(), nullptr, 16);
  dir_ = (fs::path(opts_.dir) / hex).string();
  block_bytes_ = cache_.n_layer() * cache_.n_head_kv() * cache_.block_size() *
                 (cache_.k_row_bytes() + cache_.v_row_bytes());
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::exists(fs::path(dir_) / "key.txt")) std::ofstream(fs::path(dir_) / "key.txt") << key;
  scan();
  const KvDiskStats s = stats();
  log_info(
      "kv disk: {} holds {} blocks of this model and cache ({} files, {:.2f} GB; bound {:.2f} GB)",
      dir_, s.blocks, s.files, s.bytes / 1e9, opts_.max_bytes / 1e9);
  writer_ = std::thread([this] { writer_loop(); });
}

KvDisk::~KvDisk() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
  if (read_fd_ >= 0) ::close(read_fd_);
}

void KvDisk::scan() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (is_dead_temporary(name)) {
      std::error_code re;
      fs::remove(e.path(), re);
      log_info("kv disk: removed {}, a write that a stopped process left unfinished", name);
    } else if (is_kv_file(e.path()) && !index_file(name)) {
      std::error_code re;
      fs::remove(e.path(), re);
      stats_.read_errors++;
      log_warn("kv disk: {} is damaged or not this cache's: removed; its blocks are computed",
               e.path().string());
    }
  }
}

bool KvDisk::index_file(const std::string& name) {
  const std::string path = (fs::path(dir_) / name).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  FileHeader h{};
  bool ok = ::fstat(fd, &st) == 0 && pread_all(fd, reinterpret_cast<uint8_t*>(&h), sizeof h, 0) &&
            std::memcmp(h.magic, kMagic, 8) == 0 && h.version == kVersion &&
            h.key_hash == key_hash_ && h.n_layer == cache_.n_layer() &&
            h.n_head_kv == cache_.n_head_kv() && h.block_size == cache_.block_size() &&
            h.k_row_bytes == cache_.k_row_bytes() && h.v_row_bytes == cache_.v_row_bytes() &&
            static_cast<int64_t>(h.block_bytes) == block_bytes_ && h.n_blocks > 0 &&
            h.n_blocks < (1u << 24) &&
            static_cast<int64_t>(h.header_bytes) == header_bytes_for(h.n_blocks) &&
            st.st_size == static_cast<off_t>(h.header_bytes + h.n_blocks * h.block_bytes);
  std::vector<uint8_t> head;
  if (ok) {
    head.resize(h.header_bytes);
    ok = pread_all(fd, head.data(), static_cast<int64_t>(head.size()), 0) &&
         head_checksum(head, h.n_blocks) == h.checksum;
  }
  ::close(fd);
  if (!ok) return false;
  const int32_t id = next_file_++;
  FileInfo info{name, {}, st.st_size, static_cast<int64_t>(h.header_bytes)};
  const Entry* entries = reinterpret_cast<const Entry*>(head.data() + sizeof(FileHeader));
  for (uint32_t i = 0; i < h.n_blocks; ++i) {
    Slot slot{id, static_cast<int32_t>(i), entries[i].checksum, {}};
    std::copy(entries[i].tokens, entries[i].tokens + kKvBlockSize, slot.tokens.begin());
    if (index_.emplace(entries[i].hash, slot).second) info.hashes.push_back(entries[i].hash);
  }
  files_.emplace(id, std::move(info));
  return true;
}

void KvDisk::drop_file_locked(int32_t file) {
  const auto it = files_.find(file);
  if (it == files_.end()) return;
  for (uint64_t h : it->second.hashes) {
    const auto s = index_.find(h);
    if (s != index_.end() && s->second.file == file) index_.erase(s);
  }
  files_.erase(it);
}

bool KvDisk::contains(uint64_t hash, std::span<const int32_t> tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = index_.find(hash);
  return it != index_.end() && std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin());
}

bool KvDisk::read(uint64_t hash, std::span<const int32_t> tokens, int32_t block) {
  Slot slot;
  std::string name;
  int64_t header_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = index_.find(hash);
    if (it == index_.end() || !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin()))
      return false;
    slot = it->second;
    const FileInfo& f = files_.at(slot.file);
    name = f.name;
    header_bytes = f.header_bytes;
  }
  const Timer timer;
  const std::string path = (fs::path(dir_) / name).string();
  if (read_file_ != slot.file) {
    if (read_fd_ >= 0) ::close(read_fd_);
    read_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    read_file_ = slot.file;
    // Used now: the bound removes the least recently used files first.
    if (read_fd_ >= 0) ::futimens(read_fd_, nullptr);
  }
  if (read_fd_ < 0) {  // removed meanwhile (another server's bound): computed instead
    std::lock_guard<std::mutex> lock(mu_);
    drop_file_locked(slot.file);
    return false;
  }
  scratch_.resize(static_cast<size_t>(block_bytes_));
  const bool ok = pread_all(read_fd_, scratch_.data(), block_bytes_,
                            header_bytes + slot.index * block_bytes_) &&
                  checksum64(scratch_.data(), block_bytes_) == slot.checksum;
  if (!ok) {
    log_warn("kv disk: {} is damaged (block {} reads wrong): removed; its blocks are computed",
             path, slot.index);
    ::close(read_fd_);
    read_fd_ = -1;
    read_file_ = 0;
    std::error_code ec;
    fs::remove(path, ec);
    std::lock_guard<std::mutex> lock(mu_);
    drop_file_locked(slot.file);
    stats_.read_errors++;
    return false;
  }
  scatter(scratch_.data(), block);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.blocks_read++;
  stats_.read_s += timer.seconds();
  return true;
}

void KvDisk::gather(int32_t block, uint8_t* dst) const {
  const int64_t k_bytes = cache_.block_size() * cache_.k_row_bytes();
  const int64_t v_bytes = cache_.block_size() * cache_.v_row_bytes();
  for (int64_t l = 0; l < cache_.n_layer(); ++l) {
    for (int64_t h = 0; h < cache_.n_head_kv(); ++h) {
      std::memcpy(dst, cache_.k_row(l, block, h, 0), static_cast<size_t>(k_bytes));
      dst += k_bytes;
      std::memcpy(dst, cache_.v_row(l, block, h, 0), static_cast<size_t>(v_bytes));
      dst += v_bytes;
    }
  }
}

void KvDisk::scatter(const uint8_t* src, int32_t block) {
  const int64_t k_bytes = cache_.block_size() * cache_.k_row_bytes();
  const int64_t v_bytes = cache_.block_size() * cache_.v_row_bytes();
  for (int64_t l = 0; l < cache_.n_layer(); ++l) {
    for (int64_t h = 0; h < cache_.n_head_kv(); ++h) {
      std::memcpy(cache_.k_row(l, block, h, 0), src, static_cast<size_t>(k_bytes));
      src += k_bytes;
      std::memcpy(cache_.v_row(l, block, h, 0), src, static_cast<size_t>(v_bytes));
      src += v_bytes;
    }
  }
}

std::vector<int32_t> KvDisk::write(std::span<const TierBlock> blocks) {
  Job job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return {};
    for (const TierBlock& b : blocks) {
      if (index_.contains(b.hash) || pending_.contains(b.hash)) continue;
      if (queued_bytes_ + block_bytes_ > opts_.max_queued_bytes) {
        stats_.blocks_dropped++;  // in position order: the prefix goes first
        continue;
      }
      pending_.insert(b.hash);
      queued_bytes_ += block_bytes_;
      job.blocks.push_back(b.block);
      job.hashes.push_back(b.hash);
      Slot s;
      std::copy(b.tokens.begin(), b.tokens.end(), s.tokens.begin());
      job.slots.push_back(s);
    }
    if (job.blocks.empty()) return {};
    job.bytes = static_cast<int64_t>(job.blocks.size()) * block_bytes_;
    std::vector<int32_t> held = job.blocks;
    queue_.push_back(std::move(job));
    cv_.notify_one();
    return held;  // the writer copies them; copied() hands them back
  }
}

std::vector<int32_t> KvDisk::copied() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(copied_, {});
}

void KvDisk::set_on_copied(std::function<void()> f) {
  std::lock_guard<std::mutex> lock(on_copied_mu_);
  on_copied_ = std::move(f);
}

void KvDisk::wait_copied() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !copying_; });
}

bool KvDisk::copy_out(Job* job) {
  const Timer timer;
  if (spare_capacity_ >= job->bytes) {
    job->data = std::move(spare_);
    job->capacity = std::exchange(spare_capacity_, 0);
  } else {
    job->data = alloc_huge_pages(static_cast<size_t>(job->bytes));
    job->capacity = job->bytes;
  }
  if (job->data != nullptr) {
    for (size_t i = 0; i < job->blocks.size(); ++i) {
      gather(job->blocks[i], job->data.get() + i * static_cast<size_t>(block_bytes_));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    copied_.insert(copied_.end(), job->blocks.begin(), job->blocks.end());
    copying_ = false;
    stats_.copy_s += timer.seconds();
    if (job->data == nullptr) {  // out of memory: not written (a later turn's write may be)
      for (uint64_t hash : job->hashes) pending_.erase(hash);
      queued_bytes_ -= job->bytes;
      stats_.blocks_dropped += static_cast<int64_t>(job->blocks.size());
      writing_ = false;
    }
  }
  idle_cv_.notify_all();
  std::lock_guard<std::mutex> lock(on_copied_mu_);
  if (on_copied_) on_copied_();
  return job->data != nullptr;
}

void KvDisk::writer_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      copying_ = true;
    }
    if (!copy_out(&job)) continue;
    const int64_t n = static_cast<int64_t>(job.hashes.size());
    const int64_t head_bytes = header_bytes_for(n);
    std::vector<uint8_t> head(static_cast<size_t>(head_bytes), 0);
    FileHeader h{};
    std::memcpy(h.magic, kMagic, 8);
    h.version = kVersion;
    h.n_blocks = static_cast<uint32_t>(n);
    h.key_hash = key_hash_;
    h.n_layer = static_cast<uint32_t>(cache_.n_layer());
    h.n_head_kv = static_cast<uint32_t>(cache_.n_head_kv());
    h.block_size = static_cast<uint32_t>(cache_.block_size());
    h.k_row_bytes = static_cast<uint32_t>(cache_.k_row_bytes());
    h.v_row_bytes = static_cast<uint32_t>(cache_.v_row_bytes());
    h.block_bytes = static_cast<uint64_t>(block_bytes_);
    h.header_bytes = static_cast<uint64_t>(head_bytes);
    Entry* entries = reinterpret_cast<Entry*>(head.data() + sizeof(FileHeader));
    for (int64_t i = 0; i < n; ++i) {
      Slot& s = job.slots[static_cast<size_t>(i)];
      s.checksum = checksum64(job.data.get() + i * block_bytes_, block_bytes_);
      entries[i].hash = job.hashes[static_cast<size_t>(i)];
      entries[i].checksum = s.checksum;
      std::copy(s.tokens.begin(), s.tokens.end(), entries[i].tokens);
    }
    std::memcpy(head.data(), &h, sizeof h);
    reinterpret_cast<FileHeader*>(head.data())->checksum = head_checksum(head, n);

    const int64_t need = head_bytes + job.bytes;
    const std::string name =
        fmt::format("{:016x}-{}-{}.kvb", job.hashes[0], ::getpid(), next_name_++);
    bool written = false, too_big = need > opts_.max_bytes;
    int err = 0;
    if (!too_big) {
      make_room(need);
      written = write_file_atomically((fs::path(dir_) / name).string(), head.data(), head_bytes,
                                      job.data.get(), job.bytes);
      err = written ? 0 : errno;
    }
    bool log_failure = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint64_t hash : job.hashes) pending_.erase(hash);
      queued_bytes_ -= job.bytes;
      if (written) {
        const int32_t id = next_file_++;
        FileInfo info{name, {}, need, head_bytes};
        for (int64_t i = 0; i < n; ++i) {
          Slot s = job.slots[static_cast<size_t>(i)];
          s.file = id;
          s.index = static_cast<int32_t>(i);
          if (index_.emplace(job.hashes[static_cast<size_t>(i)], s).second)
            info.hashes.push_back(job.hashes[static_cast<size_t>(i)]);
        }
        files_.emplace(id, std::move(info));
        stats_.blocks_written += n;
        write_failing_ = false;
      } else if (too_big) {
        stats_.blocks_dropped += n;
      } else {
        stats_.write_errors++;
        log_failure = !write_failing_;
        write_failing_ = true;
      }
      writing_ = false;
    }
    if (job.capacity > spare_capacity_) {  // the writer's own: no lock
      spare_ = std::move(job.data);
      spare_capacity_ = job.capacity;
    }
    if (log_failure) {
      log_warn(
          "kv disk: writing to {} failed ({}): blocks are not kept on disk until a write "
          "succeeds",
          dir_, std::strerror(err));
    }
    idle_cv_.notify_all();
  }
}

void KvDisk::make_room(int64_t need) {
  struct OnDisk {
    fs::path path;
    int64_t bytes;
    fs::file_time_type used;
  };
  std::vector<OnDisk> all;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(opts_.dir, ec)) {
    std::error_code de;
    if (!d.is_directory(de)) continue;
    for (const auto& e : fs::directory_iterator(d.path(), de)) {
      if (!is_kv_file(e.path())) continue;
      std::error_code fe;
      const auto size = e.file_size(fe);
      const auto time = e.last_write_time(fe);
      if (fe) continue;
      all.push_back({e.path(), static_cast<int64_t>(size), time});
      total += static_cast<int64_t>(size);
    }
  }
  if (total + need <= opts_.max_bytes) return;
  std::sort(all.begin(), all.end(),
            [](const OnDisk& a, const OnDisk& b) { return a.used < b.used; });
  int64_t removed = 0, removed_files = 0;
  for (const OnDisk& f : all) {
    if (total + need <= opts_.max_bytes) break;
    std::error_code re;
    if (!fs::remove(f.path, re)) continue;
    total -= f.bytes;
    removed += f.bytes;
    removed_files++;
    if (f.path.parent_path() == fs::path(dir_)) {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string name = f.path.filename().string();
      for (const auto& [id, info] : files_) {
        if (info.name == name) {
          drop_file_locked(id);
          break;
        }
      }
    }
  }
  if (removed_files > 0) {
    log_debug(
        "kv disk: removed {} files ({:.1f} MB, the least recently used) to stay under {:.2f} GB",
        removed_files, removed / 1e6, opts_.max_bytes / 1e9);
  }
}

void KvDisk::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

KvDiskStats KvDisk::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KvDiskStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  s.files = static_cast<int64_t>(files_.size());
  for (const auto& [id, f] : files_) s.bytes += f.bytes;
  return s;
}

}  // namespace ponder
