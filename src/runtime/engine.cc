#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "base/log.h"
#include "base/timer.h"
#include "cpu/cpu_features.h"
#include "cpu/topology.h"
#include "runtime/constrained.h"
#include "runtime/draft_length.h"
#include "runtime/reasoning_splitter.h"
#include "runtime/stop_strings.h"
#include "text/stream_decoder.h"

namespace ponder {
namespace {

constexpr int32_t kMaxChoices = 16;
constexpr int32_t kMaxTopLogprobs = 20;

std::vector<int> pin_list(bool pin) {
  return pin ? cpu_topology().one_cpu_per_core : std::vector<int>{};
}

// log-softmax of the raw logits at `token`, and the k most likely tokens.
void fill_logprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t k,
                   EngineEvent* ev) {
  float max = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const double lse = static_cast<double>(max) + std::log(sum);
  ev->logprob = static_cast<float>(logits[token] - lse);
  ev->top_logprobs.clear();
  if (k <= 0) return;
  // A small sorted array: most logits lose against the k-th best at once.
  std::vector<TokenLogprob>& top = ev->top_logprobs;
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (static_cast<int32_t>(top.size()) == k && logits[i] <= top.back().logprob) continue;
    TokenLogprob t{i, logits[i]};
    auto pos = std::upper_bound(
        top.begin(), top.end(), t,
        [](const TokenLogprob& a, const TokenLogprob& b) { return a.logprob > b.logprob; });
    top.insert(pos, t);
    if (static_cast<int32_t>(top.size()) > k) top.pop_back();
  }
  for (TokenLogprob& t : top) t.logprob = static_cast<float>(t.logprob - lse);
}

}  // namespace

struct Engine::RequestState {
  EventSink sink;
  int32_t choices_left = 1;
  int32_t n_logprobs = -1;
  bool prefill_only = false;
  bool report_progress = false;
};

struct Engine::SeqState {
  SeqState(const text::Tokenizer& tok, int32_t n_vocab, const EngineRequest& req, int32_t choice)
      : sampler(n_vocab,
                [&] {
                  SamplerParams p = req.options.sampling;
                  p.seed +=
                      static_cast<uint64_t>(choice);  // each choice its own stream, reproducibly
                  return p;
                }()),
        decoder(tok),
        stops(req.options.stop),
        splitter(req.starts_in_thinking && req.split_reasoning),
        thinking(req.starts_in_thinking) {}
  uint64_t request = 0;
  int32_t choice = 0;
  int32_t max_tokens = 0;
  int32_t n_keep = 0;  // context shift: positions kept
  int32_t reasoning_budget = -1;
  std::deque<int32_t> forced;  // tokens to emit next instead of sampling ("</think>\n\n")
  bool stop_at_eog = true;
  bool started = false;                       // its prompt has had a step
  bool answering = true;                      // past R1's thinking (the grammar, if any, applies)
  std::unique_ptr<grammar::Matcher> matcher;  // the request's grammar, this choice's place in it
  Sampler sampler;
  text::StreamDecoder decoder;
  StopStrings stops;
  ReasoningSplitter splitter;  // the text's reasoning / content (all content when not split)
  ReasoningSplitter thinking;  // where R1's thinking ends, when "</think>" is not one token
  DraftLength draft_length;    // speculative decoding: how many guesses next
  GenerateStats stats;
  Timer since_submit;
  Timer since_token;
};

