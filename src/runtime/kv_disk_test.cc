// The prefix cache on disk: its files (a restart reads back bit for bit what was written; a
// damaged, foreign or unfinished file is removed and never used; the bound; an unwritable
// directory), and the Engine with it: a prompt whose prefix is on disk gives the same tokens and
// logprobs as one computed, after a restart, for several weight types and KV cache types.
#include "runtime/kv_disk.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/engine_test_support.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;

class KvDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("ponder-kvdisk-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    opts.dir = dir;
  }
  void TearDown() override { fs::remove_all(dir); }

  // A cache of 8 blocks with random bytes in every row.
  static KvCache random_cache(KvType t, uint32_t seed) {
    KvCache c(2, 2, 64, 8, kKvBlockSize, t, t);
    std::mt19937 rng(seed);
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t b = 0; b < 8; ++b)
          for (int64_t s = 0; s < kKvBlockSize; ++s) {
            for (int64_t i = 0; i < c.k_row_bytes(); ++i)
              c.k_row(l, b, h, s)[i] = static_cast<uint8_t>(rng());
            for (int64_t i = 0; i < c.v_row_bytes(); ++i)
              c.v_row(l, b, h, s)[i] = static_cast<uint8_t>(rng());
          }
    return c;
  }
  static bool same_block(const KvCache& a, int64_t ba, const KvCache& b, int64_t bb) {
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h) {
        if (std::memcmp(a.k_row(l, ba, h, 0), b.k_row(l, bb, h, 0),
                        static_cast<size_t>(kKvBlockSize * a.k_row_bytes())) != 0 ||
            std::memcmp(a.v_row(l, ba, h, 0), b.v_row(l, bb, h, 0),
                        static_cast<size_t>(kKvBlockSize * a.v_row_bytes())) != 0)
          return false;
      }
    return true;
  }
  static std::vector<int32_t> tokens_of(int32_t k) {
    std::vector<int32_t> t(kKvBlockSize);
    for (int32_t i = 0; i < kKvBlockSize; ++i) t[static_cast<size_t>(i)] = 1000 * k + i;
    return t;
  }
  std::vector<fs::path> files(const std::string& sub) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(sub))
      if (e.path().extension() == ".kvb") out.push_back(e.path());
    return out;
  }

  std::string dir;
  KvDiskOptions opts;
};

TEST_F(KvDiskTest, BlocksSurviveARestartBitForBit) {
  for (KvType t : {KvType::kF16, KvType::kBF16, KvType::kQ8_0}) {
    KvCache src = random_cache(t, 1);
    const auto t1 = tokens_of(1), t2 = tokens_of(2);
    {
      KvDisk disk(opts, "model A", src);
      const std::vector<TierBlock> run = {{11, 3, t1}, {22, 5, t2}};
      disk.write(run);
      disk.write(run);  // already queued or written: nothing more
      disk.flush();
      EXPECT_EQ(disk.stats().blocks_written, 2);
      EXPECT_EQ(disk.stats().files, 1);
      EXPECT_TRUE(disk.contains(22, t2));
    }
    KvCache dst = random_cache(t, 2);
    KvDisk disk(opts, "model A", dst);  // a restart
    EXPECT_EQ(disk.stats().blocks, 2);
    EXPECT_TRUE(disk.contains(11, t1));
    EXPECT_FALSE(disk.contains(11, t2)) << "the tokens are compared too";
    EXPECT_FALSE(disk.contains(33, t1));
    ASSERT_TRUE(disk.read(22, t2, 0));
    ASSERT_TRUE(disk.read(11, t1, 7));
    EXPECT_TRUE(same_block(src, 5, dst, 0)) << kv_type_name(t);
    EXPECT_TRUE(same_block(src, 3, dst, 7)) << kv_type_name(t);
    EXPECT_EQ(disk.stats().blocks_read, 2);
    fs::remove_all(dir);
  }
}

