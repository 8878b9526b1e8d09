#include "server/openai/openai_serving.h"

#include <fmt/core.h>

#include <cstring>

#include "grammar/tool_calls.h"
#include "server/common/field_reader.h"
#include "server/common/generation_service.h"
#include "server/common/ids.h"
#include "server/common/model_lookup.h"
#include "server/openai/openai_protocol.h"
#include "server/openai/openai_tools.h"
#include "server/transport/reply.h"

namespace ponder::server {

using nlohmann::json;
namespace http = boost::beast::http;

namespace {

std::string random_id(const std::string& prefix) {
  return fmt::format("{}-{}", prefix, random_hex(16));
}

std::string finish_reason(const std::string& engine_reason) {
  if (engine_reason == "length" || engine_reason == "context") return "length";
  return engine_reason;  // "stop", "cancelled"
}

// One request's answer, built from its engine events on the I/O thread.
class OpenAiJob : public std::enable_shared_from_this<OpenAiJob> {
 public:
  OpenAiJob(ServerContext& ctx, ModelRef m, std::shared_ptr<Responder> r, GenerationRequest g)
      : ctx_(ctx),
        m_(std::move(m)),
        r_(std::move(r)),
        g_(std::move(g)),
        choices_(static_cast<size_t>(g_.n)) {
    id_ = random_id(std::string(g_.chat ? "chatcmpl" : "cmpl") +
                    (ctx_.replica_id.empty() ? "" : "-" + ctx_.replica_id));
    created_ = unix_seconds();
  }

  // streaming: true when the stream was opened already (it showed its model's load).
  void start(bool streaming = false) {
    Submission sub;
    if (auto e = submit_job(ctx_, m_, g_, *r_, shared_from_this(), &sub)) {
      if (!streaming) return reply_error(*r_, *e);
      r_->write(sse_data(dump(e->to_json())));
      r_->write(sse_data("[DONE]"));
      return r_->end();
    }
    matched_question_ = sub.cache_question;
    if (std::string(sub.cache) != "hit") {
      ctx_.active[id_] = {m_, sub.id};
      registered_ = true;
    }
    if (g_.stream) {
      if (!streaming) r_->start_stream(200, "text/event-stream", {{"X-Request-Id", id_}});
      r_->write(sse_comment("queued"));  // headers and a first byte now, whatever the queue
      keep_alive();
    }
  }

  // While the request waits or its prompt is processed, a comment line every keepalive_s, so
  // proxies and clients do not time out.
  void keep_alive() {
    auto self = shared_from_this();
    ctx_.after(ctx_.keepalive_s, [self] {
      if (self->any_token_ || self->n_done_ == self->g_.n) return;
      self->r_->write(sse_comment("keep-alive"));
      self->keep_alive();
    });
  }

 private:
  struct Choice {
    std::string reasoning, content;
    json logprobs = json::array();                                                // chat entries
    json tokens = json::array(), token_lps = json::array(), top = json::array();  // completions
    GenerateStats stats;
    bool role_sent = false;
    bool done = false;
    std::shared_ptr<grammar::ToolCallStream> tools;  // streaming with tools: the calls as they come
    int32_t n_calls = 0;
  };

  // A streamed piece of the answer when tools were offered: plain text as content, calls as
  // OpenAI's delta.tool_calls (the id, type and name first, then the arguments in pieces).
  void stream_tool_events(Choice& c, int32_t index,
                          const std::vector<grammar::ToolCallEvent>& events) {
    for (const grammar::ToolCallEvent& e : events) {
      json delta = json::object();
      if (e.kind == grammar::ToolCallEvent::Kind::kContent) {
        if (e.text.empty()) continue;
        delta["content"] = e.text;
      } else if (e.kind == grammar::ToolCallEvent::Kind::kCallStart) {
        c.n_calls = std::max(c.n_calls, e.index + 1);
        delta["tool_calls"] = json::array({{{"index", e.index},
                                            {"id", tool_call_id(id_, index, e.index)},
                                            {"type", "function"},
                                            {"function", {{"name", e.text}, {"arguments", ""}}}}});
      } else {
        if (e.text.empty()) continue;
        delta["tool_calls"] =
            json::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}});
      }
      json choice = {
          {"index", index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
      r_->write(sse_data(dump(chunk(choice))));
    }
  }