Engine::Engine(Qwen2Model& model, const text::Tokenizer& tokenizer, EngineConfig config)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      max_context_(0),
      cache_(model.make_cache(
          (std::max(config.kv_positions, kKvBlockSize) + kKvBlockSize - 1) / kKvBlockSize,
          kKvBlockSize)),
      scheduler_(SchedulerConfig{config.max_running, config.max_batch},
                 static_cast<int32_t>(cache_.n_blocks())) {
  const int64_t pool_positions = cache_.n_blocks() * kKvBlockSize;
  int64_t ctx = config_.max_context > 0 ? config_.max_context : pool_positions;
  if (model.config().n_ctx_train > 0 && config_.max_context <= 0)
    ctx = std::min(ctx, model.config().n_ctx_train);
  max_context_ = static_cast<int32_t>(std::min(ctx, pool_positions));
  if (config_.draft)
    config_.draft->set_step_limit(config_.max_step_s);
  else
    config_.max_draft = 0;
  config_.max_draft = std::max(config_.max_draft, 0);
  config_.min_draft = std::clamp(config_.min_draft, 0, config_.max_draft);
  logits_.resize(static_cast<size_t>(config_.max_running) *
                 static_cast<size_t>(1 + config_.max_draft) *
                 static_cast<size_t>(model.config().n_vocab));
  recorder_.set_gauges(0, 0, scheduler_.pool().n_blocks(), 0, 0, kKvBlockSize);
  end_think_tokens_ = tokenizer_.encode("</think>\n\n", true);
  if (const std::vector<int32_t> t = tokenizer_.encode("</think>", true); t.size() == 1)
    think_end_token_ = t[0];
  grammar_vocab_ = grammar_vocabulary(tokenizer_, static_cast<int32_t>(model.config().n_vocab));
  masked_logits_.resize(static_cast<size_t>(model.config().n_vocab));
  if (!config_.kv_disk.dir.empty()) {
    kv_disk_ = std::make_unique<KvDisk>(config_.kv_disk, numerics_key(), cache_);
    scheduler_.set_block_tier(kv_disk_.get());
    // The blocks it copies come back to the pool on the engine thread, woken for it when idle.
    kv_disk_->set_on_copied([this] {
      std::lock_guard<std::mutex> lock(mu_);
      tier_copied_ = true;
      cv_.notify_one();
    });
  }
  thread_ = std::thread([this] { loop(); });
}

std::string Engine::numerics_key() const {
  // The rows depend on the weights (the file), the attention order and KV types, the matrix
  // layout (x16 or llama.cpp's) and the ISA's kernel order; not on threads or batches.
  return fmt::format("model {} | {} | x16 {} | isa {} | block {}", config_.model_fingerprint,
                     model_.numerics(), model_.x16_copy_bytes() > 0 ? "on" : "off",
                     isa_name(active_isa()), kKvBlockSize);
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (kv_disk_ != nullptr) kv_disk_->set_on_copied(nullptr);  // mu_ and cv_ go before it
}

