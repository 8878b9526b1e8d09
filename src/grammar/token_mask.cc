#include "grammar/token_mask.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <numeric>

#include "base/check.h"
#include "grammar/program.h"

namespace ponder::grammar {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id++;
  for (int32_t t = 0; t < n_vocab(); ++t) {
    if (!bytes_[static_cast<size_t>(t)].empty()) sorted_.push_back(t);
  }
  std::sort(sorted_.begin(), sorted_.end(),
            [&](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
  lcp_.resize(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes(sorted_[i - 1]);
    const std::string& b = bytes(sorted_[i]);
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    lcp_[i] = static_cast<uint16_t>(std::min<size_t>(n, UINT16_MAX));
    max_len_ = std::max(max_len_, b.size());
  }
  if (!sorted_.empty()) max_len_ = std::max(max_len_, bytes(sorted_[0]).size());
}

// The sorted walk: a token's automaton states for each prefix length are kept in `at`, the next
// token starts from its common prefix with the one before, and every token that shares a
// refused prefix is skipped without reading it.
std::shared_ptr<const std::vector<uint64_t>> Program::mask(uint32_t state,
                                                           const Vocabulary& vocab) {
  if (mask_vocab_ != vocab.id()) {
    for (State& s : states_) s.mask.reset();
    mask_bytes_ = 0;
    mask_vocab_ = vocab.id();
  }
  if (states_[state].mask) return states_[state].mask;
  auto bits =
      std::make_shared<std::vector<uint64_t>>((static_cast<size_t>(vocab.n_vocab()) + 63) / 64, 0);
  const std::vector<int32_t>& sorted = vocab.sorted();
  const std::vector<uint16_t>& lcp = vocab.common_prefix();
  std::vector<uint32_t> at(vocab.max_len() + 1);
  at[0] = state;
  size_t dead_at = SIZE_MAX;  // where the last walk was refused (its byte index), SIZE_MAX: not
  for (size_t i = 0; i < sorted.size(); ++i) {
    const size_t shared = lcp[i];
    if (dead_at < shared) continue;  // starts with the refused prefix
    const int32_t t = sorted[i];
    const std::string& b = vocab.bytes(t);
    dead_at = SIZE_MAX;
    size_t k = shared;
    for (; k < b.size(); ++k) {
      const uint32_t s = next(at[k], static_cast<uint8_t>(b[k]));
      if (s == kDead) {
        dead_at = k;
        break;
      }
      at[k + 1] = s;
    }
    if (dead_at == SIZE_MAX) (*bits)[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
  mask_bytes_ += bits->size() * sizeof(uint64_t);
  states_[state].mask = bits;
  return bits;
}

Matcher::Matcher(std::shared_ptr<Grammar> grammar, std::shared_ptr<const Vocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  PONDER_CHECK(grammar_ && vocab_);
  auto lock = grammar_->program().lock();
  Program& p = grammar_->program();
  p.collect_if_full();
  state_ = p.initial_state();
  generation_ = p.generation();
}

uint32_t Matcher::sync() {
  Program& p = grammar_->program();
  p.collect_if_full();
  if (p.generation() != generation_) {
    state_ = p.next(p.initial_state(), consumed_);
    generation_ = p.generation();
    p.note_replay();
  }
  return state_;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  auto lock = grammar_->program().lock();
  Program& p = grammar_->program();
  const uint32_t s = p.next(sync(), bytes);
  if (s == Program::kDead) return false;
  state_ = s;
  consumed_.append(bytes);
  return true;
}

bool Matcher::accept_token(int32_t t) {
  if (t < 0 || t >= vocab_->n_vocab() || vocab_->bytes(t).empty()) return false;
  return accept_bytes(vocab_->bytes(t));
}

bool Matcher::accepting() {
  auto lock = grammar_->program().lock();
  return grammar_->program().accepting(sync());
}

bool Matcher::complete() {
  auto lock = grammar_->program().lock();
  const uint32_t s = sync();
  return grammar_->program().accepting(s) && !grammar_->program().can_continue(s);
}

std::shared_ptr<const std::vector<uint64_t>> Matcher::allowed() {
  auto lock = grammar_->program().lock();
  return grammar_->program().mask(sync(), *vocab_);
}

}  // namespace ponder::grammar
