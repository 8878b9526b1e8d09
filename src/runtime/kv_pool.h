// KvPool: which KV blocks are free, in use, or cached, and what tokens they hold. Pure logic over
// block ids: it never touches K/V data (the engine copies a block when told to), so it is unit
// tested with no model. The runtime talks to it through the two calls of DESIGN.md:
//   find_prefix(tokens)  the longest cached prefix of a token sequence;
//   allocate(table, n)   blocks for n positions, or false when there is no room;
// plus adopt() (take a found prefix into a sequence's table), fill() (record the tokens whose K/V
// the forward pass just wrote) and release(). Under the pool a BlockTier (the blocks on disk,
// runtime/kv_disk.h) may keep full blocks by the same keys: load_from() brings back those that
// continue a prefix past the pool's own, save_to() hands it the blocks of a sequence that leaves.
//
// Blocks hold kKvBlockSize positions. A full block is keyed by a hash chained over every token
// from the start of the sequence (its parent's hash and its own tokens), so equal prefixes (one
// system prompt, an earlier turn of a chat) are computed once and shared: shared blocks are full
// and never written again. A prefix that ends inside a block (the generation prompt of an earlier
// turn, the prompt of the other choices of an `n` > 1 request) is reused too: the partial block is
// copied into a fresh block (copy on write), so reuse goes token by token, not block by block.
// Blocks whose last user leaves keep their tokens and stay findable until evicted, least recently
// released first; a sequence releases its blocks tail first, so a prefix outlives its tails.
// Depends on nothing but the standard library.
#pragma once

#include <climits>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ponder {

// Positions per KV block: the prefix-reuse granularity of full blocks and the attention tile of
// the cache (docs/serving.md says how it was chosen).
inline constexpr int32_t kKvBlockSize = 16;

struct PrefixMatch {
  std::vector<int32_t> blocks;  // full blocks to share as they are, in position order
  int32_t copy_from = -1;       // a block whose first copy_tokens slots continue the prefix
  int32_t copy_tokens = 0;
  int32_t n_tokens() const {
    return static_cast<int32_t>(blocks.size()) * kKvBlockSize + copy_tokens;
  }
};

// A block copy the engine must do on the K/V data before the next forward pass.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  int32_t n_slots = 0;
};

// A second tier of full blocks under the pool, keyed by the same chain hashes (which cover every
// token from the start of the sequence; the tokens are compared too).
struct TierBlock {
  uint64_t hash = 0;                // chain hash through the block
  int32_t block = 0;                // the pool block holding its K/V
  std::span<const int32_t> tokens;  // its kKvBlockSize tokens
};
class BlockTier {
 public:
  virtual ~BlockTier() = default;
  // Whether the tier holds the block with this hash and these tokens.
  virtual bool contains(uint64_t hash, std::span<const int32_t> tokens) = 0;
  // Fills pool block `block`'s K/V with that block; false when it cannot (it is computed then).
  virtual bool read(uint64_t hash, std::span<const int32_t> tokens, int32_t block) = 0;
  // Keeps these full blocks. Returns the pool blocks among them whose K/V it takes later, off the
  // engine thread: the pool keeps each referenced (so unchanged: a full block is never written)
  // until copied() hands it back. Empty when all were taken before it returned.
  virtual std::vector<int32_t> write(std::span<const TierBlock> blocks) = 0;
  // The blocks write() returned whose K/V have been taken since the last call.
  virtual std::vector<int32_t> copied() { return {}; }
  // Waits until every block write() returned has been taken.
  virtual void wait_copied() {}
};