  std::string answer_finish_reason(const Choice& c, int32_t n_calls) const {
    const std::string reason = finish_reason(c.stats.finish_reason);
    return n_calls > 0 && reason == "stop" ? "tool_calls" : reason;
  }

  json chunk(json choice_json) const {
    json c = {{"id", id_},
              {"object", g_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", m_->model_name},
              {"system_fingerprint", "ponder"},
              {"choices", json::array({choice_json})}};
    if (g_.include_usage) c["usage"] = nullptr;
    return c;
  }

  void add_logprobs(Choice& c, const EngineEvent& ev, json* delta_logprobs) {
    if (g_.n_logprobs < 0 || ev.token < 0) return;
    if (g_.chat) {
      json e = chat_logprob_entry(m_->tokenizer, ev);
      if (delta_logprobs) delta_logprobs->push_back(e);
      c.logprobs.push_back(std::move(e));
    } else {
      const std::string& b = m_->tokenizer.token_to_bytes(ev.token);
      json top = json::object();
      for (const TokenLogprob& t : ev.top_logprobs)
        top[m_->tokenizer.token_to_bytes(t.token)] = t.logprob;
      c.tokens.push_back(b);
      c.token_lps.push_back(ev.logprob);
      c.top.push_back(top);
      if (delta_logprobs)
        *delta_logprobs = {
            {"tokens", {b}}, {"token_logprobs", {ev.logprob}}, {"top_logprobs", {top}}};
    }
  }

  void stream_text(Choice& c, int32_t index, const EngineEvent& ev) {
    json lp = g_.chat ? json::array() : json(nullptr);
    add_logprobs(c, ev, &lp);
    const bool has_lp = g_.n_logprobs >= 0 && ev.token >= 0;
    if (ev.reasoning.empty() && ev.content.empty() && !has_lp && c.role_sent) return;
    json choice = {{"index", index}, {"finish_reason", nullptr}};
    if (g_.chat) {
      json delta = json::object();
      if (!c.role_sent) {
        delta["role"] = "assistant";
        c.role_sent = true;
        if (ev.content.empty()) delta["content"] = "";
      }
      if (!ev.reasoning.empty()) delta[ctx_.reasoning_field] = ev.reasoning;
      if (!ev.content.empty() && !c.tools) delta["content"] = ev.content;
      choice["delta"] = delta;
      choice["logprobs"] = has_lp ? json{{"content", lp}} : json(nullptr);
    } else {
      choice["text"] = ev.content;
      choice["logprobs"] = has_lp ? lp : json(nullptr);
    }
    if (!c.tools || !choice["delta"].empty() || has_lp) r_->write(sse_data(dump(chunk(choice))));
    if (c.tools && !ev.content.empty()) stream_tool_events(c, index, c.tools->push(ev.content));
  }

 public:
  // The engine's events for this request, on the I/O thread.
  void on_event(EngineEvent&& ev) {
    if (ev.kind == EngineEvent::Kind::kProgress) {  // llama.cpp's return_progress, streams only
      json c = chunk(json::object());
      c["choices"] = json::array();
      c["prompt_progress"] = prompt_progress(ev);
      return r_->write(sse_data(dump(c)));
    }
    const int32_t index = ev.choice;
    Choice& c = choices_[static_cast<size_t>(index)];
    if (!g_.split_reasoning || !g_.chat) {  // all of it is the answer
      ev.content = ev.reasoning + ev.content;
      ev.reasoning.clear();
    }
    c.reasoning += ev.reasoning;
    c.content += ev.content;
    any_token_ = true;
    if (g_.stream && g_.tool_calls && g_.split_reasoning && !c.tools)
      c.tools = std::make_shared<grammar::ToolCallStream>();
    if (ev.kind == EngineEvent::Kind::kToken) {
      if (g_.stream) {
        stream_text(c, index, ev);
      } else {
        add_logprobs(c, ev, nullptr);
      }
      return;
    }
    c.stats = ev.stats;
    c.done = true;
    if (!ev.error.empty() && error_.empty()) error_ = ev.error;
    if (g_.stream) {
      EngineEvent rest;
      rest.reasoning = ev.reasoning;
      rest.content = ev.content;
      if (!rest.reasoning.empty() || !rest.content.empty() || !c.role_sent)
        stream_text(c, index, rest);
      if (c.tools) stream_tool_events(c, index, c.tools->finish());
      json choice = {{"index", index},
                     {"finish_reason", answer_finish_reason(c, c.n_calls)},
                     {"logprobs", nullptr}};
      if (g_.chat) {
        choice["delta"] = json::object();
      } else {
        choice["text"] = "";
      }
      r_->write(sse_data(dump(chunk(choice))));
    }
    if (++n_done_ == g_.n) finish();
  }

 private:
  Usage usage() const {
    Usage u;
    u.prompt_tokens = choices_[0].stats.n_prompt;
    u.cached_tokens = choices_[0].stats.n_reused;
    u.response_cached = choices_[0].stats.from_response_cache;
    u.response_cached_question = matched_question_;
    for (const Choice& c : choices_) {
      u.completion_tokens += c.stats.n_gen;
      u.reasoning_tokens += c.stats.n_reasoning;
      u.drafted_tokens += c.stats.n_drafted;
      u.draft_accepted_tokens += c.stats.n_draft_accepted;
    }
    return u;
  }

  void finish() {
    if (registered_) ctx_.active.erase(id_);
    if (!error_.empty()) {
      const ApiError e = ApiError::internal(error_);
      if (g_.stream) {
        r_->write(sse_data(dump(e.to_json())));
        r_->write(sse_data("[DONE]"));
        return r_->end();
      }
      return reply_error(*r_, e);
    }
    if (g_.stream) {
      if (g_.include_usage) {
        json c = chunk(json::object());
        c["choices"] = json::array();
        c["usage"] = usage().to_json();
        r_->write(sse_data(dump(c)));
      }
      r_->write(sse_data("[DONE]"));
      return r_->end();
    }
    json out = {{"id", id_},
                {"object", g_.chat ? "chat.completion" : "text_completion"},
                {"created", created_},
                {"model", m_->model_name},
                {"system_fingerprint", "ponder"},
                {"choices", json::array()}};
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      json choice = {{"index", i}, {"finish_reason", finish_reason(c.stats.finish_reason)}};
      const bool has_lp = g_.n_logprobs >= 0;
      if (g_.chat) {
        json msg = {{"role", "assistant"}, {"content", c.content}};
        if (g_.tool_calls && g_.split_reasoning) {
          const grammar::ParsedAnswer a = grammar::parse_tool_calls(c.content);
          if (!a.calls.empty()) {
            msg["content"] = a.content.empty() ? json(nullptr) : json(a.content);
            json calls = json::array();
            for (size_t k = 0; k < a.calls.size(); ++k) {
              calls.push_back(
                  {{"id", tool_call_id(id_, static_cast<int32_t>(i), static_cast<int32_t>(k))},
                   {"type", "function"},
                   {"function", {{"name", a.calls[k].name}, {"arguments", a.calls[k].arguments}}}});
            }
            msg["tool_calls"] = calls;
            choice["finish_reason"] = answer_finish_reason(c, static_cast<int32_t>(a.calls.size()));
          }
        }
        if (!c.reasoning.empty()) msg[ctx_.reasoning_field] = c.reasoning;
        choice["message"] = msg;
        choice["logprobs"] = has_lp ? json{{"content", c.logprobs}} : json(nullptr);
      } else {
        choice["text"] = c.content;
        choice["logprobs"] = has_lp ? json{{"tokens", c.tokens},
                                           {"token_logprobs", c.token_lps},
                                           {"top_logprobs", c.top}}
                                    : json(nullptr);
      }
      out["choices"].push_back(choice);
    }
    out["usage"] = usage().to_json();
    reply_json(*r_, 200, out);
  }