TEST_F(KvDiskTest, ADamagedFileIsRemovedAndNeverUsed) {
  KvCache src = random_cache(KvType::kF16, 1);
  const auto t1 = tokens_of(1), t2 = tokens_of(2);
  std::string sub;
  {
    KvDisk disk(opts, "model A", src);
    disk.write(std::vector<TierBlock>{{11, 1, t1}, {22, 2, t2}});
    disk.flush();
    sub = disk.dir();
  }
  ASSERT_EQ(files(sub).size(), 1u);
  const fs::path f = files(sub)[0];
  // One bit of the second block's bytes.
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(fs::file_size(f) - 100));
    io.put('\x5a');
  }
  KvCache dst = random_cache(KvType::kF16, 2);
  const KvCache before = random_cache(KvType::kF16, 2);
  KvDisk disk(opts, "model A", dst);
  EXPECT_TRUE(disk.contains(22, t2)) << "the header is sound: the damage shows on reading";
  EXPECT_FALSE(disk.read(22, t2, 4));
  EXPECT_TRUE(same_block(dst, 4, before, 4)) << "nothing of a damaged block reaches the cache";
  EXPECT_FALSE(fs::exists(f));
  EXPECT_FALSE(disk.contains(11, t1)) << "the whole file is gone";
  EXPECT_EQ(disk.stats().read_errors, 1);
}

TEST_F(KvDiskTest, ATornForeignOrUnfinishedFileIsRemovedAtStart) {
  KvCache src = random_cache(KvType::kF16, 1);
  std::string sub;
  {
    KvDisk disk(opts, "model A", src);
    disk.write(std::vector<TierBlock>{{11, 1, tokens_of(1)}});
    disk.flush();
    sub = disk.dir();
  }
  const fs::path good = files(sub)[0];
  // Torn: the same file cut short. Foreign: another key's file in this directory. Unfinished: a
  // temporary of a process that is gone.
  fs::copy_file(good, fs::path(sub) / "torn.kvb");
  fs::resize_file(fs::path(sub) / "torn.kvb", fs::file_size(good) - 4096);
  std::string other_sub;
  {
    KvDisk other(opts, "model B", src);
    other.write(std::vector<TierBlock>{{44, 1, tokens_of(4)}});
    other.flush();
    other_sub = other.dir();
  }
  EXPECT_NE(other_sub, sub);
  fs::copy_file(files(other_sub)[0], fs::path(sub) / "foreign.kvb");
  std::ofstream(fs::path(sub) / "x.kvb.tmp.2147480000.0") << "half";
  KvDisk disk(opts, "model A", src);
  EXPECT_FALSE(fs::exists(fs::path(sub) / "torn.kvb"));
  EXPECT_FALSE(fs::exists(fs::path(sub) / "foreign.kvb"));
  EXPECT_FALSE(fs::exists(fs::path(sub) / "x.kvb.tmp.2147480000.0"));
  EXPECT_TRUE(fs::exists(good));
  EXPECT_EQ(disk.stats().read_errors, 2);
  EXPECT_FALSE(disk.contains(44, tokens_of(4))) << "model B's block is never model A's";
  EXPECT_TRUE(disk.contains(11, tokens_of(1)));
}

TEST_F(KvDiskTest, TheBoundRemovesTheLeastRecentlyUsedFilesOfEveryModel) {
  KvCache src = random_cache(KvType::kF16, 1);
  int64_t one_file = 0;
  {
    KvDisk disk(opts, "model A", src);
    disk.write(std::vector<TierBlock>{{11, 1, tokens_of(1)}});
    disk.flush();
    one_file = disk.stats().bytes;
  }
  opts.max_bytes = 2 * one_file + one_file / 2;  // room for two files
  KvDisk b(opts, "model B", src);
  KvDisk a(opts, "model A", src);
  ASSERT_TRUE(a.read(11, tokens_of(1), 0));  // model A's file is used now
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  b.write(std::vector<TierBlock>{{22, 2, tokens_of(2)}});
  b.flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  b.write(std::vector<TierBlock>{{33, 3, tokens_of(3)}});
  b.flush();
  // Three files for room for two: the least recently used (model A's, read before B wrote) went.
  EXPECT_TRUE(files(a.dir()).empty());
  EXPECT_EQ(files(b.dir()).size(), 2u);
  EXPECT_TRUE(b.contains(22, tokens_of(2)));
  EXPECT_TRUE(b.contains(33, tokens_of(3)));
  EXPECT_LE(b.stats().bytes, opts.max_bytes);
  // Model A finds out when it next opens the file: a miss, never an error.
  KvDisk a2(opts, "model A", src);
  EXPECT_FALSE(a2.contains(11, tokens_of(1)));
}