class KvPool {
 public:
  explicit KvPool(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_cached() const { return static_cast<int32_t>(lru_.size()); }  // unused, with tokens
  int32_t n_used() const { return n_blocks() - n_free() - n_cached(); }   // ref count > 0
  // Blocks that allocate() could hand out now (free or evictable).
  int32_t n_available() const { return n_free() + n_cached(); }
  int32_t ref_count(int32_t block) const { return blocks_[static_cast<size_t>(block)].refs; }

  // The longest prefix of tokens[0, max_tokens) whose K/V some block holds. No side effects.
  PrefixMatch find_prefix(std::span<const int32_t> tokens, int32_t max_tokens) const;

  // Appends the match to an empty table: shares its full blocks (ref count + 1) and, when it ends
  // inside a block, copies that block into a new one (*copy is set; the engine copies the data).
  // Returns the tokens now in the table: match.n_tokens(), or fewer when no block was free for
  // the copy. `tokens` are the sequence's tokens (to record what the copy holds).
  int32_t adopt(std::vector<int32_t>* table, const PrefixMatch& match,
                std::span<const int32_t> tokens, BlockCopy* copy);

  // Grows the table to cover n_positions, evicting cached blocks if needed. False (and the table
  // unchanged) when the pool cannot supply that many blocks.
  bool allocate(std::vector<int32_t>* table, int32_t n_positions);

  // Records that positions [begin, end) of the table's sequence now hold the K/V of
  // tokens[begin, end) (`tokens` is the whole sequence); blocks that become full become findable.
  // Positions are filled in order, each once.
  // Positions at or past findable_end (a context-shifted sequence's re-rotated tail) fill their
  // blocks privately: never findable, freed (not cached) when released.
  void fill(std::span<const int32_t> table, std::span<const int32_t> tokens, int32_t begin,
            int32_t end, int32_t findable_end = INT32_MAX);
  // Context shift: drops the table's blocks [keep, keep + drop) and makes every block after them
  // private to this table (a shared one is copied into a fresh block first: *copies says which;
  // one it owns alone just stops being findable), since their keys are about to be re-rotated to
  // new positions. *moved gets the table indices (after the shift) whose blocks the engine must
  // re-rotate. False (table unchanged) when no block is free for a needed copy.
  bool shift(std::vector<int32_t>* table, int32_t keep, int32_t drop,
             std::vector<BlockCopy>* copies, std::vector<int32_t>* moved);

  // Drops the blocks of the table past the first n_positions positions (none of their slots may
  // be filled: speculative decoding's rejected guesses never are).
  void truncate(std::vector<int32_t>* table, int32_t n_positions);

  // Drops the table's references (tail first) and clears it.
  void release(std::vector<int32_t>* table);

  // Extends the pool's cached prefix of tokens[0, max_tokens) with full blocks read from the tier,
  // for as long as it holds the next one, a block can be had (cached blocks may be evicted for
  // them, never the prefix's own) and fewer than max_reads were read. They become cached blocks
  // that find_prefix finds; with `hold`, the prefix's blocks (found or read) stay referenced
  // instead, appended to *hold in order (release() it), so that nothing evicts them before the
  // next call goes on from where this one stopped.
  struct TierLoad {
    int32_t n_read = 0;  // blocks read from the tier
    bool more = false;   // stopped by max_reads while the tier holds the next block
  };
  TierLoad load_from(BlockTier& tier, std::span<const int32_t> tokens, int32_t max_tokens,
                     int32_t max_reads = INT32_MAX, std::vector<int32_t>* hold = nullptr);
  // Hands the tier the table's full, findable blocks (from the first, up to the first that is not)
  // that it does not hold yet; those it copies later stay referenced until take_back.
  void save_to(BlockTier& tier, std::span<const int32_t> table);
  // Drops the references of the blocks the tier has copied since (with wait: of all it holds, once
  // it has copied them). Returns how many came back.
  int32_t take_back(BlockTier& tier, bool wait);
  // Blocks referenced for the tier until it copies them.
  int32_t n_tier_held() const { return n_tier_held_; }

  // Forgets every cached block (they become free); used blocks are kept.
  void clear_cache();

  // Checks the bookkeeping (ref counts, lists, maps agree); returns false with a reason.
  bool check(std::string* why) const;

 private:
  struct Block {
    int32_t refs = 0;
    int32_t n_filled = 0;      // slots holding K/V of tokens[0, n_filled)
    uint64_t parent_hash = 0;  // chain hash of every token before this block
    uint64_t hash = 0;         // chain hash through this block, once full
    bool registered = false;   // in full_ under `hash`
    bool in_children = false;  // in children_ under parent_hash
    bool is_private = false;   // re-rotated by a context shift: never findable, never cached
    std::list<int32_t>::iterator lru_it;
    std::vector<int32_t> tokens;  // [kKvBlockSize]
  };
  static uint64_t chain(uint64_t parent, std::span<const int32_t> tokens);
  int32_t take_block();      // a free or evicted block, refs = 1; -1 when none
  void acquire(int32_t b);   // one reference more (out of the cache list if it was unused)
  void drop_ref(int32_t b);  // one reference less; an unused block is cached or freed
  void forget(int32_t b);    // removes from the maps, empties

  std::vector<Block> blocks_;
  std::vector<int32_t> free_;  // empty blocks
  std::list<int32_t> lru_;     // unused blocks with tokens, least recently released first
  std::unordered_map<uint64_t, int32_t> full_;           // chain hash -> full block
  std::unordered_multimap<uint64_t, int32_t> children_;  // parent hash -> blocks with tokens
  int32_t n_tier_held_ = 0;
};

}  // namespace ponder