Expected<uint64_t> Engine::submit(EngineRequest req) {
  // The one place a request's tokens and size are checked; the kind says how to answer.
  auto reject = [&](Status st, StatusKind kind) -> Expected<uint64_t> {
    recorder_.update([](EngineCounters& c) { c.requests_rejected++; });
    return st.with_kind(kind);
  };
  const StatusKind invalid = StatusKind::kInvalidInput;
  const int32_t n_vocab = static_cast<int32_t>(model_.config().n_vocab);
  const int32_t n_prompt = static_cast<int32_t>(req.prompt.size());
  if (n_prompt == 0) return reject(Status::error("the prompt is empty"), invalid);
  for (int32_t i = 0; i < n_prompt; ++i) {
    if (req.prompt[i] < 0 || req.prompt[i] >= n_vocab) {
      return reject(
          Status::errorf("prompt token {} at position {} is outside the vocabulary [0, {})",
                         req.prompt[i], i, n_vocab),
          invalid);
    }
  }
  if (Status st = validate_sampler_params(req.options.sampling, n_vocab); !st.is_ok())
    return reject(st, invalid);
  if (req.n_choices < 1 || req.n_choices > kMaxChoices) {
    return reject(
        Status::errorf("n is {}; it must be between 1 and {}", req.n_choices, kMaxChoices),
        invalid);
  }
  if (req.n_logprobs > kMaxTopLogprobs) {
    return reject(Status::errorf("top logprobs is {}; at most {}", req.n_logprobs, kMaxTopLogprobs),
                  invalid);
  }
  if (req.options.max_tokens < 0) {
    return reject(
        Status::errorf("max_tokens is {}; it must not be negative", req.options.max_tokens),
        invalid);
  }
  if (n_prompt >= max_context_ + (req.prefill_only ? 1 : 0)) {
    return reject(
        Status::errorf("the prompt has {} tokens but the context holds {}", n_prompt, max_context_),
        StatusKind::kTooLong);
  }
  if (req.prefill_only) {
    req.n_choices = 1;
    req.options.max_tokens = 0;
  } else if (req.options.max_tokens == 0) {
    req.options.max_tokens = max_context_ - n_prompt;
  } else if (static_cast<int64_t>(n_prompt) + req.options.max_tokens > max_context_ &&
             !config_.context_shift) {
    return reject(Status::errorf("this request needs {} tokens ({} in the prompt + {} to generate) "
                                 "but the context holds {}",
                                 static_cast<int64_t>(n_prompt) + req.options.max_tokens, n_prompt,
                                 req.options.max_tokens, max_context_),
                  StatusKind::kTooLong);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return reject(Status::error("the engine is stopping"), StatusKind::kBusy);
  const int32_t queued = static_cast<int32_t>(inbox_.size()) + n_waiting_;
  if (queued >= config_.max_queue) {
    lock.unlock();
    return reject(Status::errorf("busy: {} requests are already waiting (at most {})", queued,
                                 config_.max_queue),
                  StatusKind::kBusy);
  }
  const uint64_t id = next_request_++;
  inbox_.emplace_back(id, std::move(req));
  live_[id] = true;
  idle_ = false;
  lock.unlock();
  cv_.notify_one();
  recorder_.update([](EngineCounters& c) { c.requests++; });
  return id;
}

bool Engine::cancel(uint64_t request) { return push_if_live(&cancels_, request); }

bool Engine::push_if_live(std::vector<uint64_t>* queue, uint64_t request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!live_.count(request)) return false;
    queue->push_back(request);
  }
  cv_.notify_one();
  return true;
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m = recorder_.snapshot();
  if (kv_disk_) m.kv_disk = kv_disk_->stats();
  return m;
}

void Engine::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return live_.empty() && idle_; });
}

void Engine::admit(std::deque<std::pair<uint64_t, EngineRequest>>& inbox) {
  const int32_t n_vocab = static_cast<int32_t>(model_.config().n_vocab);
  for (auto& [id, req] : inbox) {
    auto rs = std::make_unique<RequestState>();
    rs->sink = std::move(req.sink);
    rs->choices_left = req.n_choices;
    rs->n_logprobs = req.n_logprobs;
    rs->prefill_only = req.prefill_only;
    rs->report_progress = req.report_progress;
    uint64_t leader = 0;
    for (int32_t c = 0; c < req.n_choices; ++c) {
      auto seq = std::make_unique<Sequence>();
      seq->id = next_seq_++;
      seq->request = id;
      seq->leader = leader;
      seq->tokens = req.prompt;
      seq->n_prompt = static_cast<int32_t>(req.prompt.size());
      seq->wants_logits = !req.prefill_only;
      if (c == 0) leader = seq->id;
      auto st = std::make_unique<SeqState>(tokenizer_, n_vocab, req, c);
      st->request = id;
      st->choice = c;
      st->max_tokens = req.options.max_tokens;
      const int32_t keep =
          req.options.n_keep == GenerateOptions::kKeepDefault ? config_.n_keep : req.options.n_keep;
      st->n_keep = keep < 0 ? seq->n_prompt : keep;
      st->reasoning_budget = req.starts_in_thinking ? req.options.reasoning_budget : -1;
      st->stop_at_eog = req.options.stop_at_eog;
      st->answering = !req.starts_in_thinking;
      if (req.options.grammar)
        st->matcher = std::make_unique<grammar::Matcher>(req.options.grammar, grammar_vocab_);
      st->stats.n_prompt = seq->n_prompt;
      for (int32_t t : req.prompt) st->sampler.accept(t);
      seqs_[seq->id] = std::move(st);
      scheduler_.add(std::move(seq));
    }
    requests_[id] = std::move(rs);
  }
}

