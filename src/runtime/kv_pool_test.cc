#include "runtime/kv_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "runtime/fake_tier_for_test.h"

namespace ponder {
namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

void expect_ok(const KvPool& pool) {
  std::string why;
  EXPECT_TRUE(pool.check(&why)) << why;
}

// Allocates and fills a sequence of `tokens` as the engine would after computing them.
std::vector<int32_t> computed(KvPool& pool, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> table;
  EXPECT_TRUE(pool.allocate(&table, static_cast<int32_t>(tokens.size())));
  pool.fill(table, tokens, 0, static_cast<int32_t>(tokens.size()));
  return table;
}

TEST(KvPoolTest, FullBlocksAreFoundAndSharedAfterRelease) {
  KvPool pool(8);
  const auto tokens = iota_tokens(40);  // 2 full blocks + 8 positions
  auto table = computed(pool, tokens);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(pool.n_used(), 3);
  pool.release(&table);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_cached(), 3);
  expect_ok(pool);

  // The same 40 tokens and more: 2 full blocks shared, 8 positions copied from the partial one.
  auto longer = iota_tokens(50);
  PrefixMatch m = pool.find_prefix(longer, 49);
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.copy_tokens, 8);
  EXPECT_EQ(m.n_tokens(), 40);
  std::vector<int32_t> t2;
  BlockCopy copy;
  EXPECT_EQ(pool.adopt(&t2, m, longer, &copy), 40);
  EXPECT_EQ(copy.src, m.copy_from);
  EXPECT_NE(copy.dst, copy.src);
  EXPECT_EQ(copy.n_slots, 8);
  EXPECT_EQ(pool.ref_count(m.blocks[0]), 1);
  EXPECT_EQ(pool.ref_count(copy.src), 0);  // the source stays cached, not held
  ASSERT_TRUE(pool.allocate(&t2, 50));
  pool.fill(t2, longer, 40, 50);
  expect_ok(pool);
  pool.release(&t2);
  EXPECT_EQ(pool.n_used(), 0);
  expect_ok(pool);
}

TEST(KvPoolTest, MatchStopsAtTheFirstDifferentTokenAndAtMaxTokens) {
  KvPool pool(8);
  const auto tokens = iota_tokens(32);
  auto table = computed(pool, tokens);
  auto other = tokens;
  other[20] = 7;  // differs inside the second block
  PrefixMatch m = pool.find_prefix(other, 32);
  EXPECT_EQ(m.blocks.size(), 1u);
  EXPECT_EQ(m.copy_tokens, 4);  // positions 16..19 of the second block
  // The last prompt token is never taken: capped at 31, the second block is copied, not shared.
  m = pool.find_prefix(tokens, 31);
  EXPECT_EQ(m.blocks.size(), 1u);
  EXPECT_EQ(m.copy_tokens, 15);
  // A different first token: nothing.
  auto fresh = tokens;
  fresh[0] = 1;
  EXPECT_EQ(pool.find_prefix(fresh, 32).n_tokens(), 0);
  pool.release(&table);
}

TEST(KvPoolTest, AllocateEvictsLeastRecentlyReleasedAndRefusesWhenFull) {
  KvPool pool(4);
  auto a = computed(pool, iota_tokens(32, 0));     // 2 blocks
  auto b = computed(pool, iota_tokens(32, 1000));  // 2 blocks
  std::vector<int32_t> c;
  EXPECT_FALSE(pool.allocate(&c, 1));  // every block in use
  EXPECT_TRUE(c.empty());
  pool.release(&a);  // a's blocks cached: tail first, so a's second block is the oldest
  pool.release(&b);
  EXPECT_EQ(pool.n_cached(), 4);
  ASSERT_TRUE(pool.allocate(&c, 16));  // evicts a's tail
  EXPECT_EQ(pool.find_prefix(iota_tokens(32, 0), 32).n_tokens(), 16);
  EXPECT_EQ(pool.find_prefix(iota_tokens(32, 1000), 32).n_tokens(), 32);
  ASSERT_TRUE(pool.allocate(&c, 32));  // then a's head
  EXPECT_EQ(pool.find_prefix(iota_tokens(32, 0), 32).n_tokens(), 0);
  EXPECT_FALSE(pool.allocate(&c, 80));  // 5 blocks > 4
  EXPECT_EQ(c.size(), 2u);
  expect_ok(pool);
  pool.release(&c);
  pool.clear_cache();
  EXPECT_EQ(pool.n_free(), 4);
  expect_ok(pool);
}

