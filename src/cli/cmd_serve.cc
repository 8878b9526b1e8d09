// ponder serve -m M.gguf: the HTTP server (OpenAI, llama.cpp, Ollama and Anthropic APIs) on one
// loaded model, or on several (-m A -m B, --models-dir DIR) loaded on first use and unloaded by
// recency under --max-memory and by keep_alive (server/models/model_registry.h). Stops on SIGINT /
// SIGTERM by draining: health fails at once, new generations are refused, running ones get
// --drain-timeout seconds to finish, then are cancelled.
#include <fmt/core.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"
#include "cli/command.h"
#include "cli/generation_flags.h"
#include "cli/model_session.h"
#include "gguf/model_fingerprint.h"
#include "model/qwen2_config.h"
#include "server/ollama/ollama_protocol.h"
#include "server/server.h"

namespace ponder::cli {
namespace {

// $XDG_CACHE_HOME/ponder, else ~/.cache/ponder, else "" (memory only).
// Connections are file descriptors: the soft limit (often 1,024) goes up to the hard one, as
// nginx does, so that a thousand idle clients cannot starve new ones.
void raise_open_file_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    return std::string(x) + "/ponder";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return std::string(h) + "/.cache/ponder";
  return "";
}

// What the machine can give: MemAvailable at start (0 when unknown: no bound).
int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return int64_t{kib} << 10;
  }
  return 0;
}

// "24G", "512M", "1.5GiB", "0": bytes (binary units); nullopt when it is not one.
std::optional<int64_t> parse_size(const std::string& text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  if (unit.size() == 2 && unit[1] == 'B') unit.resize(1);
  double scale = 0;
  if (unit.empty() && v == 0) scale = 1;
  if (unit == "K") scale = 1 << 10;
  if (unit == "M") scale = 1 << 20;
  if (unit == "G") scale = double(1ll << 30);
  if (unit == "T") scale = double(1ll << 40);
  if (scale == 0 || !(v >= 0)) return std::nullopt;
  return static_cast<int64_t>(v * scale);
}