  ServerContext& ctx_;
  ModelRef m_;  // the request's model, loaded while the job lives
  std::shared_ptr<Responder> r_;
  GenerationRequest g_;
  std::vector<Choice> choices_;
  std::string id_;
  int64_t created_ = 0;
  int32_t n_done_ = 0;
  bool registered_ = false;
  std::string matched_question_;  // similar match: the cached question answered instead
  bool any_token_ = false;
  std::string error_;
};

template <auto Parse>
void serve(ServerContext& ctx, HttpRequest&& req, std::shared_ptr<Responder> r) {
  auto body = parse_json_body(req, *r);
  if (!body) return;
  GenerationRequest g;
  if (auto e = Parse(*body, ctx.defaults, &g)) return reply_error(*r, *e);
  g.conversation_id = header_value(req, "x-conversation-id");
  const std::string name = model_field(*body);
  // A stream for a model that must load first opens now and shows the load's progress, as
  // llama.cpp's prompt_progress shows a prompt's: chunks with no choices and a load_progress
  // (comment lines between them, which a long step of the load may space out).
  std::shared_ptr<bool> waiting = open_stream_while_loading(
      ctx, name, g.stream, r, [r] { r->write(sse_comment("loading model")); });
  const bool streaming = waiting != nullptr;
  ModelRegistry::Progress progress;
  if (streaming) {
    const std::string shown = ctx.models->spec(ctx.models->find(name)).name;
    const char* object = g.chat ? "chat.completion.chunk" : "text_completion";
    progress = [r, shown, object](double fraction, double seconds) {
      const json c = {{"object", object},
                      {"created", unix_seconds()},
                      {"model", shown},
                      {"choices", json::array()},
                      {"load_progress", load_progress_json(shown, fraction, seconds)}};
      r->write(sse_data(dump(c)));
    };
  }
  auto job_g = std::make_shared<GenerationRequest>(std::move(g));
  with_model(
      ctx, name, r,
      [&ctx, r, job_g, streaming, waiting](ModelRef m) {
        if (waiting) *waiting = false;
        std::make_shared<OpenAiJob>(ctx, std::move(m), r, std::move(*job_g))->start(streaming);
      },
      [r, streaming, waiting](const ApiError& e) {
        if (!streaming) return reply_error(*r, e);
        *waiting = false;
        r->write(sse_data(dump(e.to_json())));
        r->write(sse_data("[DONE]"));
        r->end();
      },
      std::move(progress));
}

}  // namespace

