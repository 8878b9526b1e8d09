#include "runtime/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace ponder {

Scheduler::Scheduler(SchedulerConfig config, int32_t n_blocks) : config_(config), pool_(n_blocks) {
  PONDER_CHECK(config_.max_running > 0 && config_.max_batch > 0);
}

Sequence* Scheduler::add(std::unique_ptr<Sequence> seq) {
  PONDER_CHECK(!seq->tokens.empty() && seq->n_computed == 0 && seq->blocks.empty());
  PONDER_CHECK(waiting_.empty() || waiting_.back()->id < seq->id);
  PONDER_CHECK(running_.empty() || running_.back()->id < seq->id);
  waiting_.push_back(std::move(seq));
  return waiting_.back().get();
}

int32_t Scheduler::n_decoding() const {
  int32_t n = 0;
  for (const auto& s : running_) n += s->decoding();
  return n;
}

Sequence* Scheduler::find(uint64_t id) {
  for (auto& s : running_) {
    if (s->id == id) return s.get();
  }
  for (auto& s : waiting_) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

std::vector<uint64_t> Scheduler::sequences_of(uint64_t request) const {
  std::vector<uint64_t> ids;
  for (const auto& s : running_) {
    if (s->request == request) ids.push_back(s->id);
  }
  for (const auto& s : waiting_) {
    if (s->request == request) ids.push_back(s->id);
  }
  return ids;
}

bool Scheduler::remove(uint64_t id) {
  auto drop = [&](auto& list) {
    for (auto it = list.begin(); it != list.end(); ++it) {
      if ((*it)->id == id) {
        if (tier_ != nullptr) pool_.save_to(*tier_, (*it)->blocks);
        pool_.release(&(*it)->blocks);
        pool_.release(&(*it)->tier_blocks);
        list.erase(it);
        return true;
      }
    }
    return false;
  };
  return drop(running_) || drop(waiting_);
}

bool Scheduler::admissible(const Sequence& s) const {
  if (s.leader == 0) return true;
  // Another choice of the same prompt: wait until the leader's prompt is in the cache, then share
  // it.
  for (const auto& r : running_) {
    if (r->id == s.leader) return r->n_computed >= r->n_prompt - 1;
  }
  for (const auto& w : waiting_) {
    if (w->id == s.leader) return false;
  }
  return true;  // the leader is gone (finished or cancelled)
}

Sequence* Scheduler::newest_running() { return running_.empty() ? nullptr : running_.back().get(); }

void Scheduler::preempt(Sequence* s, StepPlan* plan) {
  // Drop any rows already planned for it this step.
  auto& chunks = plan->chunks;
  for (auto it = chunks.begin(); it != chunks.end();) {
    if (it->seq == s) {
      plan->n_rows -= it->end - it->begin;
      if (it->seq->decoding()) plan->n_decode -= 1;
      plan->n_draft -= it->n_draft;
      it = chunks.erase(it);
    } else {
      ++it;
    }
  }
  pool_.release(&s->blocks);
  s->n_computed = 0;
  s->draft.clear();
  s->running = false;
  s->n_preempted++;
  plan->preempted.push_back(s->id);
  auto it =
      std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == s; });
  PONDER_CHECK(it != running_.end());
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  // Back into the queue in arrival order: it goes before everything that came after it.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const auto& w) { return w->id > owned->id; });
  waiting_.insert(pos, std::move(owned));
}

bool Scheduler::grow(Sequence* s, int32_t n, bool may_preempt, StepPlan* plan) {
  while (!pool_.allocate(&s->blocks, s->n_computed + n)) {
    // Blocks the tier is still copying come back in moments: waited for before anyone is
    // preempted.
    if (tier_ != nullptr && pool_.take_back(*tier_, /*wait=*/true) > 0) continue;
    if (!may_preempt) return false;
    Sequence* victim = newest_running();
    PONDER_CHECK(victim != nullptr);
    preempt(victim, plan);
    if (victim == s) return false;
  }
  return true;
}

