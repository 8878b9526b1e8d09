// Vocabulary and Matcher: which tokens a grammar allows next, over the whole vocabulary.
//
// Vocabulary holds each token's bytes (empty for tokens that never write grammar text: control
// and added tokens) sorted with their common-prefix lengths, so a mask walks the sorted list
// once, reusing the automaton state of the shared prefix and skipping every token under a prefix
// the grammar refuses (a trie walk without a trie). The mask of a state is memoized in the
// grammar's Program, so the steps of a JSON string, which return to the same state, cost a
// lookup. Matcher is one sequence's position in a grammar: the bytes it accepted, its state,
// and whether it may end.
// Depends on grammar/grammar.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace ponder::grammar {

class Vocabulary {
 public:
  // token_bytes[t]: what token t writes; empty: never allowed by a grammar.
  explicit Vocabulary(std::vector<std::string> token_bytes);

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t t) const { return bytes_[static_cast<size_t>(t)]; }
  // Non-empty tokens sorted by their bytes, and each one's common prefix with the one before.
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<uint16_t>& common_prefix() const { return lcp_; }
  size_t max_len() const { return max_len_; }
  // Unique per Vocabulary made in this process (masks are cached for one vocabulary).
  uint64_t id() const { return id_; }

 private:
  std::vector<std::string> bytes_;
  size_t max_len_ = 0;
  uint64_t id_ = 0;
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> lcp_;
};

class Matcher {
 public:
  Matcher(std::shared_ptr<Grammar> grammar, std::shared_ptr<const Vocabulary> vocab);

  // Accepts token t's bytes; false (and no change) when the grammar refuses them.
  bool accept_token(int32_t t);
  bool accept_bytes(std::string_view bytes);
  // The bytes so far are a whole sentence (end of sequence may come now).
  bool accepting();
  // A whole sentence that nothing can extend: generation is over.
  bool complete();
  // Bit t of word t / 64: token t may come next (end of sequence not included: see accepting()).
  std::shared_ptr<const std::vector<uint64_t>> allowed();

  const std::string& consumed() const { return consumed_; }

 private:
  uint32_t sync();  // the current state, replayed if the memo was dropped (lock held)

  std::shared_ptr<Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::string consumed_;
  uint32_t state_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace ponder::grammar
