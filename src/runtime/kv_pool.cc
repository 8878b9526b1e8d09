#include "runtime/kv_pool.h"

#include <algorithm>

#include "base/check.h"

namespace ponder {
namespace {

constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64's finalizer over the running state: every bit of every token reaches the hash.
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

}  // namespace

KvPool::KvPool(int32_t n_blocks) : blocks_(static_cast<size_t>(n_blocks)) {
  PONDER_CHECK(n_blocks > 0);
  for (Block& b : blocks_) b.tokens.resize(kKvBlockSize);
  free_.reserve(blocks_.size());
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 handed out first
}

uint64_t KvPool::chain(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = parent;
  for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
  return h;
}

PrefixMatch KvPool::find_prefix(std::span<const int32_t> tokens, int32_t max_tokens) const {
  PrefixMatch m;
  max_tokens = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size()));
  uint64_t h = kRootHash;
  int32_t pos = 0;
  while (pos + kKvBlockSize <= max_tokens) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(pos), kKvBlockSize);
    const uint64_t next = chain(h, block_tokens);
    const auto it = full_.find(next);
    if (it == full_.end()) break;
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    if (!std::equal(block_tokens.begin(), block_tokens.end(), b.tokens.begin())) break;
    m.blocks.push_back(it->second);
    h = next;
    pos += kKvBlockSize;
  }
  // The rest may continue inside some block that follows the same prefix.
  const int32_t rest = std::min(max_tokens - pos, kKvBlockSize);
  auto [lo, hi] = children_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    const int32_t limit = std::min(rest, b.n_filled);
    int32_t n = 0;
    while (n < limit && b.tokens[static_cast<size_t>(n)] == tokens[static_cast<size_t>(pos + n)])
      ++n;
    if (n > m.copy_tokens) {
      m.copy_tokens = n;
      m.copy_from = it->second;
    }
  }
  return m;
}

int32_t KvPool::take_block() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    forget(b);
  } else {
    return -1;
  }
  Block& blk = blocks_[static_cast<size_t>(b)];
  PONDER_DCHECK(blk.refs == 0 && blk.n_filled == 0);
  blk.refs = 1;
  return b;
}

void KvPool::acquire(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.refs++ == 0) lru_.erase(blk.lru_it);
}

void KvPool::forget(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.registered) {
    full_.erase(blk.hash);
    blk.registered = false;
  }
  if (blk.in_children) {
    auto [lo, hi] = children_.equal_range(blk.parent_hash);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == b) {
        children_.erase(it);
        break;
      }
    }
    blk.in_children = false;
  }
  blk.n_filled = 0;
  blk.hash = 0;
  blk.parent_hash = 0;
  blk.is_private = false;
}

int32_t KvPool::adopt(std::vector<int32_t>* table, const PrefixMatch& match,
                      std::span<const int32_t> tokens, BlockCopy* copy) {
  PONDER_CHECK(table->empty());
  *copy = BlockCopy{};
  for (int32_t b : match.blocks) {
    acquire(b);
    table->push_back(b);
  }
  int32_t n = static_cast<int32_t>(match.blocks.size()) * kKvBlockSize;
  if (match.copy_from < 0 || match.copy_tokens == 0) return n;
  // Hold the source while taking the destination, so that eviction cannot pick it.
  acquire(match.copy_from);
  const int32_t dst = take_block();
  if (dst >= 0) {
    const Block& src = blocks_[static_cast<size_t>(match.copy_from)];
    Block& d = blocks_[static_cast<size_t>(dst)];
    std::copy_n(src.tokens.begin(), match.copy_tokens, d.tokens.begin());
    d.n_filled = match.copy_tokens;
    d.parent_hash = src.parent_hash;
    children_.emplace(d.parent_hash, dst);
    d.in_children = true;
    PONDER_DCHECK(
        std::equal(d.tokens.begin(), d.tokens.begin() + match.copy_tokens, tokens.begin() + n));
    table->push_back(dst);
    *copy = BlockCopy{match.copy_from, dst, match.copy_tokens};
    n += match.copy_tokens;
  }
  std::vector<int32_t> src_only{match.copy_from};
  release(&src_only);
  return n;
}

bool KvPool::allocate(std::vector<int32_t>* table, int32_t n_positions) {
  const int32_t need =
      (n_positions + kKvBlockSize - 1) / kKvBlockSize - static_cast<int32_t>(table->size());
  if (need <= 0) return true;
  if (need > n_available()) return false;
  for (int32_t i = 0; i < need; ++i) table->push_back(take_block());
  return true;
}

