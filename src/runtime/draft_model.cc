#include "runtime/draft_model.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/timer.h"

namespace ponder {
namespace {

// A catch-up pass with more rows than this per draft token it yields is a prompt (or a long
// stretch after an eviction), not the steady state: left out of seconds_per_token().
constexpr int64_t kMeasureMaxRowsPerToken = 16;
// A sequence this few positions behind is always caught up in the call (the steady state: the
// guesses the target kept and its own token); longer stretches share max_rows rows a call.
constexpr int32_t kAlwaysCatchUp = 2 * kKvBlockSize;
// Weight of the newest pass in the moving average.
constexpr double kMeasureAlpha = 0.1;

std::string show(const std::optional<int32_t>& id) {
  return id ? std::to_string(*id) : std::string("none");
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

}  // namespace

Status DraftModel::check_tokenizers(const text::Tokenizer& draft, const text::Tokenizer& target) {
  const int32_t n = std::min(draft.n_vocab(), target.n_vocab());
  for (int32_t id = 0; id < n; ++id) {
    if (draft.token_text(id) != target.token_text(id)) {
      return Status::errorf(
          "the draft model's tokenizer differs from the target's: token {} is \"{}\" in the "
          "draft and \"{}\" in the target (vocabularies of {} and {} tokens)",
          id, draft.token_text(id), target.token_text(id), draft.n_vocab(), target.n_vocab());
    }
  }
  if (draft.bos() != target.bos() || draft.eos() != target.eos()) {
    return Status::errorf(
        "the draft model's tokenizer differs from the target's: BOS/EOS are {}/{} in the draft "
        "and {}/{} in the target",
        draft.bos(), draft.eos(), target.bos(), target.eos());
  }
  std::vector<int32_t> eog_draft = draft.eog_tokens(), eog_target = target.eog_tokens();
  std::sort(eog_draft.begin(), eog_draft.end());
  std::sort(eog_target.begin(), eog_target.end());
  if (eog_draft != eog_target) {
    return Status::errorf(
        "the draft model's tokenizer differs from the target's: the end-of-generation tokens are "
        "[{}] in the draft and [{}] in the target",
        show(eog_draft), show(eog_target));
  }
  for (const char* special : {"<think>", "</think>"}) {
    const auto a = draft.find_token(special), b = target.find_token(special);
    if (a != b) {
      return Status::errorf(
          "the draft model's tokenizer differs from the target's: {} is token {} in the draft "
          "and {} in the target",
          special, show(a), show(b));
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<DraftModel>> DraftModel::create(Qwen2Model& draft,
                                                         const text::Tokenizer& draft_tokenizer,
                                                         const text::Tokenizer& target_tokenizer,
                                                         int64_t target_n_vocab,
                                                         const DraftModelOptions& options) {
  PONDER_RETURN_IF_ERROR(check_tokenizers(draft_tokenizer, target_tokenizer));
  if (options.kv_positions < 1 || options.max_seqs < 1 || options.max_rows < 1) {
    return Status::errorf(
        "draft model: kv_positions, max_seqs and max_rows must be >= 1 (got {}, {}, {})",
        options.kv_positions, options.max_seqs, options.max_rows);
  }
  // Proposable: an id every side knows (the draft's logits, both tokenizers, the target's
  // logits) that is not padding ("[PAD<id>]", UNUSED: the 7B-32B pad 151,665 real ids to
  // 152,064, the 1.5B to 151,936) in either tokenizer.
  const int64_t n_real = std::min({draft.config().n_vocab, target_n_vocab,
                                   static_cast<int64_t>(draft_tokenizer.n_vocab()),
                                   static_cast<int64_t>(target_tokenizer.n_vocab())});
  std::vector<uint8_t> proposable(static_cast<size_t>(std::max<int64_t>(n_real, 0)), 0);
  bool any = false;
  for (int32_t id = 0; id < static_cast<int32_t>(proposable.size()); ++id) {
    const bool padding = draft_tokenizer.token_type(id) == text::TokenType::kUnused ||
                         target_tokenizer.token_type(id) == text::TokenType::kUnused;
    proposable[static_cast<size_t>(id)] = !padding;
    any |= !padding;
  }
  if (!any) {
    return Status::errorf("draft model: no token id below {} is a real token of both vocabularies",
                          n_real);
  }
  return std::unique_ptr<DraftModel>(
      new DraftModel(draft, draft_tokenizer, std::move(proposable), options));
}

DraftModel::DraftModel(Qwen2Model& draft, const text::Tokenizer& tokenizer,
                       std::vector<uint8_t> proposable, const DraftModelOptions& options)
    : model_(draft),
      tokenizer_(tokenizer),
      options_(options),
      n_ctx_(draft.config().n_ctx_train > 0
                 ? static_cast<int32_t>(std::min<int64_t>(draft.config().n_ctx_train, INT32_MAX))
                 : INT32_MAX),
      n_real_vocab_(static_cast<int32_t>(proposable.size())),
      proposable_(std::move(proposable)),
      cache_(
          draft.make_cache((options.kv_positions + kKvBlockSize - 1) / kKvBlockSize, kKvBlockSize)),
      kv_(static_cast<int32_t>(cache_.n_blocks())) {
  for (int32_t id = 0; id < n_real_vocab_;) {
    if (!proposable_[static_cast<size_t>(id)]) {
      ++id;
      continue;
    }
    const int32_t begin = id;
    while (id < n_real_vocab_ && proposable_[static_cast<size_t>(id)]) ++id;
    ranges_.emplace_back(begin, id);
  }
}

bool DraftModel::is_proposable(int32_t id) const {
  return id >= 0 && id < n_real_vocab_ && proposable_[static_cast<size_t>(id)];
}

void DraftModel::forget(uint64_t seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  kv_.release(&it->second.table);
  seqs_.erase(it);
}

void DraftModel::drop(Seq& seq) {
  kv_.release(&seq.table);
  seq.computed.clear();
}

bool DraftModel::evict_one() {
  auto victim = seqs_.end();
  for (auto it = seqs_.begin(); it != seqs_.end(); ++it) {
    if (it->second.last_asked == call_) continue;  // in this call: its blocks are about to be used
    if (victim == seqs_.end() || it->second.last_asked < victim->second.last_asked) victim = it;
  }
  if (victim == seqs_.end()) return false;
  // Its blocks stay cached in the pool (findable) until allocation takes them.
  kv_.release(&victim->second.table);
  seqs_.erase(victim);
  ++n_evictions_;
  return true;
}

int32_t DraftModel::prepare(Seq& seq, std::span<const int32_t> tokens, int32_t k) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  // What still holds: the common prefix of what was computed and the tokens, short of the last
  // token (always recomputed: its logits give the first draft token).
  const size_t limit = std::min(seq.computed.size(), static_cast<size_t>(n - 1));
  size_t lcp = 0;
  while (lcp < limit && seq.computed[lcp] == tokens[lcp]) ++lcp;
  // Tokens the draft cannot embed (the target may sample ids past the draft's vocabulary).
  const int64_t n_vocab = model_.config().n_vocab;
  for (size_t i = lcp; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) return 0;
  }
  if (lcp < seq.computed.size() || seq.table.empty()) {
    // Rollback (rejected guesses, an edit) or a fresh table: let go of the blocks and take back
    // the longest prefix the pool holds. Blocks written with rejected draft tokens stay cached:
    // they are still the right K/V for the tokens they hold. A prefix ending inside a block is
    // copied (copy on write), so rollback goes token by token.
    kv_.release(&seq.table);
    const PrefixMatch match = kv_.find_prefix(tokens, n - 1);
    BlockCopy copy;
    const int32_t kept = kv_.adopt(&seq.table, match, tokens, &copy);
    if (copy.n_slots > 0) cache_.copy_block(copy.src, copy.dst, copy.n_slots);
    seq.computed.assign(tokens.begin(), tokens.begin() + kept);
  }
  // Room for tokens[0, n) and k - 1 fed draft tokens; else evict sequences not asked now, else
  // draft fewer.
  while (k > 0) {
    if (kv_.allocate(&seq.table, n + k - 1)) return k;
    if (!evict_one()) --k;
  }
  drop(seq);  // no room even for one token: leave the blocks to the others (they stay cached)
  return 0;
}

int32_t DraftModel::argmax(const float* logits) const {
  int32_t best = ranges_.front().first;
  float best_v = logits[best];
  for (const auto& [begin, end] : ranges_) {
    for (int32_t id = begin; id < end; ++id) {
      if (logits[id] > best_v) {
        best_v = logits[id];
        best = id;
      }
    }
  }
  return best;
}

bool DraftModel::run_pass(ThreadPool& pool, bool measure) {
  const int64_t n_vocab = model_.config().n_vocab;
  const size_t n_logits = logit_work_.size();
  if (logits_.size() < n_logits * static_cast<size_t>(n_vocab)) {
    logits_.resize(n_logits * static_cast<size_t>(n_vocab));
  }
  std::unique_lock<std::mutex> lock;
  if (options_.forward_lock) lock = std::unique_lock<std::mutex>(*options_.forward_lock);
  Timer timer;  // after the lock: the measure is of this pass, not of another target's wait
  const Status st = model_.forward(batch_, cache_, logits_.data(), pool);
  if (lock.owns_lock()) lock.unlock();
  if (!st.is_ok()) return false;  // the cache is untouched; nothing was filled
  const double seconds = timer.seconds();
  if (measure && static_cast<int64_t>(batch_.rows.size()) > kAlwaysCatchUp) {
    const double per_row = seconds / static_cast<double>(batch_.rows.size());
    catch_up_row_s_ = catch_up_row_s_ <= 0
                          ? per_row
                          : (1 - kMeasureAlpha) * catch_up_row_s_ + kMeasureAlpha * per_row;
  }
  if (measure && n_logits > 0 &&
      static_cast<int64_t>(batch_.rows.size()) <=
          kMeasureMaxRowsPerToken * static_cast<int64_t>(n_logits)) {
    const double per_token = seconds / static_cast<double>(n_logits);
    seconds_per_token_ = seconds_per_token_ <= 0
                             ? per_token
                             : (1 - kMeasureAlpha) * seconds_per_token_ + kMeasureAlpha * per_token;
  }
  for (size_t i = 0; i < n_logits; ++i) {
    const Work& w = work_[static_cast<size_t>(logit_work_[i])];
    w.ask->draft->push_back(argmax(logits_.data() + i * static_cast<size_t>(n_vocab)));
  }
  return true;
}

void DraftModel::propose(std::span<DraftAsk> asks, ThreadPool& pool) {
  ++call_;
  work_.clear();
  for (DraftAsk& ask : asks) {
    if (ask.draft == nullptr) continue;
    ask.draft->clear();
    const int32_t n = static_cast<int32_t>(ask.tokens.size());
    if (n == 0 || ask.max_draft < 1 || n >= n_ctx_) continue;
    // Proposed tokens take positions n .. n + k - 1, inside the draft's context.
    const int32_t k = std::min(ask.max_draft, n_ctx_ - n);
    auto [it, inserted] = seqs_.try_emplace(ask.seq);
    Seq& seq = it->second;
    if (seq.last_asked == call_) continue;  // the same sequence twice in one call
    seq.last_asked = call_;
    if (inserted && static_cast<int32_t>(seqs_.size()) > options_.max_seqs && !evict_one()) {
      seqs_.erase(it);
      continue;
    }
    const int32_t room = prepare(seq, ask.tokens, k);
    if (room > 0) work_.push_back({&ask, &seq, room, static_cast<int32_t>(seq.computed.size())});
  }
  if (work_.empty()) return;

  // Catch-up: the positions each sequence lacks. A long stretch (a prompt, the whole sequence
  // after an eviction) is caught up max_rows rows a call, like the scheduler's prompt chunks, so
  // the step that asks does not stall every stream for it; that sequence drafts once caught up.
  // The short ones of the steady state (the guesses kept and the target's own token) always run,
  // shortest first. A sequence's last token asks for logits: they give its first draft token.
  std::sort(work_.begin(), work_.end(), [](const Work& a, const Work& b) {
    const auto behind = [](const Work& w) {
      return static_cast<int32_t>(w.ask->tokens.size()) - w.n_begin;
    };
    return behind(a) != behind(b) ? behind(a) < behind(b) : a.ask->seq < b.ask->seq;
  });
  int32_t budget = options_.max_rows;
  if (step_limit_s_ > 0) {  // unmeasured: a probe of 64 rows (more than a steady-state pass)
    const double rows = catch_up_row_s_ > 0 ? kCatchUpShare * step_limit_s_ / catch_up_row_s_ : 64;
    budget = static_cast<int32_t>(std::clamp(rows, 16.0, static_cast<double>(budget)));
  }
  for (Work& wk : work_) {
    const int32_t behind = static_cast<int32_t>(wk.ask->tokens.size()) - wk.n_begin;
    if (behind <= kAlwaysCatchUp) {
      wk.n_end = wk.n_begin + behind;
      continue;
    }
    const int32_t rows = std::min(behind, std::max(budget, 0));
    budget -= rows;
    wk.n_end = wk.n_begin + rows;
  }
  // The tables no longer change in this call.
  batch_.block_tables.resize(work_.size());
  for (size_t w = 0; w < work_.size(); ++w) batch_.block_tables[w] = work_[w].seq->table;
  // Passes of at most max_rows rows, across sequences.
  bool ok = true;
  for (size_t w = 0; ok && w < work_.size();) {
    batch_.rows.clear();
    logit_work_.clear();
    int32_t room = options_.max_rows;
    for (; w < work_.size() && room > 0;) {
      Work& wk = work_[w];
      const std::span<const int32_t> tokens = wk.ask->tokens;
      const int32_t n = static_cast<int32_t>(tokens.size());
      const int32_t end = std::min(wk.n_end, wk.n_begin + room);
      for (int32_t p = wk.n_begin; p < end; ++p) {
        batch_.rows.push_back({tokens[static_cast<size_t>(p)], p, static_cast<int32_t>(w),
                               /*logits=*/p == n - 1});
      }
      room -= end - wk.n_begin;
      wk.n_begin = end;
      if (end < wk.n_end) break;
      if (end == n) logit_work_.push_back(static_cast<int32_t>(w));
      ++w;
    }
    if (batch_.rows.empty()) break;  // only sequences left for later calls
    ok = run_pass(pool, /*measure=*/true);
    if (!ok) break;
    for (Work& wk : work_) {  // record what the pass computed
      Seq& seq = *wk.seq;
      const int32_t begin = static_cast<int32_t>(seq.computed.size());
      if (begin >= wk.n_begin) continue;
      kv_.fill(seq.table, wk.ask->tokens, begin, wk.n_begin);
      seq.computed.insert(seq.computed.end(), wk.ask->tokens.begin() + begin,
                          wk.ask->tokens.begin() + wk.n_begin);
    }
  }

  // Greedy generation, batched: each pass feeds every unfinished sequence its last draft token.
  // A sequence stops at k tokens or after proposing an end-of-generation token.
  while (ok) {
    batch_.rows.clear();
    logit_work_.clear();
    for (size_t w = 0; w < work_.size(); ++w) {
      const Work& wk = work_[w];
      const std::vector<int32_t>& draft = *wk.ask->draft;
      if (draft.empty() || static_cast<int32_t>(draft.size()) >= wk.k ||
          tokenizer_.is_eog(draft.back())) {
        continue;
      }
      batch_.rows.push_back({draft.back(), static_cast<int32_t>(wk.seq->computed.size()),
                             static_cast<int32_t>(w), /*logits=*/true});
      logit_work_.push_back(static_cast<int32_t>(w));
    }
    if (batch_.rows.empty()) break;
    ok = run_pass(pool, /*measure=*/true);
    if (!ok) break;
    for (const BatchRow& row : batch_.rows) {
      Seq& seq = *work_[static_cast<size_t>(row.seq)].seq;
      seq.computed.push_back(row.token);
      kv_.fill(seq.table, seq.computed, row.pos, row.pos + 1);
    }
  }
  if (!ok) {
    // A forward pass failed (it should not: tokens and blocks were checked). Propose nothing and
    // start these sequences afresh next time.
    for (Work& wk : work_) {
      wk.ask->draft->clear();
      drop(*wk.seq);
    }
  }
}

}  // namespace ponder
