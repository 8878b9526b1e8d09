#include "model/x16_cache.h"

#include <gtest/gtest.h>

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

TEST(X16Checksum, IsTheSameForAnyThreadCountAndSeesOneBit) {
  std::vector<uint8_t> data(3 * (1 << 20) + 12345);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  ThreadPool pool(2);
  const uint64_t a = x16_checksum(data.data(), static_cast<int64_t>(data.size()), nullptr);
  EXPECT_EQ(a, x16_checksum(data.data(), static_cast<int64_t>(data.size()), &pool));
  data[2 * (1 << 20) + 7] ^= 1;
  EXPECT_NE(a, x16_checksum(data.data(), static_cast<int64_t>(data.size()), nullptr));
}

}  // namespace
}  // namespace ponder