StepPlan Scheduler::schedule(int32_t prefill_budget, int32_t tier_reads) {
  take_back_tier_blocks();
  StepPlan plan;
  int32_t rows_left = config_.max_batch;
  auto add_chunk = [&](Sequence* s, int32_t n) {
    const int32_t end = s->n_computed + n;
    const bool logits = s->wants_logits && end == static_cast<int32_t>(s->tokens.size());
    plan.chunks.push_back({s, s->n_computed, end, logits});
    plan.n_rows += n;
    rows_left -= n;
  };

  // 1. One row for every decoding sequence, oldest first; a full pool preempts the newest. A
  // sequence's draft adds its rows when they fit (the rows and the pool): guesses never preempt.
  int32_t decoding_left = n_decoding();  // each keeps its one row whatever the drafts before it
  for (size_t i = 0; i < running_.size() && rows_left > 0; ++i) {
    Sequence* s = running_[i].get();
    if (!s->decoding()) continue;
    --decoding_left;
    if (!grow(s, 1, /*may_preempt=*/true, &plan)) break;  // s itself was the newest: preempted
    int32_t n_draft =
        std::min(static_cast<int32_t>(s->draft.size()), rows_left - 1 - decoding_left);
    n_draft = std::max(n_draft, 0);
    if (n_draft > 0 && !pool_.allocate(&s->blocks, s->n_computed + 1 + n_draft)) n_draft = 0;
    s->draft.resize(static_cast<size_t>(n_draft));
    add_chunk(s, 1 + n_draft);
    plan.chunks.back().logits = s->wants_logits;
    plan.chunks.back().n_draft = n_draft;
    plan.n_decode++;
    plan.n_draft += n_draft;
  }

  // 2. Chunks of the prompts of running sequences (admitted in an earlier step), oldest first.
  // Draft rows take their share of the prompt budget: both lengthen the streams' step.
  int32_t prefill_left = std::min(std::max(prefill_budget - plan.n_draft, 1), rows_left);
  for (size_t i = 0; i < running_.size() && prefill_left > 0; ++i) {
    Sequence* s = running_[i].get();
    if (s->decoding() || s->pending() <= 0) continue;
    int32_t n = std::min(s->pending(), prefill_left);
    const int32_t room =
        (static_cast<int32_t>(s->blocks.size()) + pool_.n_available()) * kKvBlockSize -
        s->n_computed;
    if (room < n) {
      // Only the oldest sequence may preempt others for its prompt: it must always progress.
      if (i == 0) {
        if (!grow(s, n, true, &plan)) break;
      } else {
        n = room;
        if (n <= 0) continue;
      }
    }
    PONDER_CHECK(pool_.allocate(&s->blocks, s->n_computed + n));
    add_chunk(s, n);
    prefill_left -= n;
  }

  // 3. Admit waiting sequences, first come first served, each with its longest cached prefix.
  for (auto it = waiting_.begin(); it != waiting_.end() && prefill_left > 0 &&
                                   static_cast<int32_t>(running_.size()) < config_.max_running;) {
    Sequence* s = it->get();
    if (!admissible(*s)) {
      ++it;
      continue;
    }
    const auto tokens = std::span<const int32_t>(s->tokens);
    if (tier_ != nullptr) {
      // Goes on from the blocks read in earlier steps (found in the pool now), holding them anew.
      std::vector<int32_t> hold;
      const KvPool::TierLoad load = pool_.load_from(
          *tier_, tokens, static_cast<int32_t>(tokens.size()) - 1, tier_reads, &hold);
      tier_reads -= load.n_read;
      pool_.release(&s->tier_blocks);
      if (load.more) {
        s->tier_blocks = std::move(hold);
        ++it;
        continue;
      }
      // All read: cached now, found and adopted below before anything could evict them.
      pool_.release(&hold);
    }
    const PrefixMatch m = pool_.find_prefix(tokens, static_cast<int32_t>(tokens.size()) - 1);
    int32_t held = 0;  // matched blocks that now count as available and will not be
    for (int32_t b : m.blocks) held += pool_.ref_count(b) == 0;
    if (m.copy_from >= 0 && pool_.ref_count(m.copy_from) == 0) held++;
    const int32_t available = pool_.n_available() - held;
    const int32_t n_match = m.n_tokens();
    int32_t n = std::min(static_cast<int32_t>(tokens.size()) - n_match, prefill_left);
    n = std::min(n, (static_cast<int32_t>(m.blocks.size()) + available) * kKvBlockSize - n_match);
    if (n <= 0) break;  // no room until running sequences finish
    BlockCopy copy;
    s->n_computed = pool_.adopt(&s->blocks, m, tokens, &copy);
    PONDER_CHECK(s->n_computed == n_match);
    if (copy.n_slots > 0) plan.copies.push_back(copy);
    if (s->n_cached < 0) s->n_cached = std::min(s->n_computed, s->n_prompt);
    PONDER_CHECK(pool_.allocate(&s->blocks, s->n_computed + n));
    s->running = true;
    std::unique_ptr<Sequence> owned = std::move(*it);
    it = waiting_.erase(it);
    auto pos = std::find_if(running_.begin(), running_.end(),
                            [&](const auto& r) { return r->id > owned->id; });
    running_.insert(pos, std::move(owned));
    add_chunk(s, n);
    prefill_left -= n;
  }
  return plan;
}