TEST(KvPoolTest, SharedBlocksCountEveryUser) {
  KvPool pool(6);
  const auto tokens = iota_tokens(33);
  auto a = computed(pool, tokens);
  PrefixMatch m = pool.find_prefix(tokens, 32);
  EXPECT_EQ(m.blocks.size(), 2u);
  std::vector<int32_t> b;
  BlockCopy copy;
  EXPECT_EQ(pool.adopt(&b, m, tokens, &copy), 32);
  EXPECT_EQ(copy.n_slots, 0);
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.release(&a);
  EXPECT_EQ(pool.ref_count(b[0]), 1);
  EXPECT_EQ(pool.n_used(), 2);
  pool.release(&b);
  EXPECT_EQ(pool.n_used(), 0);
  expect_ok(pool);
}

TEST(KvPoolTest, EqualBlocksComputedTwiceKeepOneFindable) {
  KvPool pool(6);
  const auto tokens = iota_tokens(16);
  auto a = computed(pool, tokens);
  auto b = computed(pool, tokens);  // computed at the same time by another sequence
  pool.release(&a);
  pool.release(&b);
  expect_ok(pool);
  EXPECT_EQ(pool.find_prefix(iota_tokens(17), 17).blocks.size(), 1u);
  // Evict everything, one by one: no stale entry is ever found.
  std::vector<int32_t> t;
  ASSERT_TRUE(pool.allocate(&t, 6 * kKvBlockSize));
  EXPECT_EQ(pool.find_prefix(iota_tokens(17), 17).n_tokens(), 0);
  expect_ok(pool);
  pool.release(&t);
}

