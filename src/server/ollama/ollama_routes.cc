#include "server/ollama/ollama_routes.h"

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <chrono>

#include "grammar/tool_calls.h"
#include "server/common/generation_service.h"
#include "server/common/model_lookup.h"
#include "server/ollama/ollama_protocol.h"
#include "server/openai/openai_protocol.h"
#include "server/transport/reply.h"

namespace ponder::server {

using nlohmann::json;
namespace http = boost::beast::http;

namespace {

std::string tagged(const std::string& name) {
  return name.find(':') == std::string::npos ? name + ":latest" : name;
}

std::string now_rfc3339() {
  const auto now = std::chrono::system_clock::now();
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
}

void ollama_error(Responder& r, int status, const std::string& message) {
  r.send(status, "application/json", dump(json{{"error", message}}));
}

int64_t ns(double s) { return static_cast<int64_t>(s * 1e9); }

std::string rfc3339(int64_t unix_s) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", fmt::gmtime(static_cast<std::time_t>(unix_s)));
}

json details(const ModelFacts& facts) {
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", "qwen2"},
          {"families", {"qwen2"}},
          {"parameter_size", facts.parameter_size},
          {"quantization_level", facts.quantization}};
}

// Ollama's answer to a request for an unknown model.
void model_error(Responder& r, const std::string& name, const ApiError& e) {
  if (e.code == "model_not_found")
    return ollama_error(r, 404, fmt::format("model '{}' not found", name));
  ollama_error(r, e.status, e.message);
}

// /api/chat and /api/generate, streamed as NDJSON lines or answered whole.
class OllamaJob : public std::enable_shared_from_this<OllamaJob> {
 public:
  OllamaJob(ServerContext& ctx, ModelRef m, std::shared_ptr<Responder> r, GenerationRequest g,
            bool chat_shape, bool show_thinking, double load_s)
      : ctx_(ctx),
        m_(std::move(m)),
        load_s_(load_s),
        r_(std::move(r)),
        g_(std::move(g)),
        chat_shape_(chat_shape),
        show_thinking_(show_thinking) {}

  void start() {
    Submission sub;
    if (auto e = submit_job(ctx_, m_, g_, *r_, shared_from_this(), &sub)) {
      return ollama_error(*r_, e->status, e->message);
    }
    if (g_.stream) r_->start_stream(200, "application/x-ndjson");
  }

 private:
  json line(const std::string& thinking, const std::string& content, bool done) const {
    json j = {{"model", tagged(m_->model_name)}, {"created_at", now_rfc3339()}, {"done", done}};
    if (chat_shape_) {
      json m = {{"role", "assistant"}, {"content", content}};
      if (show_thinking_ && !thinking.empty()) m["thinking"] = thinking;
      j["message"] = m;
    } else {
      j["response"] = content;
      if (show_thinking_ && !thinking.empty()) j["thinking"] = thinking;
    }
    return j;
  }