void KvPool::fill(std::span<const int32_t> table, std::span<const int32_t> tokens, int32_t begin,
                  int32_t end, int32_t findable_end) {
  for (int32_t p = begin; p < end; ++p) {
    const int32_t idx = p / kKvBlockSize;
    const int32_t slot = p % kKvBlockSize;
    PONDER_CHECK(static_cast<size_t>(idx) < table.size());
    Block& b = blocks_[static_cast<size_t>(table[static_cast<size_t>(idx)])];
    PONDER_CHECK(b.refs > 0 && b.n_filled == slot);  // in order, each position once
    if (p >= findable_end) b.is_private = true;
    if (b.is_private) {
      b.tokens[static_cast<size_t>(slot)] = tokens[static_cast<size_t>(p)];
      b.n_filled++;
      continue;
    }
    if (slot == 0) {
      b.parent_hash = idx == 0
                          ? kRootHash
                          : blocks_[static_cast<size_t>(table[static_cast<size_t>(idx - 1)])].hash;
      children_.emplace(b.parent_hash, table[static_cast<size_t>(idx)]);
      b.in_children = true;
    }
    b.tokens[static_cast<size_t>(slot)] = tokens[static_cast<size_t>(p)];
    if (++b.n_filled == kKvBlockSize) {
      b.hash = chain(b.parent_hash, b.tokens);
      // Two sequences may compute the same block at once; the first one stays the findable one.
      if (full_.emplace(b.hash, table[static_cast<size_t>(idx)]).second) b.registered = true;
    }
  }
}

void KvPool::truncate(std::vector<int32_t>* table, int32_t n_positions) {
  const size_t keep = static_cast<size_t>((n_positions + kKvBlockSize - 1) / kKvBlockSize);
  while (table->size() > keep) {
    PONDER_CHECK(blocks_[static_cast<size_t>(table->back())].n_filled == 0);
    drop_ref(table->back());
    table->pop_back();
  }
}

void KvPool::release(std::vector<int32_t>* table) {
  for (auto it = table->rbegin(); it != table->rend(); ++it) {
    drop_ref(*it);
  }
  table->clear();
}

void KvPool::drop_ref(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  PONDER_CHECK(b.refs > 0);
  if (--b.refs > 0) return;
  if (b.n_filled > 0 && !b.is_private) {
    b.lru_it = lru_.insert(lru_.end(), id);
  } else {
    forget(id);
    free_.push_back(id);
  }
}

bool KvPool::shift(std::vector<int32_t>* table, int32_t keep, int32_t drop,
                   std::vector<BlockCopy>* copies, std::vector<int32_t>* moved) {
  const int32_t n = static_cast<int32_t>(table->size());
  PONDER_CHECK(keep >= 0 && drop > 0 && keep + drop <= n);
  // Room for the copies of shared moved blocks: the dropped blocks free some of it.
  int32_t need = 0, freed = 0;
  for (int32_t i = keep + drop; i < n; ++i)
    need += blocks_[static_cast<size_t>((*table)[static_cast<size_t>(i)])].refs > 1;
  for (int32_t i = keep; i < keep + drop; ++i)
    freed += blocks_[static_cast<size_t>((*table)[static_cast<size_t>(i)])].refs == 1;
  if (need > n_available() + freed) return false;
  for (int32_t i = keep; i < keep + drop; ++i) drop_ref((*table)[static_cast<size_t>(i)]);
  std::vector<int32_t> out(table->begin(), table->begin() + keep);
  for (int32_t i = keep + drop; i < n; ++i) {
    const int32_t b = (*table)[static_cast<size_t>(i)];
    Block& old = blocks_[static_cast<size_t>(b)];
    if (old.refs > 1) {
      const int32_t nb = take_block();
      PONDER_CHECK(nb >= 0);
      Block& fresh = blocks_[static_cast<size_t>(nb)];
      fresh.tokens = blocks_[static_cast<size_t>(b)].tokens;
      fresh.n_filled = blocks_[static_cast<size_t>(b)].n_filled;
      fresh.is_private = true;
      copies->push_back({b, nb, fresh.n_filled});
      drop_ref(b);
      out.push_back(nb);
    } else {
      const int32_t filled = old.n_filled;
      forget(b);  // out of the maps (its keys will not match its hash once re-rotated); tokens stay
      old.n_filled = filled;
      old.is_private = true;
      out.push_back(b);
    }
    moved->push_back(static_cast<int32_t>(out.size()) - 1);
  }
  *table = std::move(out);
  return true;
}