void Engine::finish(uint64_t seq_id, const std::string& reason, const std::string& error) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqState& st = *it->second;
  EngineEvent ev;
  ev.kind = EngineEvent::Kind::kDone;
  ev.request = st.request;
  ev.choice = st.choice;
  ev.error = error;
  if (!st.stops.stopped()) {
    std::string tail(st.stops.push(st.decoder.flush()));
    tail += st.stops.flush();
    ReasoningSplitter::Parts a = st.splitter.push(tail);
    ReasoningSplitter::Parts b = st.splitter.flush();
    ev.reasoning = a.reasoning + b.reasoning;
    ev.content = a.content + b.content;
  }
  if (const Sequence* seq = scheduler_.find(seq_id)) st.stats.n_preempted = seq->n_preempted;
  if (st.stats.n_gen > 0)
    st.stats.gen_s = st.stats.ttft_s > 0 ? st.since_submit.seconds() - st.stats.ttft_s : 0;
  st.stats.finish_reason = reason;
  ev.stats = std::move(st.stats);
  scheduler_.remove(seq_id);
  if (config_.draft) config_.draft->forget(seq_id);
  const uint64_t request = st.request;
  seqs_.erase(it);
  auto rit = requests_.find(request);
  if (rit == requests_.end()) return;
  const bool last = rit->second->choices_left == 1;
  recorder_.update([&](EngineCounters& c) {
    (reason == "cancelled" ? c.requests_cancelled : c.requests_finished) += last;
  });
  if (last) {
    // Gone before its client hears of the end: a cancel() after the last event returns false.
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(request);
  }
  if (rit->second->sink) rit->second->sink(std::move(ev));
  if (--rit->second->choices_left == 0) requests_.erase(rit);
}

int32_t Engine::prefill_budget() const {
  return step_time_.prompt_rows(scheduler_.n_decoding(), config_.max_step_s, config_.max_batch);
}

int32_t Engine::disk_read_budget() const {
  if (!kv_disk_ || scheduler_.n_decoding() == 0) return INT32_MAX;  // nobody waits for a token
  // Until a read is measured: 1 GB/s (the page cache reads 3-4 GB/s, an SSD 0.5-3).
  constexpr double kAssumedBytesPerS = 1e9;
  const KvDiskStats st = kv_disk_->stats();
  const double block_s = st.blocks_read > 0
                             ? st.read_s / static_cast<double>(st.blocks_read)
                             : static_cast<double>(kv_disk_->block_bytes()) / kAssumedBytesPerS;
  const double blocks = config_.kv_disk_read_share * config_.max_step_s / block_s;
  return static_cast<int32_t>(std::clamp(blocks, 1.0, 1e6));
}