 public:
  // The engine's events for this request, on the I/O thread.
  void on_event(EngineEvent&& ev) {
    if (ev.kind == EngineEvent::Kind::kProgress) return;  // Ollama has no progress lines
    thinking_ += ev.reasoning;
    content_ += ev.content;
    if (ev.kind == EngineEvent::Kind::kToken) {
      if (g_.stream && g_.tool_calls && chat_shape_) {  // the calls' text is not content
        std::string text;
        for (const grammar::ToolCallEvent& e : calls_.push(ev.content)) {
          if (e.kind == grammar::ToolCallEvent::Kind::kContent) text += e.text;
        }
        ev.content = std::move(text);
      }
      if (g_.stream && ((show_thinking_ && !ev.reasoning.empty()) || !ev.content.empty())) {
        r_->write(dump(line(ev.reasoning, ev.content, false)) + "\n");
      }
      return;
    }
    if (!ev.error.empty()) {
      if (!g_.stream) return ollama_error(*r_, 500, ev.error);
      r_->write(dump(json{{"error", ev.error}}) + "\n");
      return r_->end();
    }
    const GenerateStats& s = ev.stats;
    if (g_.stream && g_.tool_calls && chat_shape_) {
      std::string text;
      auto events = calls_.push(ev.content);
      for (auto& e : calls_.finish()) events.push_back(std::move(e));
      for (const grammar::ToolCallEvent& e : events) {
        if (e.kind == grammar::ToolCallEvent::Kind::kContent) text += e.text;
      }
      ev.content = std::move(text);
    }
    json last = g_.stream ? line(ev.reasoning, ev.content, true) : line(thinking_, content_, true);
    if (g_.tool_calls && chat_shape_) {
      // The calls in Ollama's shape (arguments as an object); streamed, in the last line.
      const grammar::ParsedAnswer a = grammar::parse_tool_calls(content_);
      if (!a.calls.empty()) {
        json calls = json::array();
        for (size_t i = 0; i < a.calls.size(); ++i) {
          json args = json::parse(a.calls[i].arguments, nullptr, false);
          calls.push_back(
              {{"function",
                {{"index", i},
                 {"name", a.calls[i].name},
                 {"arguments", args.is_discarded() ? json(a.calls[i].arguments) : args}}}});
        }
        last["message"]["tool_calls"] = calls;
        if (!g_.stream) last["message"]["content"] = a.content;
      }
    }
    last["done_reason"] = s.finish_reason == "stop" ? "stop" : "length";
    last["total_duration"] = ns(load_s_ + s.queue_s + s.prompt_s + s.gen_s);
    last["load_duration"] = ns(load_s_);
    last["prompt_eval_count"] = s.n_prompt;
    last["prompt_eval_duration"] = ns(s.prompt_s);
    last["eval_count"] = s.n_gen;
    last["eval_duration"] = ns(s.gen_s);
    if (!g_.stream) return reply_json(*r_, 200, last);
    r_->write(dump(last) + "\n");
    r_->end();
  }

 private:
  ServerContext& ctx_;
  ModelRef m_;     // the request's model, loaded while the job lives
  double load_s_;  // the time this request waited for its model to load (Ollama's load_duration)
  std::shared_ptr<Responder> r_;
  GenerationRequest g_;
  bool chat_shape_;
  bool show_thinking_;
  std::string thinking_, content_;
  grammar::ToolCallStream
      calls_;  // streamed answers with tools: the plain text apart from the calls
};

void serve_chat(ServerContext& ctx, HttpRequest&& req, std::shared_ptr<Responder> r,
                bool chat_shape) {
  json body = json::parse(req.body(), nullptr, false);
  if (body.is_discarded()) return ollama_error(*r, 400, "the request body is not a JSON object");
  GenerationRequest g;  // a body that is not an object is refused by the parser
  OllamaRequest x;
  if (auto e = parse_ollama_request(body, ctx.defaults, chat_shape, &g, &x))
    return ollama_error(*r, 400, *e);
  const std::string name = model_field(body);
  const int index = ctx.models->find(name);
  if (index < 0) return model_error(*r, name, ApiError::model_not_found(name));
  // keep_alive: how long the model stays once this request ends (one model: for ever).
  if (x.keep_alive_s) ctx.models->set_keep_alive(index, *x.keep_alive_s);
  const bool unload = x.keep_alive_s && *x.keep_alive_s == 0;
  auto load_reply = [chat_shape, unload](const std::string& model) {
    json j = {{"model", tagged(model)},
              {"created_at", now_rfc3339()},
              {"done", true},
              {"done_reason", unload ? "unload" : "load"}};
    if (chat_shape) {
      j["message"] = {{"role", "assistant"}, {"content", ""}};
    } else {
      j["response"] = "";
    }
    return j;
  };
  if (x.load_only && unload) {
    // Unload (docs/server.md: keep_alive): at once when idle, else when its requests end.
    return reply_json(*r, 200, load_reply(ctx.models->spec(index).name));
  }
  g.conversation_id = header_value(req, "x-conversation-id");
  g.split_reasoning = true;
  auto job_g = std::make_shared<GenerationRequest>(std::move(g));
  const bool load_only = x.load_only, show_thinking = x.show_thinking;
  const auto asked = std::chrono::steady_clock::now();
  const bool loads = model_needs_load(ctx, name);
  with_model(
      ctx, name, r,
      [&ctx, r, job_g, chat_shape, show_thinking, load_only, load_reply, asked, loads](ModelRef m) {
        if (load_only) return reply_json(*r, 200, load_reply(m->model_name));
        const double load_s =
            loads ? std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count()
                  : 0;
        std::make_shared<OllamaJob>(ctx, std::move(m), r, std::move(*job_g), chat_shape,
                                    show_thinking, load_s)
            ->start();
      },
      [r, name](const ApiError& e) { model_error(*r, name, e); });
}

