#include "server/llama/llama_completion.h"

#include "server/common/field_reader.h"
#include "server/common/generation_service.h"
#include "server/common/model_lookup.h"
#include "server/openai/openai_protocol.h"
#include "server/transport/reply.h"

namespace ponder::server {

using nlohmann::json;
namespace http = boost::beast::http;

namespace {

json timings(const GenerateStats& s) {
  const double prompt_ms = s.prompt_s * 1000, gen_ms = s.gen_s * 1000;
  const int32_t n_new = s.n_prompt - s.n_reused;
  json t = {{"cache_n", s.n_reused},
            {"prompt_n", n_new},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", n_new > 0 ? prompt_ms / n_new : 0},
            {"prompt_per_second", prompt_ms > 0 ? n_new * 1000.0 / prompt_ms : 0},
            {"predicted_n", s.n_gen},
            {"predicted_ms", gen_ms},
            {"predicted_per_token_ms", s.n_gen > 0 ? gen_ms / s.n_gen : 0},
            {"predicted_per_second", gen_ms > 0 ? s.n_gen * 1000.0 / gen_ms : 0}};
  if (s.n_drafted > 0) {  // speculative decoding (llama-server's names)
    t["draft_n"] = s.n_drafted;
    t["draft_n_accepted"] = s.n_draft_accepted;
  }
  return t;
}

json probabilities(const text::Tokenizer& tok, const EngineEvent& ev) {
  json top = json::array();
  for (const TokenLogprob& t : ev.top_logprobs)
    top.push_back(
        {{"id", t.token}, {"token", tok.token_to_bytes(t.token)}, {"logprob", t.logprob}});
  return {{"id", ev.token},
          {"token", tok.token_to_bytes(ev.token)},
          {"logprob", ev.logprob},
          {"top_logprobs", top}};
}

class LlamaCompletionJob : public std::enable_shared_from_this<LlamaCompletionJob> {
 public:
  LlamaCompletionJob(ServerContext& ctx, ModelRef m, std::shared_ptr<Responder> r,
                     GenerationRequest g)
      : ctx_(ctx), m_(std::move(m)), r_(std::move(r)), g_(std::move(g)) {}

  // stream_open: the stream was opened already (it showed its model's load).
  void start(bool stream_open = false) {
    Submission sub;
    if (auto e = submit_job(ctx_, m_, g_, *r_, shared_from_this(), &sub)) {
      if (!stream_open) return reply_error(*r_, *e);
      r_->write(sse_data(dump(e->to_json())));
      return r_->end();
    }
    if (g_.stream && !stream_open) r_->start_stream(200, "text/event-stream");
  }

 private:
 public:
  // The engine's events for this request, on the I/O thread.
  void on_event(EngineEvent&& ev) {
    if (ev.kind == EngineEvent::Kind::kProgress) {
      return r_->write(sse_data(
          dump(json{{"content", ""}, {"stop", false}, {"prompt_progress", prompt_progress(ev)}})));
    }
    const std::string text = ev.reasoning + ev.content;
    content_ += text;
    if (ev.kind == EngineEvent::Kind::kToken) {
      tokens_.push_back(ev.token);
      json probs = g_.n_logprobs >= 0 ? json::array({probabilities(m_->tokenizer, ev)}) : json();
      if (g_.n_logprobs >= 0) probs_.push_back(probs[0]);
      if (g_.stream) {
        json c = {{"content", text}, {"tokens", {ev.token}}, {"stop", false}, {"id_slot", 0}};
        if (g_.n_logprobs >= 0) c["completion_probabilities"] = probs;
        r_->write(sse_data(dump(c)));
      }
      return;
    }
    if (!ev.error.empty()) {
      const ApiError e = ApiError::internal(ev.error);
      if (!g_.stream) return reply_error(*r_, e);
      r_->write(sse_data(dump(e.to_json())));
      return r_->end();
    }
    const GenerateStats& s = ev.stats;
    const std::string stop_type =
        s.finish_reason == "stop" ? "eos" : "limit";  // a stop string counts as eos here
    json out = {{"content", g_.stream ? text : content_},
                {"stop", true},
                {"id_slot", 0},
                {"model", m_->model_name},
                {"tokens_predicted", s.n_gen},
                {"tokens_evaluated", s.n_prompt},
                {"tokens_cached", s.n_reused},
                {"stop_type", stop_type},
                {"truncated", false},
                {"timings", timings(s)}};
    if (s.from_response_cache) out["response_cached"] = true;
    if (!g_.stream) {
      out["tokens"] = tokens_;
      if (g_.n_logprobs >= 0) out["completion_probabilities"] = probs_;
      return reply_json(*r_, 200, out);
    }
    r_->write(sse_data(dump(out)));
    r_->end();
  }

