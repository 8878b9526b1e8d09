#include "grammar/grammar.h"

#include <fmt/core.h>

#include <algorithm>
#include <list>
#include <unordered_map>
#include <unordered_set>

#include "grammar/gbnf_parser.h"
#include "grammar/program.h"
#include "grammar/utf8_ranges.h"

namespace ponder::grammar {
namespace {

// The memo's bounds: past them it is dropped whole (Matchers replay their bytes). A state costs
// 1 KiB of successors; a mask n_vocab / 8 bytes (19 KiB for R1's vocabulary).
constexpr size_t kMaxStates = 1 << 15;
constexpr size_t kMaxReplayStates = 1 << 18;  // what one generation may grow to for replays
constexpr size_t kMaxMaskBytes = size_t{96} << 20;
// A compiled grammar's size bound: repetitions multiply (("a"{9999}){9999} is 10^8 elements), and
// a grammar may come from a request.
constexpr size_t kMaxElements = size_t{1} << 21;

ByteSet byte_range_set(uint8_t lo, uint8_t hi) {
  ByteSet s{};
  for (int b = lo; b <= hi; ++b) s[static_cast<size_t>(b) >> 6] |= uint64_t{1} << (b & 63);
  return s;
}

bool has_byte(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

// Rules being compiled: alternatives of element sequences, flattened into a Program at the end.
struct Compiler {
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<Element>>> alts;
  std::vector<ByteSet> byte_sets;
  std::unordered_map<std::string, uint32_t> ids;
  std::string error;
  size_t n_elements = 0;  // emitted so far, against kMaxElements

  // Counts n more elements; false (and an error naming where) past the bound.
  bool grow(size_t n, const GbnfElement& e) {
    n_elements += n;
    if (n_elements <= kMaxElements) return true;
    fail(e, fmt::format("the grammar expands to more than {} elements (repetitions multiply)",
                        kMaxElements));
    return false;
  }

  uint32_t new_rule(const std::string& name) {
    names.push_back(name);
    alts.emplace_back();
    return static_cast<uint32_t>(names.size() - 1);
  }

  Element bytes(const ByteSet& s) {
    byte_sets.push_back(s);
    return {Element::Type::kBytes, static_cast<uint32_t>(byte_sets.size() - 1)};
  }

  void fail(const GbnfElement& e, const std::string& what) {
    if (error.empty()) error = fmt::format("line {}, column {}: {}", e.line, e.column, what);
  }

  // The element without its repetition, as a sequence to inline.
  std::vector<Element> atom(const GbnfElement& e, const std::string& owner) {
    std::vector<Element> seq;
    switch (e.kind) {
      case GbnfElement::Kind::kLiteral:
        for (char c : e.text) {
          const auto b = static_cast<uint8_t>(c);
          seq.push_back(bytes(byte_range_set(b, b)));
        }
        break;
      case GbnfElement::Kind::kClass: {
        const std::vector<std::vector<ByteRange>> encodings = utf8_sequences(e.ranges, e.negated);
        ByteSet single{};
        bool any_single = false, any_multi = false;
        for (const auto& enc : encodings) {
          if (enc.size() == 1) {
            const ByteSet r = byte_range_set(enc[0].lo, enc[0].hi);
            for (size_t i = 0; i < 4; ++i) single[i] |= r[i];
            any_single = true;
          } else {
            any_multi = true;
          }
        }
        if (!any_multi && any_single) {
          seq.push_back(bytes(single));
          break;
        }
        const uint32_t rule = new_rule(owner + "-class");
        if (any_single) alts[rule].push_back({bytes(single)});
        for (const auto& enc : encodings) {
          if (enc.size() == 1) continue;
          std::vector<Element> alt;
          for (const ByteRange& r : enc) alt.push_back(bytes(byte_range_set(r.lo, r.hi)));
          alts[rule].push_back(std::move(alt));
        }
        seq.push_back({Element::Type::kRef, rule});
        break;
      }
      case GbnfElement::Kind::kRef: {
        auto it = ids.find(e.text);
        if (it == ids.end()) {
          fail(e, fmt::format("the rule '{}' is not defined", e.text));
          break;
        }
        seq.push_back({Element::Type::kRef, it->second});
        break;
      }
      case GbnfElement::Kind::kGroup: {
        if (e.alts.size() == 1) return sequence(e.alts[0], owner);
        const uint32_t rule = new_rule(owner + "-group");
        const std::string group = names[rule];  // a copy: sequence() adds rules, names may move
        for (const GbnfSequence& s : e.alts) {
          std::vector<Element> alt = sequence(s, group);
          alts[rule].push_back(std::move(alt));
        }
        seq.push_back({Element::Type::kRef, rule});
        break;
      }
    }
    return seq;
  }

  // Appends the element with its repetition: the atom min times, then either a loop rule
  // (`loop ::= atom loop |`, a tail call) or max - min nested optional rules.
  void element(const GbnfElement& e, const std::string& owner, std::vector<Element>* out) {
    const std::vector<Element> a = atom(e, owner);
    if (!error.empty()) return;
    const size_t copies =
        static_cast<size_t>(e.min) + (e.max < 0 ? 1 : static_cast<size_t>(e.max - e.min));
    if (!grow((a.size() + 1) * std::max<size_t>(copies, 1), e)) return;
    if (e.min == 1 && e.max == 1) {
      out->insert(out->end(), a.begin(), a.end());
      return;
    }
    for (int32_t i = 0; i < e.min; ++i) out->insert(out->end(), a.begin(), a.end());
    if (e.max < 0) {
      const uint32_t loop = new_rule(owner + "-star");
      std::vector<Element> body = a;
      body.push_back({Element::Type::kRef, loop});
      alts[loop].push_back(std::move(body));
      alts[loop].emplace_back();
      out->push_back({Element::Type::kRef, loop});
      return;
    }
    uint32_t inner = UINT32_MAX;  // opt_k ::= atom opt_(k-1) |
    for (int32_t k = 1; k <= e.max - e.min; ++k) {
      const uint32_t opt = new_rule(owner + "-opt");
      std::vector<Element> body = a;
      if (inner != UINT32_MAX) body.push_back({Element::Type::kRef, inner});
      alts[opt].push_back(std::move(body));
      alts[opt].emplace_back();
      inner = opt;
    }
    if (inner != UINT32_MAX) out->push_back({Element::Type::kRef, inner});
  }

  std::vector<Element> sequence(const GbnfSequence& s, const std::string& owner) {
    std::vector<Element> out;
    for (const GbnfElement& e : s) {
      if (!error.empty()) break;
      element(e, owner, &out);
    }
    return out;
  }

  // Left recursion (a rule reachable from itself without reading a byte) has no finite
  // expansion: refused. Nullable rules are found first, since `a ::= b? a` is left-recursive.
  void check_left_recursion(const std::vector<GbnfRule>& rules) {
    const size_t n = names.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : alts[r]) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& x) {
            return x.type == Element::Type::kRef && nullable[x.arg];
          });
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r) {
      for (const auto& alt : alts[r]) {
        for (const Element& x : alt) {
          if (x.type != Element::Type::kRef) break;
          left[r].push_back(x.arg);
          if (!nullable[x.arg]) break;
        }
      }
    }
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t start = 0; start < n && error.empty(); ++start) {
      if (color[start]) continue;
      stack.push_back({start, 0});
      color[start] = 1;
      while (!stack.empty() && error.empty()) {
        auto& [r, i] = stack.back();
        if (i == left[r].size()) {
          color[r] = 2;
          stack.pop_back();
          continue;
        }
        const uint32_t next = left[r][i++];
        if (color[next] == 1) {
          // Name the user's rule of the cycle (helper rules carry their owner's name first).
          const std::string name = names[next].substr(0, names[next].find("-ponder"));
          const GbnfRule* where = nullptr;
          for (const GbnfRule& g : rules) {
            if (g.name == name) where = &g;
          }
          error = where ? fmt::format("line {}, column {}: the rule '{}' is left-recursive",
                                      where->line, where->column, name)
                        : fmt::format("the rule '{}' is left-recursive", name);
        } else if (color[next] == 0) {
          color[next] = 1;
          stack.push_back({next, 0});
        }
      }
    }
  }
};

}  // namespace

