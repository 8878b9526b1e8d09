// Tests only: a block tier in memory (runtime/kv_pool.h's BlockTier) that records its reads.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "runtime/kv_pool.h"

namespace ponder {

// A tier in memory: the blocks it was given, and which pool block each read filled.
class FakeTier : public BlockTier {
 public:
  bool contains(uint64_t hash, std::span<const int32_t> tokens) override {
    const auto it = held.find(hash);
    return it != held.end() && std::equal(tokens.begin(), tokens.end(), it->second.begin());
  }
  bool read(uint64_t hash, std::span<const int32_t> tokens, int32_t block) override {
    if (fail_reads || !contains(hash, tokens)) return false;
    reads.push_back(block);
    return true;
  }
  std::vector<int32_t> write(std::span<const TierBlock> blocks) override {
    for (const TierBlock& b : blocks) {
      EXPECT_FALSE(held.contains(b.hash)) << "the pool hands only blocks the tier lacks";
      held[b.hash] = std::vector<int32_t>(b.tokens.begin(), b.tokens.end());
    }
    if (!defer_copies) return {};  // taken at once
    std::vector<int32_t> later;    // this call's blocks only: the pool references each once
    for (const TierBlock& b : blocks) later.push_back(b.block);
    uncopied.insert(uncopied.end(), later.begin(), later.end());
    return later;
  }
  std::vector<int32_t> copied() override { return std::exchange(done, {}); }
  void wait_copied() override {
    ++waits;
    finish_copies();
  }
  void finish_copies() {
    done.insert(done.end(), uncopied.begin(), uncopied.end());
    uncopied.clear();
  }
  std::map<uint64_t, std::vector<int32_t>> held;
  std::vector<int32_t> reads;
  bool fail_reads = false;
  // With defer_copies, write() keeps the blocks' ids (uncopied) as a tier copying later does, and
  // finish_copies() (or wait_copied) moves them to done, for copied().
  bool defer_copies = false;
  std::vector<int32_t> uncopied, done;
  int waits = 0;
};

}  // namespace ponder
