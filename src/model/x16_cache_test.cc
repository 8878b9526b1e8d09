#include "model/x16_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/qwen2_model.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;
const std::string kModel = std::string(PONDER_SHARED_DIR) + "/models/tiny-Q4_K_M.gguf";

struct X16CacheTest : ::testing::Test {
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("ponder-x16-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    opts.dir = dir;
    opts.min_bytes = 0;  // the tiny model's copies are small
    // The host disk's fullness is not under test here (CI's disk keeps less than 10% free);
    // TheDirectoryIsBoundedLeastRecentlyUsedFirst tests the reserve.
    opts.min_free_share = 0;
  }
  void TearDown() override { fs::remove_all(dir); }

  // Loads the tiny model with the cache and returns the last-row logits of a short prompt.
  std::vector<float> run(bool* from_cache) {
    auto file = GgufFile::open(kModel);
    EXPECT_TRUE(file.has_value());
    auto model = Qwen2Model::load(*file, true, 2, opts);
    EXPECT_TRUE(model.has_value()) << model.status().message();
    Qwen2Model& m = **model;
    EXPECT_GT(m.x16_copy_bytes(), 0);
    *from_cache = m.x16_from_cache();
    m.wait_x16_cache_write();
    ThreadPool pool(2);
    KvCache cache = m.make_cache(4, 16);
    const std::vector<int32_t> table = {0};
    Batch b;
    b.block_tables.push_back(table);
    const std::vector<int32_t> prompt = {11, 22, 33, 44, 55};
    for (size_t i = 0; i < prompt.size(); ++i)
      b.rows.push_back({prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size()});
    std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
    EXPECT_TRUE(m.forward(b, cache, logits.data(), pool).is_ok());
    return logits;
  }

  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    if (fs::exists(dir)) {
      for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
    }
    return out;
  }

  std::string dir;
  X16CacheOptions opts;
};

TEST_F(X16CacheTest, ASecondLoadReadsTheCacheAndComputesTheSameLogits) {
  bool cached = true;
  const std::vector<float> cold = run(&cached);
  EXPECT_FALSE(cached);
  ASSERT_EQ(files().size(), 1u) << "one cache file, no temporary left";
  EXPECT_EQ(files()[0].extension(), ".x16");
  const std::vector<float> warm = run(&cached);
  EXPECT_TRUE(cached);
  EXPECT_EQ(cold, warm);  // bit for bit
}

TEST_F(X16CacheTest, ADamagedOrTruncatedCacheIsRebuiltNotTrusted) {
  bool cached = true;
  const std::vector<float> cold = run(&cached);
  ASSERT_EQ(files().size(), 1u);
  const fs::path path = files()[0];
  const auto size = fs::file_size(path);
  {  // one flipped byte in the copies
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 100));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(size - 100));
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  EXPECT_EQ(run(&cached), cold);
  EXPECT_FALSE(cached) << "a flipped byte must fail the checksum";
  ASSERT_EQ(files().size(), 1u) << "rewritten";
  EXPECT_EQ(run(&cached), cold);
  EXPECT_TRUE(cached);
  fs::resize_file(path, size - 4096);
  EXPECT_EQ(run(&cached), cold);
  EXPECT_FALSE(cached) << "a truncated file is not read";
}

TEST_F(X16CacheTest, AnUnwritableDirectoryCostsOnlyTheCache) {
  opts.dir = "/proc/ponder-cannot-write-here";
  bool cached = true;
  const std::vector<float> a = run(&cached);
  EXPECT_FALSE(cached);
  const std::vector<float> b = run(&cached);
  EXPECT_FALSE(cached);
  EXPECT_EQ(a, b);
}

// The directory stays under its bound: the least recently used files go first (a read counts as a
// use), the file being written is kept, and one larger than the bound is not written at all.
TEST_F(X16CacheTest, TheDirectoryIsBoundedLeastRecentlyUsedFirst) {
  fs::create_directories(dir);
  auto put = [&](const std::string& name, int64_t bytes, int age_s) {
    const fs::path p = fs::path(dir) / name;
    std::ofstream(p) << std::string(static_cast<size_t>(bytes), 'x');
    fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  };
  put("old-a.x16", 1000, 300);
  put("mid-b.x16", 1000, 200);
  put("new-c.x16", 1000, 100);
  put("other.txt", 5000, 400);  // not a cache file: never counted, never removed
  X16CacheUsage u = x16_cache_usage(dir, "mid");
  EXPECT_EQ(u.files, 3);
  EXPECT_EQ(u.bytes, 3000);
  EXPECT_EQ(u.model_files, 1);
  EXPECT_EQ(u.model_bytes, 1000);
  opts.max_bytes = 4096 + 1000 + 2500;  // the header page + 1000 bytes, and room for two more
  ASSERT_TRUE(x16_cache_make_room(opts, dir + "/fresh-d.x16", 1000));
  EXPECT_FALSE(fs::exists(dir + "/old-a.x16"));
  EXPECT_TRUE(fs::exists(dir + "/mid-b.x16"));
  EXPECT_TRUE(fs::exists(dir + "/new-c.x16"));
  EXPECT_TRUE(fs::exists(dir + "/other.txt"));
  // Larger than the bound alone: nothing is removed, nothing may be written.
  EXPECT_FALSE(x16_cache_make_room(opts, dir + "/huge-e.x16", opts.max_bytes));
  EXPECT_TRUE(fs::exists(dir + "/mid-b.x16"));
  // A disk that would keep less than its reserve free: not written.
  opts.min_free_share = 1.0;
  EXPECT_FALSE(x16_cache_make_room(opts, dir + "/fresh-d.x16", 1000));
}

// A real load refreshes its file's time, so a model in use is the last one evicted.
TEST_F(X16CacheTest, AReadMakesTheFileTheMostRecentlyUsed) {
  bool from_cache = false;
  run(&from_cache);
  ASSERT_EQ(files().size(), 1u);
  const fs::path written = files()[0];
  fs::last_write_time(written, fs::file_time_type::clock::now() - std::chrono::hours(24));
  const auto before = fs::last_write_time(written);
  run(&from_cache);
  ASSERT_TRUE(from_cache);
  EXPECT_GT(fs::last_write_time(written), before);
}

// PONDER_X16_CACHE takes the word the flag takes: "off" is no cache, not a directory named off.
TEST(X16CacheDefaultTest, OffAndZeroTurnTheCacheOffAnotherValueIsTheDirectory) {
  const char* saved = std::getenv("PONDER_X16_CACHE");
  const std::string kept = saved != nullptr ? saved : "";
  for (const char* off : {"off", "0"}) {
    setenv("PONDER_X16_CACHE", off, 1);
    EXPECT_TRUE(x16_cache_default().dir.empty()) << off;
  }
  setenv("PONDER_X16_CACHE", "/tmp/somewhere", 1);
  EXPECT_EQ(x16_cache_default().dir, "/tmp/somewhere");
  if (saved != nullptr) {
    setenv("PONDER_X16_CACHE", kept.c_str(), 1);
  } else {
    unsetenv("PONDER_X16_CACHE");
  }
}

}  // namespace
}  // namespace ponder
