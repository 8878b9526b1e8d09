// Command-line flags shared by the commands that generate text (run, chat, and later serve):
// model, context, threads, batching, loading, sampling; the terminal printer that shows R1's
// thinking apart from its answer; and run_request(), which streams one request through the Engine.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "cli/model_session.h"
#include "runtime/engine.h"

namespace ponder::cli {

// --cache-type-k / --cache-type-v (llama.cpp's -ctk / -ctv): auto, f16, bf16 or q8_0, for every
// command that runs the model; --attn-scores.
struct KvTypeFlags {
  std::string k = "auto", v = "auto";
  std::string scores = "auto";  // --attn-scores: auto, f32 or bf16
  void add_to(CLI::App& app);
  // The types asked for: "auto" on one side takes bf16 when the other side is bf16, else f16;
  // false when both are auto (the model's default). add_to's check leaves only valid names.
  bool explicit_types(KvType& k_type, KvType& v_type) const;
  // Bytes of one position's K and V row of one head (auto counted as f16, which bf16 equals).
  int64_t row_bytes(int64_t head_dim) const;
  // Q8_0 and bf16 need the block order, bf16 takes K and V together and bf16 scores: a clear error
  // before the model loads.
  Status validate(bool flash_attn) const;
  // The attention order, its scores and the KV types on the model.
  Status apply(Qwen2Model& model, bool flash_attn) const;
};

// A draft model (--draft) and the lock its forward passes take when it drafts for several targets.
struct SharedDraftModel {
  std::unique_ptr<ModelSession> session;
  std::shared_ptr<std::mutex> forward_lock = std::make_shared<std::mutex>();
};

struct GenerationFlags {
  std::string model_path;
  std::string template_name;
  int32_t n_ctx = 4096;
  int threads = 0;        // 0: default
  int threads_batch = 0;  // 0: as threads
  bool pin = false;
  bool hide_thinking = false;
  bool flash_attn = true;
  KvTypeFlags kv_types;
  int32_t batch_size = 512;
  int64_t kv_mem_mib = 0;  // > 0: the KV pool's size in MiB instead of -c positions
  bool mlock = false;
  bool context_shift = false;
  int32_t n_keep = 0;
  int prio = 0;
  std::string x16_cache;     // --x16-cache: "" the default directory, "off", or a directory
  double x16_cache_gib = 0;  // --x16-cache-size in GiB (0: the default bound)
  std::string kv_disk;       // --kv-disk: the prefix cache's directory on disk ("" off)
  double kv_disk_gib = 4;    // --kv-disk-size
  // Speculative decoding: --spec ngram (prompt lookup), --draft-min / --draft-max guesses a step.
  std::string spec = "off";
  std::string draft_path;  // --draft: a smaller model with the same tokenizer drafts
  int32_t draft_min = 0, draft_max = 8;
  GenerateOptions gen;

  GenerationFlags() { gen.max_tokens = 0; }  // up to the context
  void add_to(CLI::App& app);
  Status validate() const;
  ThreadConfig thread_config() const;
  EngineConfig engine_config(const Qwen2Config& model) const;
  // The same for an opened model, with its fingerprint (the disk tier's key).
  EngineConfig engine_config(const ModelSession& session) const;
  // --draft: checks that the draft model shares the target's tokenizer and makes it config's
  // draft source. *draft is the draft model (it must outlive the engine): opened here if null,
  // else shared with the targets it already drafts for (each target its own KV cache; their
  // forward passes take turns). Nothing without --draft.
  Status attach_draft(const ModelSession& target, EngineConfig* config,
                      std::shared_ptr<SharedDraftModel>* draft) const;
  // The x16 layout cache: x16_cache_default() changed by --x16-cache and --x16-cache-size.
  X16CacheOptions x16_cache_options() const;
  // --mlock and --prio on the opened model; a refusal is a warning, the command goes on.
  void apply_to_process(const ModelSession& session) const;
};

// Prints streamed text: thinking dimmed (on a terminal) under a "thinking" header, then the
// answer. Also usable when there is no thinking (raw prompts).
class ThinkingPrinter {
 public:
  explicit ThinkingPrinter(bool hide_thinking);
  void push(const std::string& reasoning, const std::string& content);
  void finish();

 private:
  void print_reasoning(const std::string& s);
  void print_content(const std::string& s);
  bool hide_;
  bool tty_;
  bool in_reasoning_block_ = false;
  bool answer_started_ = false;
};

// "prompt 12 tokens (3 cached) at 150.2 t/s | 40 tokens at 25.1 t/s | first token 0.08 s"
std::string format_stats(const GenerateStats& s);

// Submits one request and waits for it, calling on_text(reasoning, content) as text streams in
// (on this thread). Setting *cancel cancels the request. The stats of its end, or submit's error.
Expected<GenerateStats> run_request(
    Engine& engine, EngineRequest request,
    const std::function<void(const std::string& reasoning, const std::string& content)>& on_text,
    const std::atomic<bool>* cancel = nullptr);

}  // namespace ponder::cli
