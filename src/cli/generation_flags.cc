#include "cli/generation_flags.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>

#include "base/log.h"
#include "base/process_priority.h"
#include "cli/model_session.h"
#include "gguf/model_fingerprint.h"
#include "runtime/draft_model.h"
#include "runtime/ngram_draft.h"

namespace ponder::cli {

void KvTypeFlags::add_to(CLI::App& app) {
  const auto types = CLI::IsMember({"auto", "f16", "bf16", "q8_0"});
  app.add_option(
         "--cache-type-k", k,
         "K cache type: auto, f16, bf16 or q8_0. auto: bf16 K and V where the block order "
         "runs bf16 scores "
         "natively (quantized weights, AVX512_BF16) on an AMD CPU (Zen 4 and 5; on Intel's "
         "Raptor Cove cores vdpbf16ps runs at a quarter of an FMA's rate), else f16. bf16 (K "
         "and V together, the "
         "bytes of f16): the "
         "scores and the V sums by vdpbf16ps straight from the cache; on Zen 4 attention "
         "at depth ~1.3x as fast as "
         "f16's (decode at 16384 +13%, prompts at 4096 +8%); on the "
         "quantized golden files inside the exact rule. q8_0: 53% of the bytes, read "
         "directly by the block "
         "order; on the golden files q8_0 K and V keep the exact rule on quantized "
         "weights, and move "
         "F32/F16/BF16 weights from 0.0006-0.009 to 0.012-0.017 mean dlogp from the exact "
         "computation "
         "(docs/numerics.md)")
      ->capture_default_str()
      ->check(types);
  app.add_option("--cache-type-v", v, "V cache type: auto, f16, bf16 or q8_0 (as --cache-type-k)")
      ->capture_default_str()
      ->check(types);
  app.add_option(
         "--attn-scores", scores,
         "the block order's Q.K scores with an f16 or Q8_0 K cache: f32; bf16 (q and K rounded "
         "to bf16, vdpbf16ps: prompts at depth 1.2-1.4x as fast on Zen 4; on the quantized golden "
         "files inside the exact rule, and with a Q8_0 cache inside the kv-q8_0 rule on every "
         "file; emulated, slowly, without AVX512_BF16); int8 (a Q8_0 K cache only: q rounded to "
         "Q8_0, exact integer K.q sums by vpdpbusd, llama.cpp's route for -ctk q8_0; with a Q8_0 "
         "V cache the V sums too in integers, weights rounded to int16 per V block, vpdpwssd; "
         "emulated, "
         "slowly, without AVX512_VNNI or AVX-VNNI); auto: with an f16 K cache bf16 for quantized "
         "weights on "
         "AMD CPUs with AVX512_BF16, else f32; with a "
         "Q8_0 K cache int8 on CPUs with AVX512_VNNI or "
         "AVX-VNNI "
         "(prompts at depth 1.15-1.27x as fast as f32 on Zen 4), else f32. A bf16 cache always "
         "takes bf16 scores.")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "f32", "bf16", "int8"}));
}

bool KvTypeFlags::explicit_types(KvType& k_type, KvType& v_type) const {
  if (k == "auto" && v == "auto") return false;
  const std::string other_of_k = k == "auto" ? (v == "bf16" ? "bf16" : "f16") : k;
  const std::string other_of_v = v == "auto" ? (k == "bf16" ? "bf16" : "f16") : v;
  k_type = parse_kv_type(other_of_k).value();
  v_type = parse_kv_type(other_of_v).value();
  return true;
}

int64_t KvTypeFlags::row_bytes(int64_t head_dim) const {
  KvType kt = KvType::kF16, vt = KvType::kF16;
  explicit_types(kt, vt);
  return kv_row_bytes(kt, head_dim) + kv_row_bytes(vt, head_dim);
}

Status KvTypeFlags::validate(bool flash_attn) const {
  KvType kt = KvType::kF16, vt = KvType::kF16;
  explicit_types(kt, vt);
  if (!flash_attn && (kt != KvType::kF16 || vt != KvType::kF16)) {
    return Status::errorf(
        "--cache-type-k/-v {}/{} needs the block order of attention (--flash-attn 1)",
        kv_type_name(kt), kv_type_name(vt));
  }
  if ((kt == KvType::kBF16) != (vt == KvType::kBF16)) {
    return Status::error(
        "a bf16 KV cache takes K and V together (--cache-type-k bf16 --cache-type-v bf16)");
  }
  if (scores == "f32" && kt == KvType::kBF16) {
    return Status::error(
        "--attn-scores f32 does not go with a bf16 KV cache (its scores are bf16)");
  }
  if (scores == "bf16" && !flash_attn) {
    return Status::error("--attn-scores bf16 needs the block order of attention (--flash-attn 1)");
  }
  if (scores == "int8" && kt != KvType::kQ8_0) {
    return Status::error("--attn-scores int8 needs a Q8_0 K cache (--cache-type-k q8_0)");
  }
  return Status::ok();
}