Expected<std::shared_ptr<Grammar>> Grammar::compile(std::string_view gbnf,
                                                    const CompileOptions& options) {
  PONDER_ASSIGN_OR_RETURN(std::vector<GbnfRule> rules, parse_gbnf(gbnf));
  Compiler c;
  for (const GbnfRule& r : rules) {
    if (c.ids.count(r.name)) {
      return Status::errorf("line {}, column {}: the rule '{}' is defined twice", r.line, r.column,
                            r.name);
    }
    c.ids[r.name] = c.new_rule(r.name);
  }
  auto root = c.ids.find("root");
  if (root == c.ids.end()) return Status::error("the grammar has no 'root' rule");
  for (const GbnfRule& r : rules) {
    const uint32_t id = c.ids[r.name];
    // Helper rules are named after their owner, marked so errors can find the user's name.
    const std::string owner = r.name + "-ponder";
    for (const GbnfSequence& s : r.alts) {
      std::vector<Element> alt = c.sequence(s, owner);
      c.alts[id].push_back(std::move(alt));
    }
    if (!c.error.empty()) return Status::error(c.error);
  }
  uint32_t start = root->second;
  if (options.leading_newlines > 0) {
    GbnfElement nl;
    nl.kind = GbnfElement::Kind::kLiteral;
    nl.text = "\n";
    nl.min = 0;
    nl.max = options.leading_newlines;
    start = c.new_rule("ponder-start");
    std::vector<Element> alt;
    c.element(nl, "ponder-start", &alt);
    alt.push_back({Element::Type::kRef, root->second});
    c.alts[start].push_back(std::move(alt));
  }
  c.check_left_recursion(rules);
  if (!c.error.empty()) return Status::error(c.error);

  auto program = std::make_unique<Program>();
  program->byte_sets = std::move(c.byte_sets);
  program->rule_names = std::move(c.names);
  program->rule_alts.resize(program->rule_names.size());
  for (size_t r = 0; r < c.alts.size(); ++r) {
    for (const auto& alt : c.alts[r]) {
      program->rule_alts[r].push_back(static_cast<uint32_t>(program->elements.size()));
      program->elements.insert(program->elements.end(), alt.begin(), alt.end());
      program->elements.push_back({Element::Type::kEnd, 0});
    }
  }
  program->start_rule = start;
  std::shared_ptr<Grammar> g(new Grammar());
  g->text_ = std::string(gbnf);
  g->options_ = options;
  g->program_ = std::move(program);
  return g;
}