// The models offered: -m files (named by --alias in order, else their stem) and every .gguf of
// --models-dir; each read for its facts, fingerprint and memory estimate (file + KV cache).
Expected<std::vector<server::ModelSpec>> model_specs(const std::vector<std::string>& paths_given,
                                                     const std::vector<std::string>& aliases,
                                                     const std::string& models_dir,
                                                     const GenerationFlags& flags) {
  std::vector<std::string> paths = paths_given;
  if (!models_dir.empty()) {
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(models_dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".gguf")
        found.push_back(e.path().string());
    }
    if (ec) return Status::errorf("--models-dir {}: {}", models_dir, ec.message());
    if (found.empty()) return Status::errorf("--models-dir {} holds no .gguf file", models_dir);
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  if (paths.empty())
    return Status::error("give a model: -m MODEL.gguf (repeatable) or --models-dir DIR");
  if (aliases.size() > paths_given.size()) {
    return Status::errorf(
        "--alias is given {} times for {} -m model(s): each names the -m in its place",
        aliases.size(), paths_given.size());
  }
  std::vector<server::ModelSpec> specs;
  for (size_t i = 0; i < paths.size(); ++i) {
    server::ModelSpec spec;
    spec.path = paths[i];
    std::string file = paths[i].substr(paths[i].find_last_of('/') + 1);
    std::string stem = file.ends_with(".gguf") ? file.substr(0, file.size() - 5) : file;
    spec.name = i < aliases.size() && !aliases[i].empty() ? aliases[i] : stem;
    spec.aliases = {stem, file};
    PONDER_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(spec.path));
    auto config = Qwen2Config::from_gguf(gguf);
    if (!config.has_value()) return config.status().with_context(spec.path);
    const EngineConfig engine = flags.engine_config(*config);
    const int64_t kv_bytes = int64_t{engine.kv_positions} * config->n_layer * config->n_head_kv *
                             flags.kv_types.row_bytes(config->head_dim);
    spec.bytes = static_cast<int64_t>(gguf.file_size()) + kv_bytes;
    spec.facts = server::read_model_facts(gguf);
    spec.fingerprint = model_fingerprint(gguf);
    for (const server::ModelSpec& other : specs) {
      for (const std::string& n : std::vector<std::string>{other.name, other.aliases[0]}) {
        if (n == spec.name) {
          return Status::errorf("two models are named '{}' ({} and {}): give --alias", n,
                                other.path, spec.path);
        }
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
}

int run_serve(int argc, char** argv) {
  CLI::App app{
      "Serve one model, or several chosen by a request's \"model\" (-m A -m B, --models-dir), over "
      "HTTP on one port: OpenAI (/v1/chat/completions, /v1/completions, "
      "/v1/models, "
      "/v1/answer_now, /v1/responses), llama.cpp (/health, /completion, /tokenize, /detokenize, "
      "/props, /slots, /metrics), "
      "Ollama (/api/chat, /api/generate, /api/tags, /api/ps, /api/show, /api/version) "
      "and Anthropic (/v1/messages, /v1/messages/count_tokens) APIs"};
  GenerationFlags flags;
  flags.add_to(app);
  server::ServerConfig config;
  std::string host = "127.0.0.1";
  std::string api_key_file;
  bool insecure = false;
  double drain_timeout = 30;
  int parallel = 8;
  int queue = 64;
  app.add_option("--host", host,
                 "address to listen on (another than loopback needs --api-key or --insecure)")
      ->capture_default_str();
  app.add_option("--port", config.port, "port to listen on")->capture_default_str();
  app.add_option("--api-key", config.access.api_key,
                 "key every API route needs (Authorization: Bearer KEY)");
  app.add_option("--api-key-file", api_key_file, "file whose first line is the API key");
  app.add_flag("--insecure", insecure, "allow a non-loopback --host without an API key");
  app.add_option("--cors-origin", config.access.cors_origins,
                 "an origin allowed to call from a browser (repeatable; default none)");
  // serve takes several models: -m repeatable, and a name for each.
  std::vector<std::string> model_paths, aliases;
  std::string models_dir, max_memory = "auto", keep_alive = "-1";
  app.remove_option(app.get_option("--model"));
  app.add_option("-m,--model", model_paths,
                 "GGUF model file; repeatable: several models, each loaded on first use and chosen "
                 "by a request's \"model\"");
  app.add_option("--alias", aliases,
                 "the model's name in the API, such as deepseek-r1:7b (default: the file's stem, "
                 "which always answers too); repeatable: the Nth --alias names the Nth -m");
  app.add_option("--models-dir", models_dir,
                 "offer every .gguf file of this directory too, named by its stem");
  app.add_option("--max-memory", max_memory,
                 "several models: the memory the loaded ones may take (estimated as file size + KV "
                 "cache), e.g. 24G; the least recently used idle model is unloaded to make room "
                 "(auto: 90% of the memory available at start; 0: no bound)")
      ->capture_default_str();
  app.add_option(
         "--keep-alive", keep_alive,
         "several models: how long an idle model stays loaded, in seconds or as a duration "
         "(5m, 1h); -1: until memory is needed. A request's keep_alive (Ollama) sets it for "
         "its model; 0 unloads it once idle")
      ->capture_default_str();
  app.add_option(
         "--parallel", parallel,
         "most requests decoding at once; unlike llama-server's slots the context is never split "
         "between them (any one request may use all of -c)")
      ->capture_default_str();
  app.add_option("--queue", queue, "requests that may wait before the server answers 503 busy")
      ->capture_default_str();
  app.add_option("--drain-timeout", drain_timeout,
                 "seconds running requests get to finish on SIGTERM")
      ->capture_default_str();
  app.add_option("--body-limit", config.limits.max_body_bytes,
                 "largest request body in bytes (413 above)")
      ->capture_default_str();
  app.add_option(
         "--header-timeout", config.limits.header_timeout_s,
         "seconds a request's line and headers may take to arrive (slow clients are closed)")
      ->capture_default_str();
  app.add_option("--idle-timeout", config.limits.idle_timeout_s,
                 "seconds a kept-alive connection may wait for its next request")
      ->capture_default_str();
  app.add_option("--reasoning-budget", config.defaults.reasoning_budget,
                 "R1: thinking tokens after which the answer is forced (-1: no limit; per request: "
                 "reasoning_budget)")
      ->capture_default_str();
  auto* efforts = app.add_option_function<std::vector<int32_t>>(
      "--effort-budgets",
      [&config](const std::vector<int32_t>& v) {
        config.defaults.efforts = {v[0], v[1], v[2]};
      },
      "R1: the thinking budgets of the reasoning efforts low, medium, high (-1: no limit; "
      "reasoning_effort, Ollama's think; none / minimal / think false: no thinking) [512 2048 -1]");
  efforts->expected(3)->check(CLI::Range(-1, 1 << 24));
  app.add_option("--keepalive", config.keepalive_s,
                 "seconds between SSE keep-alive comments until a stream's first token")
      ->capture_default_str();
  app.add_option("--reasoning-field", config.reasoning_field,
                 "the name of the thinking deltas in OpenAI chunks: reasoning_content (DeepSeek, "
                 "llama.cpp) or reasoning (vLLM)")
      ->check(CLI::IsMember({"reasoning_content", "reasoning"}))
      ->capture_default_str();
  std::string cache_dir = default_cache_dir();
  int64_t cache_mib = 256;
  bool no_cache = false;
  std::string cache_match = "exact";
  app.add_option(
         "--cache-match", cache_match,
         "how a question matches a cached one: exact (the same prompt tokens), normalized (case "
         "and "
         "whitespace runs ignored), similar (the same content words whatever their order, case, "
         "punctuation and filler words, Jaccard >= 0.9, never a changed number or negation)")
      ->check(CLI::IsMember({"exact", "normalized", "similar"}))
      ->capture_default_str();
  app.add_option("--cache-dir", cache_dir,
                 "where the response cache's SQLite file lives ('' keeps it in memory)")
      ->capture_default_str();
  app.add_option("--cache-size", cache_mib,
                 "response cache size in MiB (on disk or in Redis; memory holds a quarter)")
      ->capture_default_str();
  std::string cache_url;
  int64_t cache_ttl = 7 * 24 * 3600;
  app.add_option(
      "--cache-url", cache_url,
      "keep the response cache in Redis, shared by every replica: "
      "redis://[:password@]host[:port][/db] "
      "(instead of --cache-dir's SQLite file; unreachable Redis: memory only until it is back)");
  app.add_option("--cache-ttl", cache_ttl, "seconds an unused answer stays in Redis (--cache-url)")
      ->capture_default_str();
  app.add_option("--replica-id", config.replica_id,
                 "this replica's name behind a load balancer ([a-z0-9-]): sent as X-Ponder-Replica "
                 "and in request ids "
                 "(docs/scaling.md)");
  app.add_flag(
      "--no-response-cache", no_cache,
      "never answer from the response cache (by default identical requests with temperature 0 or a "
      "fixed seed are answered from it; per request: \"cache\": false)");
  // llama-server's "-np N" (CLI11 takes one-letter short names only).
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-np") a = "--parallel";
  }
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  CLI11_PARSE(app, static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  if (Status st = flags.validate(); !st.is_ok()) return fail("serve", st.message());
  if (model_paths.empty() && models_dir.empty())
    return fail("serve", "give a model: -m MODEL.gguf (repeatable) or --models-dir DIR");
  if (!api_key_file.empty()) {
    std::ifstream in(api_key_file);
    if (!in || !std::getline(in, config.access.api_key) || config.access.api_key.empty()) {
      return fail("serve", "cannot read an API key from " + api_key_file);
    }
  }
  if (!is_loopback(host) && config.access.api_key.empty() && !insecure) {
    return fail("serve",
                "--host " + host +
                    " exposes the server beyond this machine: give --api-key (or --insecure)");
  }
  if (parallel < 1) return fail("serve", "--parallel must be at least 1");
  if (!(config.limits.header_timeout_s > 0) || !(config.limits.idle_timeout_s > 0)) {
    return fail("serve", "--header-timeout and --idle-timeout must be positive");
  }
  raise_open_file_limit();
  for (char ch : config.replica_id) {
    if (!std::islower(static_cast<unsigned char>(ch)) &&
        !std::isdigit(static_cast<unsigned char>(ch)) && ch != '-') {
      return fail("serve",
                  "--replica-id '" + config.replica_id + "' may hold only a-z, 0-9 and '-'");
    }
  }
  config.cache_bytes = std::max<int64_t>(cache_mib, 1) << 20;  // on disk or in Redis
  if (!cache_url.empty()) {
    server::RedisConfig redis;
    if (Status st = server::parse_redis_url(cache_url, &redis); !st.is_ok())
      return fail("serve", st.message());
    if (cache_ttl < 1) return fail("serve", "--cache-ttl must be at least 1 second");
    if (cache_match == "similar")
      return fail("serve",
                  "--cache-match similar needs the SQLite cache (--cache-dir), not --cache-url");
    redis.ttl_s = cache_ttl;
    redis.max_bytes = config.cache_bytes;
    config.redis = redis;
  }

  auto specs = model_specs(model_paths, aliases, models_dir, flags);
  if (!specs.has_value()) return fail("serve", specs.status().message());
  const bool single = specs->size() == 1;
  if (max_memory == "auto") {
    config.max_memory = available_memory() / 10 * 9;  // the estimate runs ~10% under RSS
  } else if (auto bytes = parse_size(max_memory)) {
    config.max_memory = *bytes;
  } else {
    return fail("serve", "--max-memory '" + max_memory + "': expected a size such as 24G or 512M");
  }
  {
    const nlohmann::json v = keep_alive.find_first_not_of("+-0123456789.") == std::string::npos
                                 ? nlohmann::json(std::atof(keep_alive.c_str()))
                                 : nlohmann::json(keep_alive);
    const auto seconds = server::parse_keep_alive(v);
    if (!seconds) {
      return fail("serve",
                  "--keep-alive '" + keep_alive + "': expected seconds or a duration such as 5m");
    }
    config.keep_alive_s = *seconds;
  }
  config.hosts = {host};
  config.response_cache = !no_cache;
  config.cache_dir = cache_dir;
  config.cache_match = cache_match == "similar"      ? server::CacheMatch::kSimilar
                       : cache_match == "normalized" ? server::CacheMatch::kNormalized
                                                     : server::CacheMatch::kExact;
  config.defaults.sampling = flags.gen.sampling;
  config.defaults.max_tokens = flags.gen.max_tokens;

  // Loads one model (on the registry's loader thread; before the start with one model). With one
  // model its session is kept for the start's log line.
  std::mutex loader_mu;  // guards last and shared_draft
  std::shared_ptr<ModelSession> last;
  // --draft: one draft model for every loaded target (each its own KV cache in it); it unloads
  // with the last of them.
  std::weak_ptr<SharedDraftModel> shared_draft;
  server::ModelLoader loader =
      [&flags, parallel, queue, single, &loader_mu, &last, &shared_draft](
          const server::ModelSpec& spec,
          const server::LoadProgress& progress) -> Expected<server::LoadedModel> {
    PONDER_ASSIGN_OR_RETURN(std::unique_ptr<ModelSession> opened,
                            ModelSession::open(spec.path, flags.x16_cache_options(), progress));
    std::shared_ptr<ModelSession> s = std::move(opened);
    PONDER_RETURN_IF_ERROR(flags.kv_types.apply(*s->model, flags.flash_attn));
    flags.apply_to_process(*s);
    auto tmpl = s->chat_template(flags.template_name);
    if (!tmpl.has_value()) return tmpl.status().with_context(spec.path);
    server::LoadedModel l;
    // The model's session, and the draft model's (--draft: shared by the loaded targets).
    struct Sessions {
      std::shared_ptr<ModelSession> target;
      std::shared_ptr<SharedDraftModel> draft;
    };
    auto sessions = std::make_shared<Sessions>();
    sessions->target = s;
    l.model = s->model.get();
    l.tokenizer = &s->tokenizer;
    l.chat_template = std::make_shared<const text::ChatTemplate>(std::move(*tmpl));
    l.engine = flags.engine_config(s->model->config());
    l.engine.model_fingerprint = spec.fingerprint;  // computed once, when the models were listed
    l.engine.max_running = parallel;
    l.engine.max_queue = queue;
    {
      std::lock_guard<std::mutex> lock(loader_mu);
      sessions->draft = shared_draft.lock();
      PONDER_RETURN_IF_ERROR(flags.attach_draft(*s, &l.engine, &sessions->draft));
      shared_draft = sessions->draft;
    }
    l.owner = sessions;
    l.load_s = s->load_s;
    if (single) {  // kept for the start's line; with several, it would keep an unloaded model
      std::lock_guard<std::mutex> lock(loader_mu);
      last = s;
    }
    return l;
  };
  // Signals are taken by sigwait below, on this thread only.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> names;
  for (const server::ModelSpec& spec : *specs) names.push_back(spec.name);
  server::Server srv(config, std::move(*specs), loader);
  // One model: loaded before the server listens, for its lifetime (as ponder serve always did).
  if (single) {
    if (Status st = srv.load(0); !st.is_ok()) return fail("serve", st.message());
  }
  if (Status st = srv.start(); !st.is_ok()) return fail("serve", st.message());
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (single) {
    const ModelSession& s = *last;
    const Engine& engine = srv.engine();
    std::fprintf(stderr,
                 "ponder serve: %s loaded in %.2f s%s; listening on http://%s:%u (KV %d positions "
                 "in %s/%s, %s attention, %d threads)\n",
                 names[0].c_str(), s.load_s,
                 s.model->x16_from_cache() ? " (x16 layout from the x16 cache)" : "", shown.c_str(),
                 srv.port(), engine.config().kv_positions, kv_type_name(s.model->kv_type_k()),
                 kv_type_name(s.model->kv_type_v()),
                 !s.model->flash_attention()     ? "llama.cpp-order"
                 : s.model->bf16_scores_in_use() ? "block-order (bf16 scores)"
                 : s.model->int8_scores_in_use() ? "block-order (int8 scores)"
                                                 : "block-order",
                 engine.config().threads.n_threads);
    std::fprintf(stderr, "ponder serve: %s\n", s.x16_cache_summary().c_str());
  } else {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    std::fprintf(
        stderr,
        "ponder serve: %zu models offered (%s), each loaded on first use; memory bound "
        "%s; listening on http://%s:%u\n",
        names.size(), list.c_str(),
        config.max_memory > 0 ? fmt::format("{:.2f} GB", config.max_memory / 1e9).c_str() : "none",
        shown.c_str(), srv.port());
  }
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "ponder serve: %s, draining (up to %.0f s)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", drain_timeout);
  if (!srv.drain(drain_timeout))
    std::fprintf(stderr, "ponder serve: drain timeout, cancelling what still runs\n");
  return 0;
}

}  // namespace

PONDER_COMMAND("serve",
               "serve one model or several over HTTP (OpenAI, llama.cpp, Ollama, Anthropic APIs)",
               run_serve);

}  // namespace ponder::cli