Status KvTypeFlags::apply(Qwen2Model& model, bool flash_attn) const {
  PONDER_RETURN_IF_ERROR(validate(flash_attn));
  model.set_flash_attention(flash_attn);
  if (scores != "auto") {
    model.set_bf16_scores(scores == "bf16");
    model.set_int8_scores(scores == "int8");
  }
  KvType kt = KvType::kF16, vt = KvType::kF16;
  if (!explicit_types(kt, vt)) {
    model.use_default_kv_types();
    return Status::ok();
  }
  return model.set_kv_types(kt, vt);
}

X16CacheOptions GenerationFlags::x16_cache_options() const {
  X16CacheOptions o = x16_cache_default();
  if (x16_cache == kX16CacheOff) {
    o.dir.clear();
  } else if (!x16_cache.empty()) {
    o.dir = x16_cache;
  }
  if (x16_cache_gib > 0) o.max_bytes = static_cast<int64_t>(x16_cache_gib * double(1ll << 30));
  return o;
}

void GenerationFlags::add_to(CLI::App& app) {
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-c,--ctx,--ctx-size", n_ctx,
                 "KV cache positions, shared by all requests (one request may use all)")
      ->capture_default_str();
  app.add_option("--kv-mem", kv_mem_mib, "KV cache size in MiB (instead of -c positions)");
  app.add_option("-b,--batch-size", batch_size, "most rows in one forward pass")
      ->capture_default_str();
  app.add_flag("--mlock", mlock, "lock the model file in RAM (never paged out)");
  app.add_option("--x16-cache", x16_cache,
                 "where the x16 layout of the weights is kept between starts: off, or a "
                 "directory (default: PONDER_X16_CACHE, else ~/.cache/ponder/x16)");
  app.add_option("--x16-cache-size", x16_cache_gib,
                 "GiB the x16 cache may hold in all; the least recently used files go first "
                 "(default 32, PONDER_X16_CACHE_GIB)")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-disk", kv_disk,
                 "keep the K/V blocks of finished conversations in this directory, so a prompt "
                 "that begins with one reads them back instead of computing them, across restarts "
                 "(default: off)");
  app.add_option("--kv-disk-size", kv_disk_gib,
                 "GiB the --kv-disk directory may hold, every model's files together; the least "
                 "recently used go first")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--spec", spec,
                 "speculative decoding: off, or ngram (prompt lookup: guesses copied from earlier "
                 "in the context, verified as extra rows of the same forward pass; the output is "
                 "bitwise that of plain decoding)")
      ->check(CLI::IsMember({"off", "ngram"}))
      ->capture_default_str();
  app.add_option("--draft", draft_path,
                 "speculative decoding with a draft model: a smaller GGUF with the same tokenizer "
                 "(the 1.5B distill for the 7B-32B) guesses the next tokens; the output is "
                 "bitwise that of plain decoding");
  app.add_option("--draft-max", draft_max,
                 "speculative decoding: most guesses a sequence verifies per step (the length is "
                 "chosen by the acceptance seen and the measured cost of a row)")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  app.add_option(
         "--draft-min", draft_min,
         "speculative decoding: fewest guesses per step when there are any (= --draft-max: a "
         "fixed length)")
      ->check(CLI::Range(0, 32))
      ->capture_default_str();
  app.add_flag("--context-shift", context_shift,
               "when a request fills its context, keep the first --keep tokens, drop half of the "
               "rest and go on "
               "(default: a request that cannot fit is refused before it starts)");
  app.add_option("--keep", n_keep,
                 "tokens kept at the start by a context shift (-1: the whole prompt)")
      ->capture_default_str();
  app.add_option("--prio", prio,
                 "process priority: 0 normal, 1-3 higher (nice -5/-10/-15; needs root)")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "threads for generation (default: the physical cores)");
  app.add_option("--threads-batch", threads_batch,
                 "threads for prompt processing (default: --threads)");
  app.add_flag("--pin", pin, "pin threads to physical cores");
  app.add_option("--flash-attn", flash_attn,
                 "attention order: 1 the block order (flash-style, the default), 0 llama.cpp's "
                 "non-flash order "
                 "(its logits bit for bit, slower at depth)")
      ->capture_default_str();
  kv_types.add_to(app);
  app.add_option("-n,--max-tokens", gen.max_tokens,
                 "most tokens to generate, thinking included (0: up to the context)")
      ->capture_default_str();
  app.add_option("--temp", gen.sampling.temperature, "temperature (0: greedy)")
      ->capture_default_str();
  app.add_option("--top-k", gen.sampling.top_k, "top-k (0: off)")->capture_default_str();
  app.add_option("--top-p", gen.sampling.top_p, "top-p (1: off)")->capture_default_str();
  app.add_option("--min-p", gen.sampling.min_p, "min-p (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", gen.sampling.repeat_penalty, "repetition penalty (1: off)")
      ->capture_default_str();
  app.add_option("--presence-penalty", gen.sampling.presence_penalty, "presence penalty")
      ->capture_default_str();
  app.add_option("--frequency-penalty", gen.sampling.frequency_penalty, "frequency penalty")
      ->capture_default_str();
  app.add_option("--repeat-last-n", gen.sampling.penalty_last_n, "penalty window in tokens")
      ->capture_default_str();
  app.add_option("--seed", gen.sampling.seed, "random seed")->capture_default_str();
  app.add_option("--stop", gen.stop, "stop string (repeatable)");
  app.add_option("--chat-template", template_name,
                 "chat template: deepseek-r1 or chatml (default: from the file)");
  app.add_flag("--hide-thinking", hide_thinking, "do not print the model's thinking");
}

