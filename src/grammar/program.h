// Program: a compiled grammar (byte sets, rule references and ends of alternatives in one flat
// array) and the memo of its automaton: interned stack nodes, interned states (sorted node ids
// + whether the input so far is a sentence), each state's successor per byte, and each state's
// token mask. Internal to the grammar layer: Grammar owns one, Matcher drives it.
//
// A stack node is (pos, parent): the element to match next and the node to continue at when its
// alternative ends (-1: the start rule's end, a whole sentence). A reference followed by the end
// of its alternative continues at its own parent (a tail call), so `x*` loops in constant depth.
// The memo grows with use and is dropped when it passes its bounds (generation() changes; a
// Matcher then replays its bytes). Every call requires the lock (lock()).
// Depends on base.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ponder::grammar {

class Vocabulary;

struct Element {
  enum class Type : uint8_t { kBytes, kRef, kEnd };
  Type type = Type::kEnd;
  uint32_t arg = 0;  // kBytes: index into byte_sets; kRef: rule id
};

using ByteSet = std::array<uint64_t, 4>;

class Program {
 public:
  static constexpr uint32_t kDead = 0;  // the state that matches nothing

  // The compiled form (grammar.cc fills it).
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<uint32_t>> rule_alts;  // per rule: start positions of its alternatives
  std::vector<std::string> rule_names;
  uint32_t start_rule = 0;

  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }

  // All below need the lock.
  uint32_t initial_state();
  uint32_t next(uint32_t state, uint8_t byte);
  uint32_t next(uint32_t state, std::string_view bytes);  // kDead at the first refused byte
  bool accepting(uint32_t state) const { return states_[state].accept; }
  bool can_continue(uint32_t state) const { return !states_[state].nodes.empty(); }
  // Bit t set: token t's bytes (all of them) can follow from `state`. Cached per state.
  std::shared_ptr<const std::vector<uint64_t>> mask(uint32_t state, const Vocabulary& vocab);
  // Drops the memo when it passed its bounds; a change of generation() says so.
  void collect_if_full();
  // A Matcher replayed its bytes after a drop: if the replays alone came near the bound, the
  // bound is raised for this generation, so one long answer does not drop the memo at every step.
  void note_replay();
  uint64_t generation() const { return generation_; }
  size_t n_states() const { return states_.size(); }

 private:
  struct Node {
    uint32_t pos;
    int32_t parent;
  };
  struct State {
    std::vector<uint32_t> nodes;  // sorted; each at a kBytes element
    bool accept = false;
    std::shared_ptr<const std::vector<uint64_t>> mask;
  };

  void reset_memo();
  uint32_t node(uint32_t pos, int32_t parent);
  // Adds to scratch_nodes_ every byte-matching node reachable from node `n` without input.
  void expand(uint32_t n, bool* accept);
  uint32_t intern_state(bool accept);

  std::mutex mu_;
  uint64_t generation_ = 0;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> state_ids_;
  std::vector<int32_t> next_;  // [n_states * 256]: -1 not computed yet
  int32_t initial_ = -1;
  size_t mask_bytes_ = 0;
  uint64_t mask_vocab_ = 0;  // Vocabulary::id() of the cached masks
  size_t max_states_ = 0;    // the bound: raised when replays alone fill it (no thrashing)
  // expand()'s scratch
  std::vector<uint32_t> scratch_nodes_;
  std::vector<uint32_t> todo_;
  std::vector<uint32_t> seen_;  // [n_nodes]: stamp of the last expand pass that saw the node
  uint32_t stamp_ = 0;
};

}  // namespace ponder::grammar