TEST_F(KvDiskTest, AFullQueueKeepsThePrefixAndDropsTheRest) {
  KvCache src = random_cache(KvType::kF16, 1);
  KvDisk probe(opts, "probe", src);
  opts.max_queued_bytes = probe.block_bytes() * 3 / 2;  // one block's copy waits at a time
  KvDisk disk(opts, "model A", src);
  disk.write(std::vector<TierBlock>{{11, 1, tokens_of(1)}, {22, 2, tokens_of(2)}});
  disk.flush();
  EXPECT_TRUE(disk.contains(11, tokens_of(1)));
  EXPECT_FALSE(disk.contains(22, tokens_of(2)));
  EXPECT_EQ(disk.stats().blocks_dropped, 1);
  // The next write of the same prefix (the next turn) takes what was dropped.
  disk.write(std::vector<TierBlock>{{11, 1, tokens_of(1)}, {22, 2, tokens_of(2)}});
  disk.flush();
  EXPECT_TRUE(disk.contains(22, tokens_of(2)));
}

TEST_F(KvDiskTest, AnUnwritableDirectoryCostsOnlyTheWrites) {
  fs::create_directories(dir);
  std::ofstream(dir + "/not-a-directory") << "x";
  opts.dir = dir + "/not-a-directory/kv";
  KvCache src = random_cache(KvType::kF16, 1);
  KvDisk disk(opts, "model A", src);
  disk.write(std::vector<TierBlock>{{11, 1, tokens_of(1)}});
  disk.flush();
  EXPECT_EQ(disk.stats().write_errors, 1);
  EXPECT_EQ(disk.stats().blocks, 0);
  EXPECT_FALSE(disk.contains(11, tokens_of(1)));
  EXPECT_FALSE(disk.read(11, tokens_of(1), 0));
}

// The Engine: a first turn computed and written, a "restart" (a new Engine on the same
// directory), the same request and a second turn: the prefix comes from disk, the tokens and
// logprobs are those of an engine without a disk tier.
void check_engine_with_disk(const std::string& type, const char* kv, const std::string& dir) {
  auto f = load(type);
  if (kv != nullptr) {
    const KvType t = *parse_kv_type(kv);
    ASSERT_TRUE(f->model->set_kv_types(t, t).is_ok());
  }
  const std::vector<int32_t> p = long_prompt_of(f->tokenizer, 150);
  const EngineRequest greedy = request(p, 20, 0, 0);
  EngineRequest seeded = request(p, 20, 0.8f, 7);
  EngineConfig with_disk = config(2048);
  with_disk.kv_disk.dir = dir;
  with_disk.model_fingerprint = type;

  Stream::Choice ref_greedy, ref_seeded, ref_second;
  std::vector<int32_t> second;
  {
    Engine plain(*f->model, f->tokenizer, config(2048));
    ref_greedy = run_one(plain, greedy);
    ref_seeded = run_one(plain, seeded);
    second = p;
    second.insert(second.end(), ref_greedy.tokens.begin(), ref_greedy.tokens.end());
    const auto more = prompt_tokens(f->tokenizer, 9);
    second.insert(second.end(), more.begin(), more.end());
    Engine fresh(*f->model, f->tokenizer, config(2048));  // no prefix in RAM either
    ref_second = run_one(fresh, request(second, 12, 0, 0));
  }
  {
    Engine first(*f->model, f->tokenizer, with_disk);
    const Stream::Choice got = run_one(first, greedy);
    EXPECT_EQ(got.tokens, ref_greedy.tokens) << type;
    first.wait_idle();
    first.kv_disk()->flush();
    // The prompt and the 20 tokens made: (150 + 19) / 16 full blocks.
    EXPECT_EQ(first.metrics().kv_disk.blocks_written, (150 + 19) / kKvBlockSize) << type;
  }
  Engine restarted(*f->model, f->tokenizer, with_disk);
  const Stream::Choice a = run_one(restarted, seeded);
  EXPECT_EQ(a.tokens, ref_seeded.tokens) << type << " " << (kv ? kv : "default");
  EXPECT_EQ(a.logprobs, ref_seeded.logprobs) << type;
  EXPECT_EQ(a.stats.n_reused, 149 / kKvBlockSize * kKvBlockSize) << "whole blocks from disk";
  const Stream::Choice b = run_one(restarted, request(second, 12, 0, 0));
  EXPECT_EQ(b.tokens, ref_second.tokens) << type;
  EXPECT_EQ(b.logprobs, ref_second.logprobs) << type;
  EXPECT_GE(b.stats.n_reused, (150 + 19) / kKvBlockSize * kKvBlockSize);
  const EngineMetrics m = restarted.metrics();
  EXPECT_EQ(m.kv_disk.blocks_read, (150 + 19) / kKvBlockSize) << "each block read once";
  EXPECT_EQ(m.kv_disk.read_errors, 0);
  expect_clean(restarted);
}