Status GenerationFlags::validate() const {
  PONDER_RETURN_IF_ERROR(kv_types.validate(flash_attn));
  if (n_ctx < 16) return Status::errorf("--ctx {} is too small (at least 16)", n_ctx);
  if (threads < 0) return Status::errorf("--threads {} is negative", threads);
  if (threads_batch < 0) return Status::errorf("--threads-batch {} is negative", threads_batch);
  if (gen.max_tokens < 0) return Status::errorf("--max-tokens {} is negative", gen.max_tokens);
  if (kv_mem_mib < 0) return Status::errorf("--kv-mem {} is negative", kv_mem_mib);
  if (batch_size < 1) return Status::errorf("--batch-size {} must be at least 1", batch_size);
  if (prio < 0 || prio > 3) return Status::errorf("--prio {}: expected 0 to 3", prio);
  if (!draft_path.empty() && spec != "off")
    return Status::errorf("--draft and --spec {}: one source of guesses at a time", spec);
  if (draft_min > draft_max)
    return Status::errorf("--draft-min {} is more than --draft-max {}", draft_min, draft_max);
  return Status::ok();
}

ThreadConfig GenerationFlags::thread_config() const {
  return ThreadConfig{threads > 0 ? threads : default_threads(), threads_batch, pin};
}

EngineConfig GenerationFlags::engine_config(const Qwen2Config& model) const {
  EngineConfig c;
  c.kv_positions = n_ctx;
  if (kv_mem_mib > 0) {
    // K and V rows of every layer and KV head per position.
    const int64_t per_position =
        model.n_layer * model.n_head_kv * kv_types.row_bytes(model.head_dim);
    c.kv_positions =
        static_cast<int32_t>(std::clamp<int64_t>((kv_mem_mib << 20) / per_position, 16, 1 << 24));
  }
  c.max_batch = batch_size;
  c.context_shift = context_shift;
  c.n_keep = n_keep;
  c.threads = thread_config();
  if (spec == "ngram") c.draft = std::make_shared<NgramDraft>();
  c.min_draft = draft_min;
  c.max_draft = draft_max;
  c.kv_disk.dir = kv_disk;
  c.kv_disk.max_bytes = static_cast<int64_t>(kv_disk_gib * double(int64_t{1} << 30));
  return c;
}

EngineConfig GenerationFlags::engine_config(const ModelSession& session) const {
  EngineConfig c = engine_config(session.model->config());
  if (!c.kv_disk.dir.empty()) c.model_fingerprint = model_fingerprint(session.file);
  return c;
}