Grammar::~Grammar() = default;

bool Grammar::accepts(std::string_view bytes) const {
  auto lock = program_->lock();
  const uint32_t s = program_->next(program_->initial_state(), bytes);
  return s != Program::kDead && program_->accepting(s);
}

bool Grammar::accepts_prefix(std::string_view bytes) const {
  auto lock = program_->lock();
  return program_->next(program_->initial_state(), bytes) != Program::kDead;
}

// ---- GrammarCache ----

struct GrammarCache::Impl {
  std::mutex mu;
  size_t capacity;
  std::list<std::pair<std::string, std::shared_ptr<Grammar>>> lru;  // most recent first
  std::unordered_map<std::string, decltype(lru)::iterator> index;
};

GrammarCache::GrammarCache(size_t capacity) : impl_(std::make_unique<Impl>()) {
  impl_->capacity = std::max<size_t>(capacity, 1);
}
GrammarCache::~GrammarCache() = default;

Expected<std::shared_ptr<Grammar>> GrammarCache::get(std::string_view gbnf,
                                                     const CompileOptions& options) {
  std::string key = fmt::format("{}\n{}", options.leading_newlines, gbnf);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->index.find(key);
    if (it != impl_->index.end()) {
      impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
      return it->second->second;
    }
  }
  PONDER_ASSIGN_OR_RETURN(std::shared_ptr<Grammar> g, Grammar::compile(gbnf, options));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->index.count(key)) return impl_->index[key]->second;
  impl_->lru.emplace_front(key, g);
  impl_->index[std::move(key)] = impl_->lru.begin();
  while (impl_->lru.size() > impl_->capacity) {
    impl_->index.erase(impl_->lru.back().first);
    impl_->lru.pop_back();
  }
  return g;
}

// ---- Program: the automaton ----

