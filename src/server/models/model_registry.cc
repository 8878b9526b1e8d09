#include "server/models/model_registry.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>

#include "base/log.h"
#include "base/timer.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace ponder::server {

namespace {

using Clock = std::chrono::steady_clock;

// Ollama's "name:latest" is "name"; names compare without case.
std::string name_key(const std::string& name) {
  std::string n = name;
  constexpr std::string_view kLatest = ":latest";
  if (n.size() > kLatest.size() &&
      n.compare(n.size() - kLatest.size(), kLatest.size(), kLatest) == 0)
    n.resize(n.size() - kLatest.size());
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

struct ModelRegistry::Instance {
  LoadedModel loaded;              // destroyed last: the engine and context point into it
  std::unique_ptr<Engine> engine;  // destroyed by the loader thread, never by a request
  std::unique_ptr<ModelContext> ctx;
};

struct ModelRegistry::Waiter {
  Ready ready;
  Progress progress;
};

struct ModelRegistry::Core {
  enum class State { kUnloaded, kLoading, kLoaded, kUnloading };
  struct Slot {
    State state = State::kUnloaded;
    std::shared_ptr<Instance> inst;
    int in_use = 0;
    Clock::time_point last_use{};
    std::optional<Clock::time_point> expires;  // idle deadline (keep_alive)
    double keep_alive_s = -1;
    double progress = 0;
    Clock::time_point load_start{};
    int64_t bytes = 0;
    std::vector<Waiter> waiters;
    bool waiting_for_room = false;  // said in the log once per wait
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Slot> slots;
  bool stopping = false;
  bool pinned = false;  // one model: loaded for the server's lifetime

  void release(int index, bool counts) {
    std::lock_guard<std::mutex> lock(mu);
    Slot& s = slots[static_cast<size_t>(index)];
    --s.in_use;
    if (counts) {
      s.last_use = Clock::now();
      if (s.in_use == 0 && s.keep_alive_s >= 0) s.expires = s.last_use + seconds(s.keep_alive_s);
    }
    cv.notify_all();
  }
};

ModelRegistry::ModelRegistry(std::vector<ModelSpec> specs, ModelLoader loader,
                             RegistryConfig config)
    : specs_(std::move(specs)),
      loader_(std::move(loader)),
      config_(std::move(config)),
      core_(std::make_shared<Core>()) {
  core_->slots.resize(specs_.size());
  core_->pinned = specs_.size() == 1;
  for (size_t i = 0; i < specs_.size(); ++i) {
    core_->slots[i].bytes = specs_[i].bytes;
    core_->slots[i].keep_alive_s = config_.keep_alive_s;
  }
  thread_ = std::thread([this] { run(); });
}

ModelRegistry::~ModelRegistry() { stop(); }

int ModelRegistry::find(const std::string& name) const {
  if (specs_.size() == 1 || (name.empty() && !specs_.empty())) return 0;
  const std::string key = name_key(name);
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (name_key(specs_[i].name) == key) return static_cast<int>(i);
    for (const std::string& a : specs_[i].aliases) {
      if (name_key(a) == key) return static_cast<int>(i);
    }
  }
  return -1;
}

ModelRef ModelRegistry::make_ref(const std::shared_ptr<Core>& core, int index, bool counts) {
  // The lease gives the model back when the last copy of the ref goes (on whatever thread).
  struct Lease {
    Lease(std::shared_ptr<Core> c, int i, bool n, std::shared_ptr<Instance> in)
        : core(std::move(c)), index(i), counts(n), inst(std::move(in)) {}
    ~Lease() { core->release(index, counts); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    std::shared_ptr<Core> core;
    int index;
    bool counts;
    std::shared_ptr<Instance> inst;
  };
  Core::Slot& s = core->slots[static_cast<size_t>(index)];
  ++s.in_use;
  if (counts) {
    s.last_use = Clock::now();
    s.expires.reset();
  }
  auto lease = std::make_shared<Lease>(core, index, counts, s.inst);
  return ModelRef(lease, lease->inst->ctx.get());
}

void ModelRegistry::acquire(int index, Ready ready, Progress on_progress) {
  std::unique_lock<std::mutex> lock(core_->mu);
  Core::Slot& s = core_->slots[static_cast<size_t>(index)];
  if (s.state == Core::State::kLoaded) {
    ModelRef ref = make_ref(core_, index, true);
    lock.unlock();
    return ready(std::move(ref), "");
  }
  if (core_->stopping) {
    lock.unlock();
    return ready(nullptr, "the server is shutting down");
  }
  s.waiters.push_back({std::move(ready), std::move(on_progress)});
  core_->cv.notify_all();
}

ModelRef ModelRegistry::peek(int index) {
  std::lock_guard<std::mutex> lock(core_->mu);
  if (core_->slots[static_cast<size_t>(index)].state != Core::State::kLoaded) return nullptr;
  return make_ref(core_, index, false);
}

Status ModelRegistry::load_now(int index) {
  std::unique_lock<std::mutex> lock(core_->mu);
  if (core_->slots[static_cast<size_t>(index)].state == Core::State::kLoaded) return Status::ok();
  return load_locked(index, lock);
}

void ModelRegistry::set_keep_alive(int index, double s) {
  if (core_->pinned) return;
  std::lock_guard<std::mutex> lock(core_->mu);
  Core::Slot& slot = core_->slots[static_cast<size_t>(index)];
  slot.keep_alive_s = s;
  if (s < 0) {
    slot.expires.reset();
  } else if (slot.in_use == 0 && slot.state == Core::State::kLoaded) {
    slot.expires = Clock::now() + seconds(s);
  }
  core_->cv.notify_all();
}

std::vector<ModelStatus> ModelRegistry::status() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  std::vector<ModelStatus> out;
  const auto now = Clock::now();
  for (size_t i = 0; i < core_->slots.size(); ++i) {
    const Core::Slot& s = core_->slots[i];
    ModelStatus m;
    m.index = static_cast<int>(i);
    m.loaded = s.state == Core::State::kLoaded;
    m.loading = s.state == Core::State::kLoading;
    m.progress = s.progress;
    m.in_use = s.in_use;
    m.bytes = s.bytes;
    if (s.expires) {
      m.expires_unix =
          unix_now() + std::chrono::duration_cast<std::chrono::seconds>(*s.expires - now).count();
    }
    out.push_back(m);
  }
  return out;
}

void ModelRegistry::stop() {
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (core_->stopping && !thread_.joinable()) return;
    core_->stopping = true;
    core_->cv.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::vector<Waiter> waiters;
  std::vector<std::shared_ptr<Instance>> instances;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    for (Core::Slot& s : core_->slots) {
      for (Waiter& w : s.waiters) waiters.push_back(std::move(w));
      s.waiters.clear();
      if (s.inst) instances.push_back(std::move(s.inst));
      s.state = Core::State::kUnloaded;
    }
  }
  // The engines cancel what still runs; their last events go to the I/O thread, and the models
  // stay mapped while a request's ref holds them.
  for (auto& inst : instances) inst->engine.reset();
  for (Waiter& w : waiters) {
    if (config_.post) {
      config_.post([ready = std::move(w.ready)] { ready(nullptr, "the server is shutting down"); });
    }
  }
}

Status ModelRegistry::load_locked(int index, std::unique_lock<std::mutex>& lock) {
  Core::Slot& s = core_->slots[static_cast<size_t>(index)];
  const ModelSpec& spec = specs_[static_cast<size_t>(index)];
  s.state = Core::State::kLoading;
  s.progress = 0;
  s.load_start = Clock::now();
  s.waiting_for_room = false;
  const int64_t estimate = s.bytes;
  lock.unlock();
  log_info("server: loading model {} ({}, about {:.2f} GB with its KV cache)", spec.name, spec.path,
           estimate / 1e9);
  Timer t;
  // Said (in the log and to the waiting streams) when the step changes, at the end, and at most
  // twice a second in between.
  std::string last_what;
  double last_s = -1;
  auto progress = [this, index, &spec, &t, &last_what, &last_s](double fraction,
                                                                const std::string& what) {
    const double secs = t.seconds();
    if (what == last_what && fraction < 1 && secs - last_s < 0.5) return;
    last_what = what;
    last_s = secs;
    std::vector<Progress> fns;
    {
      std::lock_guard<std::mutex> l(core_->mu);
      Core::Slot& slot = core_->slots[static_cast<size_t>(index)];
      slot.progress = fraction;
      for (const Waiter& w : slot.waiters) {
        if (w.progress) fns.push_back(w.progress);
      }
    }
    log_info("server: loading model {}: {:3.0f}% {} ({:.1f} s)", spec.name, fraction * 100, what,
             secs);
    if (config_.post) {
      for (Progress& fn : fns)
        config_.post([fn = std::move(fn), fraction, secs] { fn(fraction, secs); });
    }
  };
  auto loaded = loader_(spec, progress);
  std::shared_ptr<Instance> inst;
  Status st = Status::ok();
  if (loaded.has_value()) {
    inst = std::make_shared<Instance>();
    inst->loaded = std::move(*loaded);
    const LoadedModel& l = inst->loaded;
    inst->engine = std::make_unique<Engine>(*l.model, *l.tokenizer, l.engine);
    inst->ctx = std::make_unique<ModelContext>(*inst->engine, *l.tokenizer, *l.chat_template);
    ModelContext& c = *inst->ctx;
    c.model_name = spec.name;
    c.fingerprint = spec.fingerprint;
    c.model = spec.facts;
    c.numerics = l.model->numerics();
    c.created_unix = unix_now();
    log_info("server: model {} loaded in {:.2f} s", spec.name, t.seconds());
  } else {
    st = loaded.status();
    log_warn("server: model {} failed to load: {}", spec.name, st.message());
  }
  lock.lock();
  if (inst) {
    if (inst->loaded.bytes > 0) s.bytes = inst->loaded.bytes;
    s.inst = std::move(inst);
    s.state = Core::State::kLoaded;
    s.last_use = Clock::now();
    s.expires.reset();
    if (s.keep_alive_s >= 0 && !core_->pinned) s.expires = s.last_use + seconds(s.keep_alive_s);
  } else {
    s.state = Core::State::kUnloaded;
  }
  s.progress = 0;
  return st;
}

void ModelRegistry::unload_locked(int index, std::unique_lock<std::mutex>& lock, const char* why) {
  Core::Slot& s = core_->slots[static_cast<size_t>(index)];
  s.state = Core::State::kUnloading;
  std::shared_ptr<Instance> inst = std::move(s.inst);
  s.expires.reset();
  lock.unlock();
  inst->engine.reset();  // nothing runs on it: no ref is alive
  inst.reset();
#ifdef __GLIBC__
  // What the model freed below malloc's mmap threshold stays in malloc's heap, resident: give it
  // back (about 50 MB after the 1.5B Q4_K_M).
  malloc_trim(0);
#endif
  log_info("server: unloaded model {} ({})", specs_[static_cast<size_t>(index)].name, why);
  lock.lock();
  s.state = Core::State::kUnloaded;
}

bool ModelRegistry::work_locked(std::unique_lock<std::mutex>& lock) {
  auto& slots = core_->slots;
  const auto now = Clock::now();
  // An idle model whose keep-alive ran out.
  for (size_t i = 0; i < slots.size(); ++i) {
    Core::Slot& s = slots[i];
    if (!core_->pinned && s.state == Core::State::kLoaded && s.in_use == 0 && s.expires &&
        *s.expires <= now && s.waiters.empty()) {
      unload_locked(static_cast<int>(i), lock, "keep_alive expired");
      return true;
    }
  }
  // A model asked for: room first (the least recently used idle model goes), then the load.
  for (size_t i = 0; i < slots.size(); ++i) {
    Core::Slot& s = slots[i];
    if (s.state == Core::State::kLoaded && !s.waiters.empty()) {  // asked for while load_now ran
      serve_waiters_locked(static_cast<int>(i), Status::ok(), lock);
      return true;
    }
    if (s.state != Core::State::kUnloaded || s.waiters.empty()) continue;
    int64_t used = 0;
    bool others_loaded = false;
    int lru = -1;
    for (size_t j = 0; j < slots.size(); ++j) {
      const Core::Slot& o = slots[j];
      if (j == i || o.state == Core::State::kUnloaded) continue;
      used += o.bytes;
      others_loaded = true;
      if (o.state == Core::State::kLoaded && o.in_use == 0 &&
          (lru < 0 || o.last_use < slots[static_cast<size_t>(lru)].last_use))
        lru = static_cast<int>(j);
    }
    const int64_t budget = config_.max_bytes;
    if (budget > 0 && used + s.bytes > budget && others_loaded) {
      if (lru >= 0) {
        unload_locked(lru, lock, "least recently used, to make room");
        return true;
      }
      if (!s.waiting_for_room) {
        log_info(
            "server: model {} waits for memory: {:.2f} GB loaded and in use, {:.2f} GB more "
            "would pass --max-memory {:.2f} GB",
            specs_[i].name, used / 1e9, s.bytes / 1e9, budget / 1e9);
        s.waiting_for_room = true;
      }
      continue;  // a request on another model must end first
    }
    if (budget > 0 && s.bytes > budget) {
      log_warn(
          "server: model {} ({:.2f} GB) is larger than --max-memory {:.2f} GB; loading it alone",
          specs_[i].name, s.bytes / 1e9, budget / 1e9);
    }
    const Status st = load_locked(static_cast<int>(i), lock);
    serve_waiters_locked(static_cast<int>(i), st, lock);
    return true;
  }
  return false;
}

void ModelRegistry::serve_waiters_locked(int index, const Status& st,
                                         std::unique_lock<std::mutex>& lock) {
  Core::Slot& s = core_->slots[static_cast<size_t>(index)];
  std::vector<Waiter> waiters = std::move(s.waiters);
  s.waiters.clear();
  std::vector<ModelRef> refs;
  for (size_t k = 0; k < waiters.size() && st.is_ok(); ++k)
    refs.push_back(make_ref(core_, index, true));
  lock.unlock();
  for (size_t k = 0; k < waiters.size(); ++k) {
    ModelRef ref = st.is_ok() ? std::move(refs[k]) : nullptr;  // no second copy here
    const std::string error = st.is_ok() ? "" : st.message();
    config_.post(
        [ready = std::move(waiters[k].ready), ref = std::move(ref), error] { ready(ref, error); });
  }
  lock.lock();
}

void ModelRegistry::run() {
  std::unique_lock<std::mutex> lock(core_->mu);
  while (!core_->stopping) {
    if (work_locked(lock)) continue;
    std::optional<Clock::time_point> next;
    for (const Core::Slot& s : core_->slots) {
      if (s.state == Core::State::kLoaded && s.in_use == 0 && s.expires &&
          (!next || *s.expires < *next))
        next = s.expires;
    }
    if (next) {
      core_->cv.wait_until(lock, *next);
    } else {
      core_->cv.wait(lock);
    }
  }
}

}  // namespace ponder::server