Status GenerationFlags::attach_draft(const ModelSession& target, EngineConfig* config,
                                     std::shared_ptr<SharedDraftModel>* draft) const {
  if (draft_path.empty()) return Status::ok();
  std::shared_ptr<SharedDraftModel> shared = *draft;
  if (!shared) {
    auto session = ModelSession::open(draft_path, x16_cache_options());
    if (!session.has_value())
      return Status::errorf("--draft {}: {}", draft_path, session.status().message());
    shared = std::make_shared<SharedDraftModel>();
    shared->session = std::move(*session);
  }
  DraftModelOptions options;
  options.kv_positions = config->kv_positions;
  options.forward_lock = shared->forward_lock;
  ModelSession& s = *shared->session;
  auto source = DraftModel::create(*s.model, s.tokenizer, target.tokenizer,
                                   target.model->config().n_vocab, options);
  if (!source.has_value())
    return Status::errorf("--draft {}: {}", draft_path, source.status().message());
  config->draft = std::shared_ptr<DraftSource>(std::move(*source));
  log_info("speculative decoding: {} drafts ({} guesses a step at most{})", draft_path, draft_max,
           *draft ? ", shared with the other models it drafts for" : "");
  *draft = std::move(shared);
  return Status::ok();
}

void GenerationFlags::apply_to_process(const ModelSession& session) const {
  if (mlock) {
    if (Status st = session.file.mapping().lock_in_memory(); !st.is_ok())
      log_warn("--mlock: {}", st.message());
  }
  if (Status st = set_process_priority(prio); !st.is_ok()) log_warn("--prio: {}", st.message());
}

ThinkingPrinter::ThinkingPrinter(bool hide_thinking)
    : hide_(hide_thinking), tty_(isatty(STDOUT_FILENO) != 0) {}

void ThinkingPrinter::print_reasoning(const std::string& s) {
  if (s.empty() || hide_) return;
  if (!in_reasoning_block_) {
    std::fputs(tty_ ? "\x1b[2m[thinking]\n" : "[thinking]\n", stdout);
    in_reasoning_block_ = true;
  } else if (tty_) {
    std::fputs("\x1b[2m", stdout);
  }
  std::fputs(s.c_str(), stdout);
  if (tty_) std::fputs("\x1b[0m", stdout);
  std::fflush(stdout);
}

void ThinkingPrinter::print_content(const std::string& s) {
  if (s.empty()) return;
  if (!answer_started_ && in_reasoning_block_) {
    std::fputs(tty_ ? "\n\x1b[1m[answer]\x1b[0m\n" : "\n[answer]\n", stdout);
  }
  answer_started_ = true;
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

void ThinkingPrinter::push(const std::string& reasoning, const std::string& content) {
  print_reasoning(reasoning);
  print_content(content);
}

void ThinkingPrinter::finish() {
  std::fputs("\n", stdout);
  std::fflush(stdout);
}

std::string format_stats(const GenerateStats& s) {
  const int32_t computed = s.n_prompt - s.n_reused;
  return fmt::format(
             "prompt {} tokens ({} cached) in {:.2f} s, {:.1f} t/s | generated {} tokens in {:.2f} "
             "s, "
             "{:.1f} t/s | first token {:.3f} s | finish: {}",
             s.n_prompt, s.n_reused, s.prompt_s, s.prompt_s > 0 ? computed / s.prompt_s : 0.0,
             s.n_gen, s.gen_s, s.gen_s > 0 && s.n_gen > 1 ? (s.n_gen - 1) / s.gen_s : 0.0, s.ttft_s,
             s.finish_reason) +
         (s.n_drafted > 0 ? fmt::format(" | guesses {} kept of {} ({:.0f}%)", s.n_draft_accepted,
                                        s.n_drafted, 100.0 * s.n_draft_accepted / s.n_drafted)
                          : std::string());
}

Expected<GenerateStats> run_request(
    Engine& engine, EngineRequest request,
    const std::function<void(const std::string&, const std::string&)>& on_text,
    const std::atomic<bool>* cancel) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<EngineEvent> events;
  request.sink = [&](EngineEvent&& ev) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(ev));
    cv.notify_one();
  };
  PONDER_ASSIGN_OR_RETURN(const uint64_t id, engine.submit(std::move(request)));
  bool cancelled = false;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return !events.empty(); });
    if (!cancelled && cancel != nullptr && cancel->load()) {
      engine.cancel(id);
      cancelled = true;
    }
    while (!events.empty()) {
      EngineEvent ev = std::move(events.front());
      events.pop_front();
      lock.unlock();
      if (ev.kind != EngineEvent::Kind::kProgress) on_text(ev.reasoning, ev.content);
      if (ev.kind == EngineEvent::Kind::kDone) {
        if (!ev.error.empty()) return Status::error(ev.error);
        return std::move(ev.stats);
      }
      lock.lock();
    }
  }
}

}  // namespace ponder::cli