void Program::reset_memo() {
  nodes_.clear();
  node_ids_.clear();
  states_.clear();
  state_ids_.clear();
  next_.clear();
  seen_.clear();
  initial_ = -1;
  mask_bytes_ = 0;
  max_states_ = kMaxStates;
  states_.push_back(State{});  // kDead
  next_.assign(256, static_cast<int32_t>(kDead));
  ++generation_;
}

void Program::collect_if_full() {
  if (states_.empty() || states_.size() > max_states_ || mask_bytes_ > kMaxMaskBytes) reset_memo();
}

void Program::note_replay() {
  max_states_ = std::clamp(2 * states_.size(), max_states_, kMaxReplayStates);
}

uint32_t Program::node(uint32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent + 1);
  auto [it, added] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (added) {
    nodes_.push_back({pos, parent});
    seen_.push_back(0);
  }
  return it->second;
}

void Program::expand(uint32_t n0, bool* accept) {
  todo_.clear();
  todo_.push_back(n0);
  while (!todo_.empty()) {
    const uint32_t n = todo_.back();
    todo_.pop_back();
    if (seen_[n] == stamp_) continue;
    seen_[n] = stamp_;
    const Node nd = nodes_[n];
    const Element& e = elements[nd.pos];
    if (e.type == Element::Type::kBytes) {
      scratch_nodes_.push_back(n);
    } else if (e.type == Element::Type::kEnd) {
      if (nd.parent < 0) {
        *accept = true;
      } else {
        todo_.push_back(static_cast<uint32_t>(nd.parent));
      }
    } else {
      // A reference that ends its alternative returns straight to our parent (a tail call).
      const bool tail = elements[nd.pos + 1].type == Element::Type::kEnd;
      const int32_t cont = tail ? nd.parent : static_cast<int32_t>(node(nd.pos + 1, nd.parent));
      for (uint32_t a : rule_alts[e.arg]) todo_.push_back(node(a, cont));
    }
  }
}

uint32_t Program::intern_state(bool accept) {
  std::sort(scratch_nodes_.begin(), scratch_nodes_.end());
  scratch_nodes_.erase(std::unique(scratch_nodes_.begin(), scratch_nodes_.end()),
                       scratch_nodes_.end());
  if (scratch_nodes_.empty() && !accept) return kDead;
  std::string key(reinterpret_cast<const char*>(scratch_nodes_.data()),
                  scratch_nodes_.size() * sizeof(uint32_t));
  key.push_back(accept ? 1 : 0);
  auto [it, added] = state_ids_.try_emplace(std::move(key), static_cast<uint32_t>(states_.size()));
  if (added) {
    State s;
    s.nodes = scratch_nodes_;
    s.accept = accept;
    states_.push_back(std::move(s));
    next_.resize(states_.size() * 256, -1);
  }
  return it->second;
}

uint32_t Program::initial_state() {
  if (states_.empty()) reset_memo();
  if (initial_ >= 0) return static_cast<uint32_t>(initial_);
  ++stamp_;
  scratch_nodes_.clear();
  bool accept = false;
  for (uint32_t a : rule_alts[start_rule]) expand(node(a, -1), &accept);
  initial_ = static_cast<int32_t>(intern_state(accept));
  return static_cast<uint32_t>(initial_);
}

uint32_t Program::next(uint32_t state, uint8_t byte) {
  int32_t& memo = next_[size_t{state} * 256 + byte];
  if (memo >= 0) return static_cast<uint32_t>(memo);
  ++stamp_;
  scratch_nodes_.clear();
  bool accept = false;
  // states_ may grow inside the loop (node() does not touch it; intern_state after): copy ids.
  for (uint32_t n : states_[state].nodes) {
    const Node nd = nodes_[n];
    if (!has_byte(byte_sets[elements[nd.pos].arg], byte)) continue;
    expand(node(nd.pos + 1, nd.parent), &accept);
  }
  const uint32_t s = intern_state(accept);
  next_[size_t{state} * 256 + byte] = static_cast<int32_t>(s);  // next_ may have moved
  return s;
}

uint32_t Program::next(uint32_t state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDead) return kDead;
    state = next(state, static_cast<uint8_t>(c));
  }
  return state;
}

}  // namespace ponder::grammar