void Engine::sample(SeqState& st, Sequence& seq, const float* logits) {
  const int32_t n_vocab = static_cast<int32_t>(model_.config().n_vocab);
  int32_t token = 0;
  const bool constrained = st.matcher && st.answering;
  if (!st.forced.empty()) {
    token = st.forced.front();
    st.forced.pop_front();
  } else if (constrained) {
    token = sample_constrained(st, logits);
  } else {
    token = st.sampler.sample(logits);
    if (st.matcher && tokenizer_.is_eog(token) && !st.answering) {
      // A constrained request must answer: its end while thinking becomes "</think>".
      force_end_of_thinking(st, false);
      token = st.forced.front();
      st.forced.pop_front();
    }
  }
  st.sampler.accept(token);
  if (st.stats.n_gen == 0) {
    st.stats.ttft_s = st.since_submit.seconds();
    st.stats.prompt_s = st.stats.ttft_s - st.stats.queue_s;
    const double ttft = st.stats.ttft_s;
    recorder_.update([&](EngineCounters& c) { c.add_ttft(ttft); });
  } else {
    st.stats.max_gap_s = std::max(st.stats.max_gap_s, st.since_token.seconds());
  }
  st.since_token.reset();
  st.stats.n_gen++;
  st.stats.tokens.push_back(token);

  EngineEvent ev;
  ev.request = st.request;
  ev.choice = st.choice;
  ev.token = token;
  const RequestState& rs = *requests_.at(st.request);
  if (rs.n_logprobs >= 0) fill_logprobs(logits, n_vocab, token, rs.n_logprobs, &ev);
  if (!st.answering) st.stats.n_reasoning++;
  const bool eog = st.stop_at_eog && tokenizer_.is_eog(token);
  if (!eog) {
    const std::string_view text = st.stops.push(st.decoder.feed(token));
    if (!text.empty()) {
      ReasoningSplitter::Parts parts = st.splitter.push(text);
      if (think_end_token_ < 0 && !st.answering) st.thinking.push(text);  // only read then
      ev.reasoning = std::move(parts.reasoning);
      ev.content = std::move(parts.content);
    }
  }
  if (rs.sink) rs.sink(std::move(ev));
  if (!st.answering &&
      (token == think_end_token_ || (think_end_token_ < 0 && !st.thinking.in_thinking()))) {
    st.answering = true;
  }
  if (st.reasoning_budget >= 0 && st.forced.empty() && !st.answering &&
      st.stats.n_reasoning >= st.reasoning_budget) {
    force_end_of_thinking(st, false);
  }
  bool grammar_done = false;
  if (constrained && !eog) {
    // A forced token the grammar refuses (a stop of the thinking it did not plan) is written
    // but not matched; the mask keeps every sampled one inside the grammar.
    if (!st.matcher->accept_token(token)) log_warn("grammar: refused forced token {}", token);
    grammar_done = st.matcher->complete();
  }
  if (eog || st.stops.stopped() || grammar_done) {
    finish(seq.id, "stop");
  } else if (st.stats.n_gen >= st.max_tokens) {
    finish(seq.id, "length");
  } else {
    seq.tokens.push_back(token);
    if (static_cast<int32_t>(seq.tokens.size()) > max_context_) shift_context(st, seq);
  }
}

// The sampler's chain over the logits with every token the grammar refuses at -inf; end of
// generation only where the grammar may end.
int32_t Engine::sample_constrained(SeqState& st, const float* logits) {
  const int32_t n_vocab = static_cast<int32_t>(model_.config().n_vocab);
  const std::shared_ptr<const std::vector<uint64_t>> mask = st.matcher->allowed();
  const bool may_end = st.matcher->accepting();
  float* out = masked_logits_.data();
  const uint64_t* bits = mask->data();
  for (int32_t t = 0; t < n_vocab; ++t) {
    const bool ok = (bits[t >> 6] >> (t & 63)) & 1;
    out[t] = ok ? logits[t] : -INFINITY;
  }
  if (may_end && st.stop_at_eog) {  // (ignore_eos: the grammar's end is the only end)
    for (int32_t t : tokenizer_.eog_tokens()) {
      if (t >= 0 && t < n_vocab) out[t] = logits[t];
    }
  }
  return st.sampler.sample(out);
}

void Engine::force_end_of_thinking(SeqState& st, bool on_request) {
  if (st.answering || !st.forced.empty()) return;
  st.forced.assign(end_think_tokens_.begin(), end_think_tokens_.end());
  st.stats.thinking_cut = true;
  st.stats.thinking_cut_on_request = on_request;
}