 private:
  ServerContext& ctx_;
  ModelRef m_;  // the request's model, loaded while the job lives
  std::shared_ptr<Responder> r_;
  GenerationRequest g_;
  std::string content_;
  std::vector<int32_t> tokens_;
  json probs_ = json::array();
};

void serve_completion(ServerContext& ctx, HttpRequest&& req, std::shared_ptr<Responder> r) {
  auto body = parse_json_body(req, *r);
  if (!body) return;
  if (!body->is_object())
    return reply_error(*r, ApiError::bad_request("the request body must be a JSON object"));
  json b = *body;
  FieldReader f(b);
  const auto n_predict = f.integer("n_predict", -1, 1 << 24);
  const auto n_probs = f.integer("n_probs", 0, 20);
  if (!f.ok()) return reply_error(*r, f.error());
  if (n_predict && *n_predict <= 0)
    b.erase("n_predict");  // -1: up to the context; 0: as llama.cpp, none given
  b.erase("n_probs");
  b.erase("cache_prompt");  // the prefix cache is always on
  GenerationRequest g;
  if (auto e = parse_completion_request(b, ctx.defaults, &g)) return reply_error(*r, *e);
  if (n_probs) g.n_logprobs = static_cast<int32_t>(*n_probs);
  if (g.n != 1)
    return reply_error(*r, ApiError::unsupported("n", "'n' other than 1 on /completion"));
  g.conversation_id = header_value(req, "x-conversation-id");
  const std::string name = model_field(b);
  // A stream for a model that must load first: its load's progress as chunks with no content and
  // a load_progress (as OpenAI streams show it), comment lines between them.
  std::shared_ptr<bool> waiting = open_stream_while_loading(
      ctx, name, g.stream, r, [r] { r->write(sse_comment("loading model")); });
  ModelRegistry::Progress progress;
  if (waiting) {
    const std::string shown = ctx.models->spec(ctx.models->find(name)).name;
    progress = [r, shown](double fraction, double seconds) {
      r->write(
          sse_data(dump(json{{"content", ""},
                             {"stop", false},
                             {"load_progress", load_progress_json(shown, fraction, seconds)}})));
    };
  }
  auto job_g = std::make_shared<GenerationRequest>(std::move(g));
  with_model(
      ctx, name, r,
      [&ctx, r, job_g, waiting](ModelRef m) {
        if (waiting) *waiting = false;
        std::make_shared<LlamaCompletionJob>(ctx, std::move(m), r, std::move(*job_g))
            ->start(waiting != nullptr);
      },
      [r, waiting](const ApiError& e) {
        if (!waiting) return reply_error(*r, e);
        *waiting = false;
        r->write(sse_data(dump(e.to_json())));
        r->end();
      },
      std::move(progress));
}

}  // namespace

void add_llama_completion_route(Router& router, ServerContext& ctx) {
  auto h = [&ctx](HttpRequest&& q, std::shared_ptr<Responder> r) {
    serve_completion(ctx, std::move(q), std::move(r));
  };
  router.add(http::verb::post, "/completion", h);
  router.add(http::verb::post, "/completions", h);
}

}  // namespace ponder::server