json model_entry(const ModelSpec& spec) {
  return {{"name", tagged(spec.name)},    {"model", tagged(spec.name)},
          {"modified_at", now_rfc3339()}, {"size", spec.facts.file_size},
          {"digest", spec.fingerprint},   {"details", details(spec.facts)}};
}

}  // namespace

void add_ollama_routes(Router& router, ServerContext& ctx) {
  // Ollama's clients read {"error": "..."}: unknown /api/ paths, wrong methods and a missing key
  // answer so too.
  router.set_error_shape(
      "/api/", [](Responder& r, const ApiError& e) { ollama_error(r, e.status, e.message); });
  router.add(http::verb::post, "/api/chat", [&ctx](HttpRequest&& q, std::shared_ptr<Responder> r) {
    serve_chat(ctx, std::move(q), std::move(r), true);
  });
  router.add(http::verb::post, "/api/generate",
             [&ctx](HttpRequest&& q, std::shared_ptr<Responder> r) {
               serve_chat(ctx, std::move(q), std::move(r), false);
             });
  // Every model offered.
  router.add(http::verb::get, "/api/tags", [&ctx](HttpRequest&&, std::shared_ptr<Responder> r) {
    json models = json::array();
    for (int i = 0; i < ctx.models->size(); ++i) models.push_back(model_entry(ctx.models->spec(i)));
    reply_json(*r, 200, {{"models", models}});
  });
  // The models loaded: size is the memory estimate (file + KV cache), expires_at the keep_alive
  // deadline (none: until memory is needed; one model: the server's lifetime).
  router.add(http::verb::get, "/api/ps", [&ctx](HttpRequest&&, std::shared_ptr<Responder> r) {
    json models = json::array();
    for (const ModelStatus& s : ctx.models->status()) {
      if (!s.loaded) continue;
      json m = model_entry(ctx.models->spec(s.index));
      if (!ctx.models->single()) m["size"] = s.bytes;
      m["size_vram"] = 0;
      m["expires_at"] = s.expires_unix ? rfc3339(*s.expires_unix) : "9999-12-31T23:59:59Z";
      models.push_back(std::move(m));
    }
    reply_json(*r, 200, {{"models", models}});
  });
  router.add(
      http::verb::post, "/api/show", [&ctx](HttpRequest&& req, std::shared_ptr<Responder> r) {
        // {"model": name} (or the older "name"): a name no model answers to is a 404 (with one
        // model, any name but another than its own). Loads nothing: the facts are the file's.
        json body = json::parse(req.body(), nullptr, false);
        if (!body.is_object())
          return ollama_error(*r, 400, "the request body is not a JSON object");
        const std::string name = model_field(body);
        int index = ctx.models->find(name);
        if (ctx.models->single() && !name.empty() &&
            tagged(name) != tagged(ctx.models->spec(0).name))
          index = -1;
        if (index < 0) return ollama_error(*r, 404, fmt::format("model '{}' not found", name));
        const ModelSpec& spec = ctx.models->spec(index);
        const ModelRef loaded = ctx.models->peek(index);
        json caps = {"completion"};
        if (!loaded || loaded->r1()) {
          caps.push_back("tools");
          caps.push_back("thinking");
        }
        const SamplerParams& s = ctx.defaults.sampling;
        reply_json(*r, 200,
                   {{"details", details(spec.facts)},
                    {"capabilities", caps},
                    {"modelfile", ""},
                    {"parameters", fmt::format("temperature {}\ntop_p {}", s.temperature, s.top_p)},
                    {"template", spec.facts.chat_template},
                    {"model_info", spec.facts.model_info},
                    {"modified_at", now_rfc3339()}});
      });
  router.add(http::verb::get, "/api/version", [](HttpRequest&&, std::shared_ptr<Responder> r) {
    reply_json(*r, 200, {{"version", "0.9.0"}});  // the Ollama API level these routes follow
  });
}

}  // namespace ponder::server