void add_openai_routes(Router& router, ServerContext& ctx) {
  router.add(http::verb::post, "/v1/chat/completions",
             [&ctx](HttpRequest&& req, std::shared_ptr<Responder> r) {
               serve<parse_chat_request>(ctx, std::move(req), std::move(r));
             });
  router.add(http::verb::post, "/v1/completions",
             [&ctx](HttpRequest&& req, std::shared_ptr<Responder> r) {
               serve<parse_completion_request>(ctx, std::move(req), std::move(r));
             });
  // Every model offered, loaded or not ("created": when it was loaded, else the server's start).
  const int64_t started = unix_seconds();
  auto model = [&ctx, started](int i) {
    const ModelRef m = ctx.models->peek(i);
    return json{{"id", ctx.models->spec(i).name},
                {"object", "model"},
                {"created", m ? m->created_unix : started},
                {"owned_by", "ponder"}};
  };
  auto models = [&ctx, model](HttpRequest&&, std::shared_ptr<Responder> r) {
    json data = json::array();
    for (int i = 0; i < ctx.models->size(); ++i) data.push_back(model(i));
    reply_json(*r, 200, {{"object", "list"}, {"data", data}});
  };
  router.add(http::verb::get, "/v1/models", models);
  // GET /v1/models/{id} (the openai SDK's models.retrieve).
  router.add_prefix(
      http::verb::get, "/v1/models/",
      [&ctx, model](HttpRequest&& req, std::shared_ptr<Responder> r) {
        const std::string id = target_path(req).substr(std::strlen("/v1/models/"));
        // Here the name must be the model's own, even with one model.
        const int i = ctx.models->find(id);
        if (id.empty() || i < 0 || (ctx.models->single() && id != ctx.models->spec(0).name))
          return reply_error(*r, ApiError::model_not_found(id));
        reply_json(*r, 200, model(i));
      });
  // "Answer now": ends the thinking of a running chat completion (the id its chunks carry).
  router.add(
      http::verb::post, "/v1/answer_now", [&ctx](HttpRequest&& req, std::shared_ptr<Responder> r) {
        auto body = parse_json_body(req, *r);
        if (!body) return;
        FieldReader f(*body);
        const auto id = f.string("id");
        if (f.ok() && !id)
          f.fail(ApiError::bad_request("'id' (the chat completion's id) is required", "id"));
        if (!f.ok()) return reply_error(*r, f.error());
        auto it = ctx.active.find(*id);
        if (it == ctx.active.end() || !it->second.model->engine.end_thinking(it->second.id)) {
          return reply_error(*r, ApiError::not_found("no running chat completion '" + *id + "'"));
        }
        reply_json(*r, 200, {{"id", *id}, {"object", "answer_now"}, {"thinking_ended", true}});
      });
  router.add(http::verb::get, "/models", models);
}

}  // namespace ponder::server
