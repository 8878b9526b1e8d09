// ponder serve -m M.gguf: the HTTP server (OpenAI and llama.cpp APIs) on one loaded model. Stops
// on SIGINT / SIGTERM by draining: health fails at once, new generations are refused, running
// ones get --drain-timeout seconds to finish, then are cancelled.
#include <fmt/core.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/log.h"
#include "cli/command.h"
#include "cli/generation_flags.h"
#include "cli/model_session.h"
#include "gguf/model_fingerprint.h"
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

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
}

int run_serve(int argc, char** argv) {
  CLI::App app{
      "Serve the model over HTTP on one port: OpenAI (/v1/chat/completions, /v1/completions, "
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
  app.add_option("--alias", config.model_name,
                 "the model's name in the API (default: the file name)");
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

  auto session = ModelSession::open(flags.model_path, flags.x16_cache_options());
  if (!session.has_value()) return fail("serve", session.status().message());
  ModelSession& s = **session;
  if (Status st = flags.kv_types.apply(*s.model, flags.flash_attn); !st.is_ok())
    return fail("serve", st.message());
  flags.apply_to_process(s);
  auto tmpl = s.chat_template(flags.template_name);
  if (!tmpl.has_value()) return fail("serve", tmpl.status().message());

  if (config.model_name == "ponder" || config.model_name.empty()) {
    std::string name = flags.model_path.substr(flags.model_path.find_last_of('/') + 1);
    if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") name.resize(name.size() - 5);
    config.model_name = name;
  }
  config.hosts = {host};
  config.response_cache = !no_cache;
  config.cache_dir = cache_dir;
  config.cache_match = cache_match == "similar"      ? server::CacheMatch::kSimilar
                       : cache_match == "normalized" ? server::CacheMatch::kNormalized
                                                     : server::CacheMatch::kExact;
  config.fingerprint = model_fingerprint(s.file);
  config.model = server::read_model_facts(s.file);
  config.defaults.sampling = flags.gen.sampling;
  config.defaults.max_tokens = flags.gen.max_tokens;
  config.engine = flags.engine_config(s.model->config());
  std::unique_ptr<ModelSession> draft;
  if (Status st = flags.attach_draft(s, &config.engine, &draft); !st.is_ok())
    return fail("serve", st.message());
  config.engine.max_running = parallel;
  config.engine.max_queue = queue;

  // Signals are taken by sigwait below, on this thread only.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  server::Server srv(config, *s.model, s.tokenizer, *tmpl);
  if (Status st = srv.start(); !st.is_ok()) return fail("serve", st.message());
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::fprintf(stderr,
               "ponder serve: %s loaded in %.2f s%s; listening on http://%s:%u (KV %d positions in "
               "%s/%s, %s attention, %d threads)\n",
               config.model_name.c_str(), s.load_s,
               s.model->x16_from_cache() ? " (x16 layout from the x16 cache)" : "", shown.c_str(),
               srv.port(), config.engine.kv_positions, kv_type_name(s.model->kv_type_k()),
               kv_type_name(s.model->kv_type_v()),
               !s.model->flash_attention()     ? "llama.cpp-order"
               : s.model->bf16_scores_in_use() ? "block-order (bf16 scores)"
                                               : "block-order",
               config.engine.threads.n_threads);
  std::fprintf(stderr, "ponder serve: %s\n", s.x16_cache_summary().c_str());
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "ponder serve: %s, draining (up to %.0f s)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", drain_timeout);
  if (!srv.drain(drain_timeout))
    std::fprintf(stderr, "ponder serve: drain timeout, cancelling what still runs\n");
  return 0;
}

}  // namespace

PONDER_COMMAND("serve", "serve the model over HTTP (OpenAI, llama.cpp and Ollama APIs)", run_serve);

}  // namespace ponder::cli