// Context shift: the dropped blocks go, shared moved blocks are copied into private ones, owned
// ones stop being findable; nothing moved is ever found again, and private blocks are freed (not
// cached) on release.
TEST(KvPoolTest, ShiftDropsCopiesSharedAndHidesMovedBlocks) {
  KvPool pool(16);
  const std::vector<int32_t> tokens = iota_tokens(5 * kKvBlockSize + 3);
  std::vector<int32_t> a = computed(pool, tokens);  // 6 blocks, the last partial
  // b shares a's first four full blocks.
  std::vector<int32_t> b;
  BlockCopy copy;
  const PrefixMatch m = pool.find_prefix(tokens, 4 * kKvBlockSize);
  ASSERT_EQ(pool.adopt(&b, m, tokens, &copy), 4 * kKvBlockSize);
  const std::vector<int32_t> before = a;
  std::vector<BlockCopy> copies;
  std::vector<int32_t> moved;
  ASSERT_TRUE(pool.shift(&a, 1, 2, &copies, &moved));  // keep block 0, drop 1-2, move 3-5
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0], before[0]);
  EXPECT_EQ(moved, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_EQ(copies.size(), 1u);  // block 3 was shared with b: copied
  EXPECT_EQ(copies[0].src, before[3]);
  EXPECT_EQ(copies[0].dst, a[1]);
  EXPECT_EQ(copies[0].n_slots, kKvBlockSize);
  EXPECT_EQ(a[2], before[4]);               // owned alone: kept in place
  EXPECT_EQ(pool.ref_count(before[3]), 1);  // b's reference only
  expect_ok(pool);
  // Nothing of the moved tail is findable: a search for the old tokens stops at b's blocks.
  EXPECT_EQ(pool.find_prefix(tokens, static_cast<int32_t>(tokens.size())).n_tokens(),
            4 * kKvBlockSize);
  const int32_t free_before = pool.n_free();
  pool.release(&a);
  expect_ok(pool);
  EXPECT_EQ(pool.n_free(), free_before + 3);  // the three private blocks are freed, not cached
  pool.release(&b);
  expect_ok(pool);
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(KvPoolTest, ATierKeepsFullBlocksAndExtendsAPrefixWithThem) {
  FakeTier tier;
  KvPool pool(8);
  const auto tokens = iota_tokens(3 * kKvBlockSize + 5);
  auto table = computed(pool, tokens);
  pool.save_to(tier, table);
  EXPECT_EQ(tier.held.size(), 3u) << "the full blocks only";
  pool.save_to(tier, table);  // nothing new: FakeTier::write would complain
  pool.release(&table);
  pool.clear_cache();  // a restart: the pool knows nothing
  EXPECT_EQ(pool.find_prefix(tokens, 1000).n_tokens(), 0);
  EXPECT_EQ(pool.load_from(tier, tokens, static_cast<int32_t>(tokens.size()) - 1).n_read, 3);
  EXPECT_EQ(tier.reads.size(), 3u);
  const PrefixMatch m = pool.find_prefix(tokens, 1000);
  EXPECT_EQ(m.n_tokens(), 3 * kKvBlockSize);
  EXPECT_EQ(m.blocks, tier.reads);
  EXPECT_EQ(pool.n_cached(), 3);
  expect_ok(pool);
  // Found in the pool now: not read again; max_tokens bounds what is read.
  EXPECT_EQ(pool.load_from(tier, tokens, 1000).n_read, 0);
  pool.clear_cache();
  EXPECT_EQ(pool.load_from(tier, tokens, 2 * kKvBlockSize + 3).n_read, 2);
  expect_ok(pool);
}

TEST(KvPoolTest, BlocksATierCopiesLaterStayReferencedUntilTakenBack) {
  FakeTier tier;
  tier.defer_copies = true;
  KvPool pool(4);
  const auto tokens = iota_tokens(2 * kKvBlockSize + 3);
  auto table = computed(pool, tokens);
  const std::vector<int32_t> full(table.begin(), table.begin() + 2);
  pool.save_to(tier, table);
  EXPECT_EQ(tier.uncopied, full);
  EXPECT_EQ(pool.n_tier_held(), 2);
  pool.release(&table);
  expect_ok(pool);
  // Still referenced for the tier: neither cached (so never evicted) nor free; the partial
  // last block is cached as usual.
  for (int32_t b : full) EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.n_available(), 2);
  EXPECT_EQ(pool.take_back(tier, /*wait=*/false), 0) << "not copied yet";
  tier.finish_copies();
  EXPECT_EQ(pool.take_back(tier, /*wait=*/false), 2);
  EXPECT_EQ(pool.n_tier_held(), 0);
  EXPECT_EQ(pool.n_cached(), 3) << "cached once back: the next turn finds them in RAM";
  EXPECT_EQ(pool.n_available(), 4);
  EXPECT_EQ(pool.find_prefix(tokens, 1000).n_tokens(), 2 * kKvBlockSize + 3);
  expect_ok(pool);
  // With wait, the tier is asked to finish first.
  table = computed(pool, iota_tokens(kKvBlockSize, 1000));
  pool.save_to(tier, table);
  pool.release(&table);
  EXPECT_EQ(pool.take_back(tier, /*wait=*/true), 1);
  EXPECT_EQ(tier.waits, 1);
  expect_ok(pool);
}

// As after a restart: the tier holds the full blocks of tokens, the pool nothing.
void written_then_forgotten(KvPool& pool, FakeTier& tier, const std::vector<int32_t>& tokens) {
  auto table = computed(pool, tokens);
  pool.save_to(tier, table);
  pool.release(&table);
  pool.clear_cache();
}

