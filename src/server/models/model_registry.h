// ModelRegistry: the models one server offers (`ponder serve -m A -m B`, `--models-dir DIR`), by
// name. It owns each loaded model's Engine (and so its prefix cache) and hands out ModelRefs;
// models load on first use, on the registry's own loader thread (never the I/O thread or an
// engine thread), and unload, on that thread too, by least recent use when the next one would not
// fit the memory budget, or when their keep-alive expires (Ollama's keep_alive; 0: at once). A
// model with a request waiting, running or framing its answer (a live ModelRef) is never unloaded:
// it goes once they end.
// The memory figure of a model is an estimate made before loading: the file's size plus its KV
// cache (what the loader says; after a load the loader may give the real figure).
// Loading is the caller's: a ModelLoader (ponder serve gives one built on cli::ModelSession), so
// the server layer knows nothing of the command line.
// With one model the registry is what the server always was: the model is loaded before the
// server listens, answers to any name, and is never unloaded.
// Depends on runtime/engine.h, server/common/model_context.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"
#include "server/common/model_context.h"
#include "server/common/model_facts.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ponder::server {

// One offered model, known before it is loaded (what /v1/models and /api/tags list).
struct ModelSpec {
  std::string path;                  // the GGUF file
  std::string name;                  // what answers and lists carry (--alias, else the stem)
  std::vector<std::string> aliases;  // the other names it answers to (the stem, the file name)
  int64_t bytes = 0;                 // the memory estimate: file size + KV cache
  ModelFacts facts;                  // /api/show, /api/tags, /props
  std::string fingerprint;           // the file's (response cache keys, Ollama's digest)
};

// What a loader gives: the model, its tokenizer and template, kept alive by `owner`.
struct LoadedModel {
  std::shared_ptr<void> owner;  // what the pointers below point into
  Qwen2Model* model = nullptr;
  const text::Tokenizer* tokenizer = nullptr;
  std::shared_ptr<const text::ChatTemplate> chat_template;
  EngineConfig engine;
  int64_t bytes = 0;  // the memory it takes, if known after loading (0: keep the estimate)
  double load_s = 0;
};

// fraction in [0, 1]; called on the loader thread as loading goes on.
using LoadProgress = std::function<void(double fraction, const std::string& what)>;
using ModelLoader = std::function<Expected<LoadedModel>(const ModelSpec&, const LoadProgress&)>;

struct RegistryConfig {
  int64_t max_bytes = 0;     // the memory budget of loaded models (0: no bound)
  double keep_alive_s = -1;  // how long an idle model stays (< 0: until memory is needed)
  std::function<void(std::function<void()>)> post;  // runs a call on the I/O thread
};

// A model as /api/ps, /v1/models and /slots show it.
struct ModelStatus {
  int index = 0;
  bool loaded = false;
  bool loading = false;
  double progress = 0;  // while loading
  int in_use = 0;       // live ModelRefs (requests waiting for it, running or being answered)
  int64_t bytes = 0;
  std::optional<int64_t> expires_unix;  // when it unloads if still idle (none: no deadline)
};

class ModelRegistry {
 public:
  ModelRegistry(std::vector<ModelSpec> specs, ModelLoader loader, RegistryConfig config);
  ~ModelRegistry();  // stop() if not done
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  int size() const { return static_cast<int>(specs_.size()); }
  const ModelSpec& spec(int index) const { return specs_[static_cast<size_t>(index)]; }
  bool single() const { return specs_.size() == 1; }

  // The model a request names, or -1. Names match the name, an alias, the file stem or file name;
  // "x:latest" matches "x". With one model any name picks it; with several, "" picks the first.
  int find(const std::string& name) const;

  // Called once the model is loaded (ref set) or could not be (error set), on the I/O thread; at
  // once when it is loaded already. on_progress gets the load's progress meanwhile.
  using Ready = std::function<void(ModelRef ref, const std::string& error)>;
  using Progress = std::function<void(double fraction, double seconds)>;
  void acquire(int index, Ready ready, Progress on_progress = {});
  // The model if it is loaded, else null; neither loads it nor counts as a use (keep-alive,
  // recency): for status routes.
  ModelRef peek(int index);
  // Loads on the calling thread (before the server starts: one model, as ponder serve always did).
  Status load_now(int index);
  // Ollama's keep_alive for this model: < 0 forever, 0 unload once idle, else idle seconds.
  // Ignored with one model (it is never unloaded).
  void set_keep_alive(int index, double seconds);
  std::vector<ModelStatus> status() const;
  // Unloads every model (their engines cancel what runs); no load starts after this.
  void stop();

 private:
  struct Core;
  struct Instance;
  struct Waiter;
  void run();  // the loader thread
  // With the lock held and the model unloaded: loads it, the lock released meanwhile.
  Status load_locked(int index, std::unique_lock<std::mutex>& lock);
  // With the lock held, the model loaded and unused: unloads it, the lock released meanwhile.
  void unload_locked(int index, std::unique_lock<std::mutex>& lock, const char* why);
  // With the lock held: gives the model (or the load's error) to everyone waiting for it, on the
  // I/O thread; the lock released meanwhile.
  void serve_waiters_locked(int index, const Status& st, std::unique_lock<std::mutex>& lock);
  // With the lock held: one step of the loader thread's work (unload an expired model, make room,
  // load a model asked for); false when there is nothing to do now.
  bool work_locked(std::unique_lock<std::mutex>& lock);
  static ModelRef make_ref(const std::shared_ptr<Core>& core, int index, bool counts);

  std::vector<ModelSpec> specs_;
  ModelLoader loader_;
  RegistryConfig config_;
  std::shared_ptr<Core> core_;  // shared with every ModelRef (a ref may outlive the registry)
  std::thread thread_;
};

}  // namespace ponder::server