bool Engine::end_thinking(uint64_t request) { return push_if_live(&end_thinking_, request); }

void Engine::shift_context(SeqState& st, Sequence& seq) {
  ContextShift cs;
  if (!config_.context_shift || !scheduler_.shift_context(&seq, st.n_keep, &cs)) {
    finish(seq.id, "context");
    return;
  }
  for (const BlockCopy& c : cs.copies) cache_.copy_block(c.src, c.dst, c.n_slots);
  for (size_t i = 0; i < cs.blocks.size(); ++i)
    model_.rotate_keys(cache_, cs.blocks[i], cs.n_slots[i], cs.delta);
  st.stats.n_shifts++;
  log_debug("engine: context shift of sequence {}: kept {}, dropped {}, moved {} blocks", seq.id,
            cs.n_kept, cs.n_dropped, cs.blocks.size());
}

void Engine::propose_drafts(ThreadPool& pool) {
  if (!config_.draft) return;
  std::vector<Sequence*> seqs = scheduler_.decoding_sequences();
  // One more row, and drafting one more token, against the step time a sequence accounts for.
  // A guess row's own cost once steps with guesses measured it, a prompt row's until then.
  const double step_s = step_time_.decode_step_s();
  const double row_s =
      step_time_.guess_row_s() >= 0 ? step_time_.guess_row_s() : step_time_.prompt_row_s();
  // A plain step first, and now and then: it measures what guesses are weighed against.
  if (step_s < 0 || step_time_.wants_plain_step()) {
    for (Sequence* s : seqs) s->draft.clear();
    return;
  }
  double extra = 0.1;  // until a row's cost is measured
  if (row_s >= 0 && !seqs.empty()) {
    const double draft_s = config_.draft->seconds_per_token();
    extra = (row_s + draft_s) * static_cast<double>(seqs.size()) / step_s;
  }
  asks_.clear();
  for (Sequence* s : seqs) {
    s->draft.clear();
    SeqState& st = *seqs_.at(s->id);
    if (!s->wants_logits || !st.forced.empty()) continue;
    // Every guess kept and the token after them must fit the request and the context (no
    // context shift inside a draft).
    const int32_t room = std::min(st.max_tokens - st.stats.n_gen - 1,
                                  max_context_ - static_cast<int32_t>(s->tokens.size()) - 1);
    const int32_t k =
        std::min(std::max(st.draft_length.next(extra, config_.max_draft), config_.min_draft), room);
    if (k <= 0) continue;
    asks_.push_back({s->id, std::span<const int32_t>(s->tokens), k, &s->draft});
  }
  if (asks_.empty()) return;
  config_.draft->propose(asks_, pool);
  for (const DraftAsk& a : asks_) {
    if (static_cast<int32_t>(a.draft->size()) > a.max_draft) a.draft->resize(a.max_draft);
  }
}

void Engine::verify(const StepChunk& c, const float* logits, int64_t* emitted) {
  const int64_t n_vocab = model_.config().n_vocab;
  Sequence* seq = c.seq;
  const uint64_t id = seq->id;
  SeqState& st = *seqs_.at(id);
  const std::vector<int32_t> guesses(seq->draft.begin(), seq->draft.begin() + c.n_draft);
  st.stats.n_drafted += c.n_draft;
  int32_t kept = 0;
  bool finished = false;
  for (int32_t i = 0;; ++i) {
    sample(st, *seq, logits + i * n_vocab);
    ++*emitted;
    if (!seqs_.count(id)) {
      finished = true;  // seq and st are gone
      break;
    }
    if (i == c.n_draft || seq->tokens.back() != guesses[static_cast<size_t>(i)]) break;
    scheduler_.commit_guess(seq);  // the guess's K/V are the sampled token's
    st.stats.n_draft_accepted++;
    kept++;
  }
  if (c.n_draft > 0) {
    recorder_.update([&](EngineCounters& k) {
      k.drafted_tokens += c.n_draft;
      k.draft_accepted_tokens += kept;
    });
  }
  if (finished) return;
  if (c.n_draft > 0) st.draft_length.observe(c.n_draft, kept);
  scheduler_.end_draft(seq);
}