std::vector<uint64_t> Scheduler::complete(const StepPlan& plan) {
  std::vector<uint64_t> done;
  for (const StepChunk& c : plan.chunks) {
    Sequence* s = c.seq;
    PONDER_CHECK(s->n_computed == c.begin);
    const int32_t end = c.end - c.n_draft;  // guesses wait for the engine's verdict
    pool_.fill(s->blocks, s->tokens, c.begin, end, s->findable_end);
    s->n_computed = end;
    if (!s->wants_logits && s->pending() == 0) done.push_back(s->id);
  }
  for (uint64_t id : done) remove(id);
  return done;
}

void Scheduler::commit_guess(Sequence* s) {
  PONDER_CHECK(s->running && s->pending() == 1);
  pool_.fill(s->blocks, s->tokens, s->n_computed, s->n_computed + 1, s->findable_end);
  s->n_computed++;
}

void Scheduler::end_draft(Sequence* s) {
  s->draft.clear();
  // The next step's row (position n_computed) keeps its block if it has one.
  pool_.truncate(&s->blocks, s->n_computed + 1);
}

std::vector<Sequence*> Scheduler::decoding_sequences() {
  std::vector<Sequence*> out;
  for (auto& s : running_) {
    if (s->decoding()) out.push_back(s.get());
  }
  return out;
}

bool Scheduler::shift_context(Sequence* s, int32_t n_keep, ContextShift* out) {
  PONDER_CHECK(s->running && s->decoding());
  const int32_t n = s->n_computed;
  const int32_t keep =
      std::min(n, (std::max(n_keep, 0) + kKvBlockSize - 1) / kKvBlockSize * kKvBlockSize);
  const int32_t rest = n - keep;
  if (rest < 2 * kKvBlockSize) return false;  // drop at least one whole block, keep one after it
  const int32_t drop = std::max(kKvBlockSize, rest / 2 / kKvBlockSize * kKvBlockSize);
  std::vector<int32_t> moved;
  if (!pool_.shift(&s->blocks, keep / kKvBlockSize, drop / kKvBlockSize, &out->copies, &moved))
    return false;
  s->tokens.erase(s->tokens.begin() + keep, s->tokens.begin() + keep + drop);
  s->n_computed = n - drop;
  if (s->n_prompt > keep) s->n_prompt = std::max(keep, s->n_prompt - drop);
  s->findable_end = std::min(s->findable_end, keep);
  for (int32_t idx : moved) {
    out->blocks.push_back(s->blocks[static_cast<size_t>(idx)]);
    out->n_slots.push_back(std::min(kKvBlockSize, s->n_computed - idx * kKvBlockSize));
  }
  out->delta = -drop;
  out->n_kept = keep;
  out->n_dropped = drop;
  return true;
}

}  // namespace ponder