TEST(KvPoolTest, ATierReadNeverEvictsThePrefixItExtends) {
  FakeTier tier;
  KvPool pool(4);
  const auto tokens = iota_tokens(4 * kKvBlockSize);
  written_then_forgotten(pool, tier, tokens);
  // The pool keeps the first block only; the tier has all four; the pool has room for three more
  // once it evicts what it caches, but never the first block.
  {
    const std::vector<int32_t> first(tokens.begin(), tokens.begin() + kKvBlockSize);
    auto t = computed(pool, first);
    pool.release(&t);
  }
  std::vector<int32_t> busy;  // one block in use elsewhere: room for two reads
  ASSERT_TRUE(pool.allocate(&busy, 1));
  EXPECT_EQ(pool.load_from(tier, tokens, 1000).n_read, 2);
  EXPECT_EQ(pool.find_prefix(tokens, 1000).n_tokens(), 3 * kKvBlockSize);
  expect_ok(pool);
  // A read that fails ends the extension; the block it had taken is free again.
  pool.release(&busy);
  tier.fail_reads = true;
  EXPECT_EQ(pool.load_from(tier, tokens, 1000).n_read, 0);
  EXPECT_EQ(pool.find_prefix(tokens, 1000).n_tokens(), 3 * kKvBlockSize);
  EXPECT_EQ(pool.n_free(), 1);
  expect_ok(pool);
}

// Reads spread over calls: max_reads bounds each, `more` says the tier holds the next block, and
// the held prefix survives a pool that needs every other block in between.
TEST(KvPoolTest, TierReadsGoOnFromWhereALimitedCallStopped) {
  FakeTier tier;
  KvPool pool(6);
  const auto tokens = iota_tokens(5 * kKvBlockSize + 2);
  written_then_forgotten(pool, tier, tokens);
  std::vector<int32_t> hold;
  KvPool::TierLoad load = pool.load_from(tier, tokens, 1000, 2, &hold);
  EXPECT_EQ(load.n_read, 2);
  EXPECT_TRUE(load.more);
  ASSERT_EQ(hold.size(), 2u);
  for (int32_t b : hold) EXPECT_EQ(pool.ref_count(b), 1);
  expect_ok(pool);
  // Another sequence takes every block it can: never the held ones.
  std::vector<int32_t> other;
  EXPECT_FALSE(pool.allocate(&other, 5 * kKvBlockSize));
  ASSERT_TRUE(pool.allocate(&other, 4 * kKvBlockSize));
  pool.release(&other);
  pool.clear_cache();
  // The next call finds the two in the pool (held again) and reads on, then stops at the end.
  std::vector<int32_t> hold2;
  load = pool.load_from(tier, tokens, 1000, 2, &hold2);
  EXPECT_EQ(load.n_read, 2);
  EXPECT_TRUE(load.more);
  pool.release(&hold);
  hold = std::move(hold2);
  hold2.clear();
  load = pool.load_from(tier, tokens, 1000, 2, &hold2);
  EXPECT_EQ(load.n_read, 1);
  EXPECT_FALSE(load.more) << "the sixth block is not full";
  pool.release(&hold);
  EXPECT_EQ(hold2.size(), 5u);
  EXPECT_EQ(pool.find_prefix(tokens, 1000).n_tokens(), 5 * kKvBlockSize);
  EXPECT_EQ(pool.find_prefix(tokens, 1000).blocks, hold2);
  EXPECT_EQ(tier.reads.size(), 5u) << "every block read once";
  pool.release(&hold2);
  EXPECT_EQ(pool.n_cached(), 5);
  expect_ok(pool);
  // A limit of 0 reads nothing and says there is more.
  pool.clear_cache();
  load = pool.load_from(tier, tokens, 1000, 0);
  EXPECT_EQ(load.n_read, 0);
  EXPECT_TRUE(load.more);
}

}  // namespace
}  // namespace ponder