void Engine::step(ThreadPool& pool, ThreadPool* batch_pool) {
  propose_drafts(pool);
  StepPlan plan = scheduler_.schedule(prefill_budget(), disk_read_budget());
  if (!plan.preempted.empty()) {
    const int64_t n = static_cast<int64_t>(plan.preempted.size());
    recorder_.update([&](EngineCounters& c) { c.preemptions += n; });
    log_debug("engine: KV pool full, {} sequence(s) preempted", n);
  }
  for (const BlockCopy& c : plan.copies) cache_.copy_block(c.src, c.dst, c.n_slots);
  if (plan.empty()) {
    // Nothing can run until something changes (a leader's prompt, room in the pool): no hot spin.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }

  Batch batch;
  batch.rows.reserve(static_cast<size_t>(plan.n_rows));
  int64_t new_prompt = 0, new_cached = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const StepChunk& c = plan.chunks[i];
    batch.block_tables.emplace_back(c.seq->blocks);
    for (int32_t p = c.begin; p < c.end; ++p) {
      // A draft's rows all give logits (the guesses are verified in order).
      const bool logits = c.logits && (p + 1 == c.end || c.n_draft > 0);
      batch.rows.push_back({c.token(p), p, static_cast<int32_t>(i), logits});
    }
    SeqState& st = *seqs_.at(c.seq->id);
    if (!st.started) {
      st.started = true;
      st.stats.queue_s = st.since_submit.seconds();
      st.stats.n_reused = c.seq->n_cached;
      new_prompt += c.seq->n_prompt;
      new_cached += c.seq->n_cached;
    }
  }
  ThreadPool& p = (batch_pool != nullptr && plan.n_rows > plan.n_decode) ? *batch_pool : pool;
  Timer t;
  const Status st = model_.forward(batch, cache_, logits_.data(), p);
  const double dt = t.seconds();
  if (!st.is_ok()) {
    // A bug, not bad input (submit checked the tokens): fail the requests in this step, go on.
    log_warn("engine: forward pass failed: {}", st.message());
    std::vector<uint64_t> ids;
    for (const StepChunk& c : plan.chunks) ids.push_back(c.seq->id);
    for (uint64_t id : ids) finish(id, "error", st.message());
    return;
  }
  for (const StepChunk& c : plan.chunks) {  // progress of the prompts this step worked on
    if (c.begin >= c.seq->n_prompt) continue;
    SeqState& ps = *seqs_.at(c.seq->id);
    const RequestState& rs = *requests_.at(ps.request);
    if (!rs.report_progress || ps.choice != 0 || !rs.sink) continue;
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::kProgress;
    ev.request = ps.request;
    ev.prompt_done = std::min(c.end, c.seq->n_prompt);
    ev.stats.n_prompt = c.seq->n_prompt;
    ev.stats.n_reused = c.seq->n_cached;
    ev.stats.prompt_s = ps.since_submit.seconds() - ps.stats.queue_s;
    rs.sink(std::move(ev));
  }
  for (uint64_t id : scheduler_.complete(plan)) finish(id, "stop");

  std::vector<std::pair<const StepChunk*, int64_t>> to_sample;  // (chunk, its first logits row)
  int64_t row = 0;
  for (const StepChunk& c : plan.chunks) {
    if (!c.logits) continue;
    to_sample.push_back({&c, row});
    row += 1 + c.n_draft;
  }
  const int64_t n_vocab = model_.config().n_vocab;
  int64_t emitted = 0;
  for (auto [c, first] : to_sample) verify(*c, logits_.data() + first * n_vocab, &emitted);

  const int32_t extra_rows = plan.n_rows - plan.n_decode;
  const int32_t prompt_rows = extra_rows - plan.n_draft;
  if (plan.n_decode > 0 && extra_rows > 0)  // rows beside streams: their time against the model
    log_debug(
        "engine: step {} decode + {} prompt + {} guess rows: {:.1f} ms (model {:.1f} + "
        "{:.2f}/row)",
        plan.n_decode, prompt_rows, plan.n_draft, dt * 1e3, step_time_.decode_step_s() * 1e3,
        step_time_.prompt_row_s() * 1e3);
  step_time_.observe(plan.n_decode, prompt_rows, dt, plan.n_draft);
  recorder_.update([&](EngineCounters& c) {
    c.steps++;
    c.step_sequences += static_cast<int64_t>(plan.chunks.size());
    c.busy_s += dt;
    c.prompt_rows += prompt_rows;
    c.prompt_tokens += new_prompt;
    c.prompt_tokens_cached += new_cached;
    c.generated_tokens += emitted;
  });
}