KvPool::TierLoad KvPool::load_from(BlockTier& tier, std::span<const int32_t> tokens,
                                   int32_t max_tokens, int32_t max_reads,
                                   std::vector<int32_t>* hold) {
  max_tokens = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size()));
  std::vector<int32_t> held;  // the prefix so far: referenced, so that no take_block evicts it
  uint64_t h = kRootHash;
  TierLoad load;
  for (int32_t pos = 0; pos + kKvBlockSize <= max_tokens; pos += kKvBlockSize) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(pos), kKvBlockSize);
    const uint64_t next = chain(h, block_tokens);
    int32_t b = -1;
    if (const auto it = full_.find(next); it != full_.end()) {
      const Block& found = blocks_[static_cast<size_t>(it->second)];
      if (!std::equal(block_tokens.begin(), block_tokens.end(), found.tokens.begin())) break;
      b = it->second;
      acquire(b);
    } else {
      if (!tier.contains(next, block_tokens)) break;
      if (load.n_read >= max_reads) {
        load.more = true;
        break;
      }
      b = take_block();
      if (b < 0) break;
      if (!tier.read(next, block_tokens, b)) {
        blocks_[static_cast<size_t>(b)].refs = 0;
        free_.push_back(b);
        break;
      }
      Block& blk = blocks_[static_cast<size_t>(b)];
      std::copy(block_tokens.begin(), block_tokens.end(), blk.tokens.begin());
      blk.n_filled = kKvBlockSize;
      blk.parent_hash = h;
      blk.hash = next;
      children_.emplace(h, b);
      blk.in_children = true;
      full_.emplace(next, b);
      blk.registered = true;
      ++load.n_read;
    }
    held.push_back(b);
    h = next;
  }
  if (hold != nullptr) {
    hold->insert(hold->end(), held.begin(), held.end());
  } else {
    release(&held);  // tail first: the prefix outlives its tail in the cache
  }
  return load;
}

void KvPool::save_to(BlockTier& tier, std::span<const int32_t> table) {
  std::vector<TierBlock> out;
  for (int32_t id : table) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (b.n_filled != kKvBlockSize || b.is_private) break;
    if (!tier.contains(b.hash, b.tokens)) out.push_back({b.hash, id, b.tokens});
  }
  if (out.empty()) return;
  for (int32_t id : tier.write(out)) {
    acquire(id);
    ++n_tier_held_;
  }
}

int32_t KvPool::take_back(BlockTier& tier, bool wait) {
  if (n_tier_held_ == 0) return 0;
  if (wait) tier.wait_copied();
  const std::vector<int32_t> back = tier.copied();
  for (int32_t id : back) drop_ref(id);
  n_tier_held_ -= static_cast<int32_t>(back.size());
  PONDER_CHECK(n_tier_held_ >= 0);
  return static_cast<int32_t>(back.size());
}

void KvPool::clear_cache() {
  for (int32_t b : lru_) {
    forget(b);
    free_.push_back(b);
  }
  lru_.clear();
}

bool KvPool::check(std::string* why) const {
  std::vector<int> where(blocks_.size(), 0);  // 1 free, 2 lru
  for (int32_t b : free_) where[static_cast<size_t>(b)] += 1;
  for (int32_t b : lru_) where[static_cast<size_t>(b)] += 2;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const int expect = b.refs > 0 ? 0 : (b.n_filled > 0 ? 2 : 1);
    if (b.refs < 0 || where[i] != expect) {
      *why = "block " + std::to_string(i) + ": refs " + std::to_string(b.refs) + ", filled " +
             std::to_string(b.n_filled) + ", list " + std::to_string(where[i]);
      return false;
    }
    if (b.registered &&
        (b.n_filled != kKvBlockSize || full_.at(b.hash) != static_cast<int32_t>(i))) {
      *why = "block " + std::to_string(i) + " is registered but not full or not the map's";
      return false;
    }
    if (b.is_private && (b.refs == 0 || b.in_children || b.registered)) {
      *why = "block " + std::to_string(i) + " is private but unused or findable";
      return false;
    }
    if (!b.is_private && b.in_children != (b.n_filled > 0)) {
      *why = "block " + std::to_string(i) + ": children entry and fill disagree";
      return false;
    }
  }
  size_t n_registered = 0;
  for (const Block& b : blocks_) n_registered += b.registered;
  if (n_registered != full_.size()) {
    *why = "the hash map has " + std::to_string(full_.size()) + " entries for " +
           std::to_string(n_registered) + " registered blocks";
    return false;
  }
  return true;
}

}  // namespace ponder
