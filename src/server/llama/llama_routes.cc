#include "server/llama/llama_routes.h"

#include <fmt/core.h>

#include "server/common/field_reader.h"
#include "server/common/model_lookup.h"
#include "server/openai/openai_protocol.h"
#include "server/transport/reply.h"

namespace ponder::server {

using nlohmann::json;
namespace http = boost::beast::http;

namespace {

void health(ServerContext& ctx, Responder& r) {
  if (ctx.draining.load()) return reply_json(r, 503, {{"status", "draining"}});
  if (!ctx.ready.load()) return reply_json(r, 503, {{"status", "loading model"}});
  reply_json(r, 200, {{"status", "ok"}});
}

// Kubernetes' probes: live while the process serves HTTP at all (a failing liveness probe
// restarts the pod, so draining and loading are live); ready only when it takes new work.
void health_live(ServerContext& ctx, Responder& r) {
  const char* state = ctx.draining.load() ? "draining" : ctx.ready.load() ? "ok" : "loading model";
  reply_json(r, 200, {{"status", "live"}, {"state", state}});
}

void tokenize(const ModelContext& ctx, const nlohmann::json* body, Responder& r) {
  if (!body) return;
  FieldReader f(*body);
  const auto content = f.string("content");
  const bool special = f.boolean("parse_special").value_or(true);
  const bool pieces = f.boolean("with_pieces").value_or(false);
  const bool add_special = f.boolean("add_special").value_or(false);
  if (f.ok() && !content) f.fail(ApiError::bad_request("'content' is required", "content"));
  if (!f.ok()) return reply_error(r, f.error());
  std::vector<int32_t> ids = ctx.tokenizer.encode(*content, special);
  if (add_special && ctx.tokenizer.add_bos() && ctx.tokenizer.bos() >= 0)
    ids.insert(ids.begin(), ctx.tokenizer.bos());
  json tokens = json::array();
  for (int32_t id : ids) {
    if (pieces) {
      tokens.push_back({{"id", id}, {"piece", ctx.tokenizer.token_to_bytes(id)}});
    } else {
      tokens.push_back(id);
    }
  }
  reply_json(r, 200, {{"tokens", tokens}});
}

void detokenize(const ModelContext& ctx, const nlohmann::json* body, Responder& r) {
  auto it = body->find("tokens");
  if (!body->is_object() || it == body->end() || !it->is_array()) {
    return reply_error(r,
                       ApiError::bad_request("'tokens' must be an array of token ids", "tokens"));
  }
  std::vector<int32_t> ids;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= ctx.tokenizer.n_vocab()) {
      return reply_error(
          r, ApiError::bad_request(fmt::format("'tokens' holds {}, not a token id in [0, {})",
                                               dump(t), ctx.tokenizer.n_vocab()),
                                   "tokens"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  reply_json(r, 200, {{"content", ctx.tokenizer.decode(ids)}});
}

void props(const ServerContext& server, const ModelContext& ctx, Responder& r) {
  const EngineConfig& c = ctx.engine.config();
  const SamplerParams& s = server.defaults.sampling;
  json gen = {{"n_ctx", ctx.engine.max_context()},
              {"n_predict", server.defaults.max_tokens == 0 ? -1 : server.defaults.max_tokens},
              {"temperature", s.temperature},
              {"top_k", s.top_k},
              {"top_p", s.top_p},
              {"min_p", s.min_p},
              {"repeat_penalty", s.repeat_penalty},
              {"repeat_last_n", s.penalty_last_n}};
  reply_json(
      r, 200,
      {{"default_generation_settings", gen},
       {"total_slots", c.max_running},
       {"model_alias", ctx.model_name},
       // llama-server gives the template's text; the family Ponder renders it as apart
       {"chat_template", ctx.model.chat_template.empty() ? std::string(ctx.chat_template.name())
                                                         : ctx.model.chat_template},
       {"chat_template_family", ctx.chat_template.name()},
       {"kv_positions", c.kv_positions},
       {"build_info", "ponder"}});
}

// The refusals /metrics counts, by the status they are answered with.
constexpr std::pair<int, const char*> kRefusalReasons[] = {
    {400, "bad_request"},        {401, "unauthorized"},   {404, "not_found"},
    {405, "method_not_allowed"}, {413, "body_too_large"}, {414, "uri_too_long"},
    {431, "headers_too_large"},  {500, "internal_error"}, {503, "busy"}};

// The engines of every loaded model as one (counters of an unloaded model are gone with it).
EngineMetrics loaded_metrics(ServerContext& ctx) {
  EngineMetrics m;
  for (int i = 0; i < ctx.models->size(); ++i) {
    const ModelRef model = ctx.models->peek(i);
    if (!model) continue;
    const EngineMetrics e = model->engine.metrics();
    m.total.add(e.total);
    m.requests_waiting += e.requests_waiting;
    m.sequences_running += e.sequences_running;
    m.kv_blocks_total += e.kv_blocks_total;
    m.kv_blocks_used += e.kv_blocks_used;
    m.kv_blocks_cached += e.kv_blocks_cached;
    m.kv_block_size = e.kv_block_size;
    m.kv_disk.add(e.kv_disk);
    m.prompt_tps += e.prompt_tps;
    m.gen_tps += e.gen_tps;
    m.steps_per_s += e.steps_per_s;
    m.cpu_util = std::max(m.cpu_util, e.cpu_util);  // the process's, seen by each engine
    m.uptime_s = std::max(m.uptime_s, e.uptime_s);
  }
  return m;
}

// Prometheus text exposition: llama.cpp's names first (existing dashboards), then Ponder's.
void metrics(ServerContext& ctx, Responder& r) {
  const EngineMetrics m = loaded_metrics(ctx);
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  const double busy_s = m.total.busy_s;
  // llama-server's names with its meanings: counters of computed prompt tokens and generated
  // tokens with the time the finished requests spent on them; the two throughput gauges over the
  // requests finished since the last scrape (0 when none finished), each request's own speed.
  const RequestTimes& all = ctx.times_total;
  const RequestTimes& recent = ctx.times_since_scrape;
  metric("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
         static_cast<double>(m.total.prompt_rows));
  metric("llamacpp:prompt_seconds_total", "counter", "Prompt process time", all.prompt_s);
  metric("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
         static_cast<double>(m.total.generated_tokens));
  metric("llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time", all.gen_s);
  metric("ponder_draft_tokens_total", "counter",
         "Speculative decoding: guesses verified (--spec, --draft)",
         static_cast<double>(m.total.drafted_tokens));
  metric("ponder_draft_accepted_tokens_total", "counter",
         "Speculative decoding: guesses kept (the target sampled the same token)",
         static_cast<double>(m.total.draft_accepted_tokens));
  metric("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls",
         static_cast<double>(m.total.steps));
  metric("llamacpp:n_busy_slots_per_decode", "counter",
         "Average number of busy slots per llama_decode() call",
         m.total.steps ? static_cast<double>(m.total.step_sequences) / m.total.steps : 0);
  metric("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
         recent.prompt_s > 0 ? recent.prompt_tokens / recent.prompt_s : 0);
  metric("llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
         recent.gen_s > 0 ? recent.gen_tokens / recent.gen_s : 0);
  ctx.times_since_scrape = {};
  metric("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
         m.kv_blocks_total ? static_cast<double>(m.kv_blocks_used) / m.kv_blocks_total : 0);
  metric("llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.",
         static_cast<double>(m.kv_blocks_used) * m.kv_block_size);
  metric("llamacpp:requests_processing", "gauge", "Number of requests processing.",
         m.sequences_running);
  metric("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", m.requests_waiting);
  metric("ponder_prompt_rows_per_second", "gauge",
         "Prompt positions computed per second over the last seconds, all requests.", m.prompt_tps);
  metric("ponder_generated_tokens_per_second", "gauge",
         "Tokens generated per second over the last seconds, all requests.", m.gen_tps);
  metric("ponder_requests_total", "counter", "Requests accepted by the engine.",
         static_cast<double>(m.total.requests));
  out +=
      "# HELP ponder_requests_rejected_total Requests refused, by reason (the HTTP status of the "
      "refusal).\n# TYPE ponder_requests_rejected_total counter\n";
  if (ctx.statuses != nullptr) {
    for (const auto& [status, reason] : kRefusalReasons) {
      out += fmt::format("ponder_requests_rejected_total{{reason=\"{}\"}} {}\n", reason,
                         ctx.statuses->count(status));
    }
  }
  metric("ponder_requests_cancelled_total", "counter", "Requests cancelled (client gone, drain).",
         static_cast<double>(m.total.requests_cancelled));
  metric("ponder_prompt_tokens_cached_total", "counter",
         "Prompt tokens taken from the prefix cache.",
         static_cast<double>(m.total.prompt_tokens_cached));
  metric("ponder_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         static_cast<double>(m.total.prompt_tokens));
  metric("ponder_kv_blocks_total", "gauge", "KV blocks in the pool.", m.kv_blocks_total);
  metric("ponder_kv_blocks_used", "gauge", "KV blocks held by running requests.", m.kv_blocks_used);
  metric("ponder_kv_blocks_cached", "gauge", "Free KV blocks kept for prefix reuse.",
         m.kv_blocks_cached);
  const KvDiskStats& d = m.kv_disk;
  metric("ponder_kv_disk_blocks_read_total", "counter",
         "KV blocks read back from the prefix cache on disk (--kv-disk) instead of computed.",
         static_cast<double>(d.blocks_read));
  metric("ponder_kv_disk_read_seconds_total", "counter",
         "Time spent reading KV blocks back from disk (read, checksum, copy into the cache).",
         d.read_s);
  metric("ponder_kv_disk_copy_seconds_total", "counter",
         "Time the disk writer spent copying finished requests' KV blocks out of the cache.",
         d.copy_s);
  metric("ponder_kv_disk_blocks_written_total", "counter",
         "KV blocks written to the prefix cache on disk.", static_cast<double>(d.blocks_written));
  metric("ponder_kv_disk_blocks_dropped_total", "counter",
         "KV blocks not written to disk: the write queue was full.",
         static_cast<double>(d.blocks_dropped));
  metric("ponder_kv_disk_errors_total", "counter",
         "Damaged files found (removed, recomputed) and failed writes of the disk tier.",
         static_cast<double>(d.read_errors + d.write_errors));
  metric("ponder_kv_disk_blocks", "gauge", "KV blocks on disk for the loaded models.",
         static_cast<double>(d.blocks));
  metric("ponder_kv_disk_bytes", "gauge", "Bytes of the loaded models' files on disk.",
         static_cast<double>(d.bytes));
  out +=
      "# HELP ponder_time_to_first_token_seconds Time from a request's arrival to its first "
      "token.\n"
      "# TYPE ponder_time_to_first_token_seconds histogram\n";
  for (size_t i = 0; i < EngineCounters::kTtftBuckets.size(); ++i) {
    out += fmt::format("ponder_time_to_first_token_seconds_bucket{{le=\"{}\"}} {}\n",
                       EngineCounters::kTtftBuckets[i], m.total.ttft_le[i]);
  }
  out += fmt::format("ponder_time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n",
                     m.total.ttft_count);
  out += fmt::format(
      "ponder_time_to_first_token_seconds_sum {}\nponder_time_to_first_token_seconds_count {}\n",
      m.total.ttft_sum_s, m.total.ttft_count);
  metric("ponder_engine_busy_seconds_total", "counter", "Time spent in forward passes.", busy_s);
  metric("ponder_steps_per_second", "gauge", "Engine steps per second.", m.steps_per_s);
  metric("ponder_cpu_utilization_ratio", "gauge", "Process CPU time / wall time / cores.",
         m.cpu_util);
  if (ctx.cache != nullptr) {
    const ResponseCacheStats c = ctx.cache->stats();
    metric("ponder_response_cache_hits_total", "counter",
           "Requests answered from the response cache.", static_cast<double>(c.hits));
    metric("ponder_response_cache_misses_total", "counter", "Cacheable requests not in the cache.",
           static_cast<double>(c.misses));
    metric("ponder_response_cache_stores_total", "counter", "Answers stored.",
           static_cast<double>(c.stores));
    metric("ponder_response_cache_errors_total", "counter", "Cache file errors (each logged).",
           static_cast<double>(c.errors));
    metric("ponder_response_cache_disk_enabled", "gauge",
           "1 while the level under memory (the SQLite file or Redis) is in use.",
           c.disk_enabled ? 1 : 0);
    if (c.backend == "redis")
      metric("ponder_response_cache_redis_up", "gauge", "1 while Redis (--cache-url) answers.",
             c.disk_enabled ? 1 : 0);
    metric("ponder_response_cache_entries", "gauge", "Answers on disk (or in Redis).",
           static_cast<double>(c.entries_disk));
  }
  r.send(200, "text/plain; version=0.0.4", std::move(out));
}

}  // namespace

void add_llama_routes(Router& router, ServerContext& ctx) {
  auto h = [&ctx](HttpRequest&&, std::shared_ptr<Responder> r) { health(ctx, *r); };
  router.add(http::verb::get, "/health", h, true);
  router.add(http::verb::get, "/v1/health", h, true);
  router.add(http::verb::get, "/health/ready", h, true);
  router.add(
      http::verb::get, "/health/live",
      [&ctx](HttpRequest&&, std::shared_ptr<Responder> r) { health_live(ctx, *r); }, true);
  // /tokenize and /detokenize use the body's "model" (default: the first), loading it if needed.
  for (const auto& route : {std::pair{"/tokenize", &tokenize}, {"/detokenize", &detokenize}}) {
    const auto fn = route.second;  // (a structured binding cannot be captured before C++20)
    router.add(http::verb::post, route.first,
               [&ctx, fn](HttpRequest&& q, std::shared_ptr<Responder> r) {
                 auto body = parse_json_body(q, *r);
                 if (!body) return;
                 auto b = std::make_shared<json>(std::move(*body));
                 with_model(
                     ctx, model_field(*b), r, [r, b, fn](ModelRef m) { fn(*m, b.get(), *r); },
                     [r](const ApiError& e) { reply_error(*r, e); });
               });
  }
  // /props?model=NAME (default: the first model), loading it if needed.
  router.add(http::verb::get, "/props", [&ctx](HttpRequest&& q, std::shared_ptr<Responder> r) {
    with_model(
        ctx, query_param(q, "model"), r, [&ctx, r](ModelRef m) { props(ctx, *m, *r); },
        [r](const ApiError& e) { reply_error(*r, e); });
  });
  router.add(http::verb::get, "/metrics",
             [&ctx](HttpRequest&&, std::shared_ptr<Responder> r) { metrics(ctx, *r); });
  // llama-server's /slots, for the tools that poll it. Ponder has no slots: any request may use
  // the whole context; the entries are the --parallel places, the first ones busy. With several
  // models, each loaded model's places, each naming its model; with --kv-disk, what the model's
  // prefix cache on disk holds.
  router.add(http::verb::get, "/slots", [&ctx](HttpRequest&&, std::shared_ptr<Responder> r) {
    json slots = json::array();
    int32_t id = 0;
    for (int k = 0; k < ctx.models->size(); ++k) {
      const ModelRef model = ctx.models->peek(k);
      if (!model) continue;
      const EngineMetrics m = model->engine.metrics();
      for (int32_t i = 0; i < model->engine.config().max_running; ++i) {
        json slot = {{"id", id++},
                     {"n_ctx", model->engine.max_context()},
                     {"is_processing", i < m.sequences_running}};
        if (!ctx.models->single()) slot["model"] = model->model_name;
        if (model->engine.kv_disk() != nullptr) {  // the model's prefix cache on disk
          slot["kv_disk"] = {{"blocks", m.kv_disk.blocks},
                             {"bytes", m.kv_disk.bytes},
                             {"blocks_read", m.kv_disk.blocks_read}};
        }
        slots.push_back(std::move(slot));
      }
    }
    reply_json(*r, 200, slots);
  });
}

}  // namespace ponder::server