void Engine::loop() {
  // The pools are made here: a pool pins (with --pin) and runs its thread 0 on the calling thread.
  ThreadPool pool(config_.threads.n_threads, pin_list(config_.threads.pin));
  std::unique_ptr<ThreadPool> batch_pool;
  if (config_.threads.n_threads_batch > 0 &&
      config_.threads.n_threads_batch != config_.threads.n_threads) {
    batch_pool = std::make_unique<ThreadPool>(config_.threads.n_threads_batch,
                                              pin_list(config_.threads.pin));
  }
  for (;;) {
    std::deque<std::pair<uint64_t, EngineRequest>> inbox;
    std::vector<uint64_t> cancels;
    std::vector<uint64_t> end_thinking;
    {
      std::unique_lock<std::mutex> lock(mu_);
      idle_ = scheduler_.idle() && inbox_.empty() && cancels_.empty() &&
              scheduler_.pool().n_tier_held() == 0;  // gauges already updated
      if (idle_) idle_cv_.notify_all();
      cv_.wait(lock, [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || !end_thinking_.empty() ||
               !scheduler_.idle() || tier_copied_;
      });
      if (stop_) break;
      tier_copied_ = false;
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      end_thinking.swap(end_thinking_);
      n_waiting_ += static_cast<int32_t>(inbox.size());  // queued until the next count
    }
    admit(inbox);
    for (uint64_t r : end_thinking) {
      for (uint64_t s : scheduler_.sequences_of(r)) force_end_of_thinking(*seqs_.at(s), true);
    }
    for (uint64_t r : cancels) {
      for (uint64_t s : scheduler_.sequences_of(r)) finish(s, "cancelled");
    }
    if (!scheduler_.idle()) {
      step(pool, batch_pool.get());
    } else {
      scheduler_.take_back_tier_blocks();  // a step does it first thing
    }
    {
      // Recounted before the gauges go out: once they say 0 waiting, submit() agrees.
      std::lock_guard<std::mutex> lock(mu_);
      n_waiting_ = 0;
      for (const auto& [id, rs] : requests_) {
        (void)rs;
        bool started = false;
        for (uint64_t s : scheduler_.sequences_of(id)) started |= seqs_.at(s)->started;
        n_waiting_ += !started;
      }
    }
    const KvPool& kv = scheduler_.pool();
    recorder_.set_gauges(n_waiting_, scheduler_.n_running(), kv.n_blocks(), kv.n_used(),
                         kv.n_cached(), kKvBlockSize);
  }
  // Stopping: every request still here ends cancelled.
  std::deque<std::pair<uint64_t, EngineRequest>> inbox;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
  }
  admit(inbox);
  std::vector<uint64_t> ids;
  for (const auto& [id, st] : seqs_) ids.push_back(id);
  for (uint64_t id : ids) finish(id, "cancelled");
}

}  // namespace ponder
