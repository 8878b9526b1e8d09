// The disk tier's files (runtime/kv_disk.h) as a restart finds them: a genuine file of three
// blocks, written once by KvDisk itself, edited by the input (pairs of a 4-byte offset and a byte
// to XOR there; a first byte 0xFF makes the rest of the input the whole file instead), then a
// KvDisk started on the directory indexes or removes it and reads back every block it still
// claims. A damaged file is refused or removed with a log line, never a crash, a sanitizer
// report, a read past the file or the cache, or a block of wrong bytes: a block that reads back
// must equal the genuine one.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/kv_disk.h"

namespace {

namespace fs = std::filesystem;

constexpr int kBlocks = 3;

std::vector<int32_t> tokens_of(int k) {
  std::vector<int32_t> t(ponder::kKvBlockSize);
  for (int i = 0; i < ponder::kKvBlockSize; ++i) t[static_cast<size_t>(i)] = 1000 * k + i;
  return t;
}

ponder::KvCache make_cache() {
  ponder::KvCache c(2, 2, 64, 8, ponder::kKvBlockSize, ponder::KvType::kQ8_0,
                    ponder::KvType::kQ8_0);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t b = 0; b < 8; ++b)
        for (int64_t s = 0; s < ponder::kKvBlockSize; ++s) {
          for (int64_t i = 0; i < c.k_row_bytes(); ++i)
            c.k_row(l, b, h, s)[i] = static_cast<uint8_t>(l * 31 + h * 7 + b * 5 + s * 3 + i);
          for (int64_t i = 0; i < c.v_row_bytes(); ++i)
            c.v_row(l, b, h, s)[i] = static_cast<uint8_t>(l * 29 + h * 11 + b + s * 13 + i);
        }
  return c;
}

struct Setup {
  std::string root, dir;
  ponder::KvCache genuine = make_cache();  // blocks 0..2 hold the file's blocks
  std::vector<uint8_t> file;
  Setup() {
    root =
        (fs::temp_directory_path() / ("ponder-fuzz-kvdisk-" + std::to_string(::getpid()))).string();
    fs::remove_all(root);
    ponder::KvDiskOptions opts;
    opts.dir = root;
    ponder::KvDisk disk(opts, "fuzz", genuine);
    std::vector<std::vector<int32_t>> toks;
    for (int k = 0; k < kBlocks; ++k) toks.push_back(tokens_of(k + 1));
    std::vector<ponder::TierBlock> blocks;
    for (int k = 0; k < kBlocks; ++k)
      blocks.push_back({static_cast<uint64_t>(k + 1), k, toks[static_cast<size_t>(k)]});
    disk.write(blocks);
    disk.flush();
    dir = disk.dir();
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".kvb") continue;
      std::ifstream in(e.path(), std::ios::binary);
      file.assign(std::istreambuf_iterator<char>(in), {});
      fs::remove(e.path());
    }
    if (file.empty()) std::abort();
    static std::string at_exit;
    at_exit = root;
    std::atexit([] { fs::remove_all(at_exit); });
  }
};

bool same_block(const ponder::KvCache& a, int64_t ba, const ponder::KvCache& b, int64_t bb) {
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h)
      if (std::memcmp(a.k_row(l, ba, h, 0), b.k_row(l, bb, h, 0),
                      static_cast<size_t>(ponder::kKvBlockSize * a.k_row_bytes())) != 0 ||
          std::memcmp(a.v_row(l, ba, h, 0), b.v_row(l, bb, h, 0),
                      static_cast<size_t>(ponder::kKvBlockSize * a.v_row_bytes())) != 0)
        return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Setup setup;
  std::vector<uint8_t> bytes;
  if (size > 0 && data[0] == 0xFF) {
    bytes.assign(data + 1, data + size);
  } else {
    bytes = setup.file;
    for (size_t i = 0; i + 5 <= size; i += 5) {
      uint32_t at;
      std::memcpy(&at, data + i, 4);
      if (at & 0x80000000u) {  // the top bit: cut the file here instead
        bytes.resize(std::min<size_t>(bytes.size(), at & 0x7fffffffu));
      } else if (!bytes.empty()) {
        bytes[at % bytes.size()] ^= data[i + 4];
      }
    }
  }
  {
    std::ofstream out(fs::path(setup.dir) / "input.kvb", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  ponder::KvCache cache = make_cache();
  ponder::KvDiskOptions opts;
  opts.dir = setup.root;
  {
    ponder::KvDisk disk(opts, "fuzz", cache);
    for (int k = 0; k < kBlocks; ++k) {
      const std::vector<int32_t> t = tokens_of(k + 1);
      if (!disk.contains(static_cast<uint64_t>(k + 1), t)) continue;
      if (disk.read(static_cast<uint64_t>(k + 1), t, 7) && !same_block(setup.genuine, k, cache, 7))
        std::abort();  // a block read back that is not the one written
    }
  }
  std::error_code ec;
  fs::remove(fs::path(setup.dir) / "input.kvb", ec);
  return 0;
}