class KvDiskEngineTest : public KvDiskTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(KvDiskEngineTest, APrefixFromDiskGivesTheTokensOfOneComputed) {
  check_engine_with_disk(GetParam(), nullptr, dir);
}

INSTANTIATE_TEST_SUITE_P(SomeTypes, KvDiskEngineTest,
                         ::testing::Values("F16", "Q8_0", "Q4_K_M", "Q6_K"));

TEST_F(KvDiskTest, EveryKvCacheTypeReadsBackTheSameTokens) {
  for (const char* kv : {"f16", "q8_0", "bf16"}) {
    check_engine_with_disk("Q4_K_M", kv, dir + "/" + kv);
  }
}

// After a restart, a second turn whose prefix is on disk arrives while another request streams:
// with a read share of 0 the engine reads one block a step, so the reads spread over the steps
// the stream keeps decoding in; both answers are those of an engine without a disk tier.
TEST_F(KvDiskTest, ReadsSpreadOverStepsBesideAStreamGiveTheSameTokens) {
  auto f = load("Q4_K_M");
  const std::vector<int32_t> p = long_prompt_of(f->tokenizer, 150);
  const EngineRequest greedy = request(p, 20, 0, 0);
  const EngineRequest streaming = request(prompt_tokens(f->tokenizer, 3), 120, 0.8f, 11);
  EngineConfig with_disk = config(2048);
  with_disk.kv_disk.dir = dir;
  with_disk.model_fingerprint = "Q4_K_M";
  with_disk.kv_disk_read_share = 0;

  Stream::Choice ref_stream, ref_second;
  std::vector<int32_t> second = p;
  {
    Engine plain(*f->model, f->tokenizer, config(2048));
    const Stream::Choice first = run_one(plain, greedy);
    second.insert(second.end(), first.tokens.begin(), first.tokens.end());
    const auto more = prompt_tokens(f->tokenizer, 9);
    second.insert(second.end(), more.begin(), more.end());
    ref_stream = run_one(plain, streaming);
    Engine fresh(*f->model, f->tokenizer, config(2048));
    ref_second = run_one(fresh, request(second, 12, 0, 0));
  }
  {
    Engine first(*f->model, f->tokenizer, with_disk);
    run_one(first, greedy);
    first.wait_idle();
    first.kv_disk()->flush();
  }
  Engine restarted(*f->model, f->tokenizer, with_disk);
  Stream stream;
  EngineRequest r = streaming;
  r.sink = stream.sink();
  ASSERT_TRUE(restarted.submit(std::move(r)).has_value());
  stream.wait_tokens(2);  // decoding
  const Stream::Choice b = run_one(restarted, request(second, 12, 0, 0));
  stream.wait();
  EXPECT_EQ(b.tokens, ref_second.tokens);
  EXPECT_EQ(b.logprobs, ref_second.logprobs);
  EXPECT_GE(b.stats.n_reused, (150 + 19) / kKvBlockSize * kKvBlockSize) << "the disk's prefix";
  EXPECT_EQ(stream.choices[0].tokens, ref_stream.tokens);
  EXPECT_EQ(stream.choices[0].logprobs, ref_stream.logprobs);
  const EngineMetrics m = restarted.metrics();
  EXPECT_EQ(m.kv_disk.blocks_read, (150 + 19) / kKvBlockSize) << "each block read once";
  expect_clean(restarted);
}

}  // namespace
}  // namespace ponder
