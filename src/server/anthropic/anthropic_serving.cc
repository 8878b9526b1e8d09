#include "server/anthropic/anthropic_serving.h"

#include <fmt/core.h>

#include "grammar/tool_calls.h"
#include "server/anthropic/anthropic_protocol.h"
#include "server/common/generation_service.h"
#include "server/common/ids.h"
#include "server/common/model_lookup.h"
#include "server/openai/openai_protocol.h"
#include "server/transport/reply.h"

namespace ponder::server {

using nlohmann::json;
namespace http = boost::beast::http;

namespace {

void anthropic_error(Responder& r, const ApiError& e) {
  HttpHeaders headers;
  if (e.status == 503 || e.status == 429) headers.emplace_back("Retry-After", "1");
  r.send(e.status, "application/json", dump(anthropic_error_json(e)), headers);
}

// The tool's input as an object (the grammar makes the arguments one; an unconstrained answer's
// text that is not stays visible as {"arguments": TEXT}).
json tool_input(const std::string& arguments) {
  json j = json::parse(arguments, nullptr, false);
  if (j.is_object()) return j;
  return {{"arguments", arguments}};
}

// One request's message, built from its engine events on the I/O thread.
class MessagesJob : public std::enable_shared_from_this<MessagesJob> {
 public:
  // base: the message id's random part (msg_<base>), made by a route that shows the id early.
  MessagesJob(ServerContext& ctx, ModelRef m, std::shared_ptr<Responder> r, GenerationRequest g,
              std::string base = "")
      : ctx_(ctx), m_(std::move(m)), r_(std::move(r)), g_(std::move(g)), base_(std::move(base)) {
    if (base_.empty()) base_ = random_hex(24);
    id_ = "msg_" + base_;
    if (g_.stream && g_.tool_calls) calls_ = std::make_unique<grammar::ToolCallStream>();
  }

  // stream_open: the stream was opened already (with the request-id; it waited for a load).
  void start(bool stream_open = false) {
    if (!stream_open) r_->add_header("request-id", id_);  // what Anthropic's SDKs report
    Submission sub;
    if (auto e = submit_job(ctx_, m_, g_, *r_, shared_from_this(), &sub)) {
      if (!stream_open) return anthropic_error(*r_, *e);
      send(anthropic_error_json(*e));
      return r_->end();
    }
    n_prompt_ = sub.n_prompt;
    if (std::string(sub.cache) != "hit") {
      ctx_.active[id_] = {m_, sub.id};  // POST /v1/answer_now takes the message id too
      registered_ = true;
    }
    if (!g_.stream) return;
    if (!stream_open) r_->start_stream(200, "text/event-stream");
    json start = message(json::array(), nullptr);
    start["usage"]["output_tokens"] = 0;
    send({{"type", "message_start"}, {"message", start}});
    send({{"type", "ping"}});
    keep_alive();
  }

  // While the request waits or its prompt is processed: a ping every keepalive_s, as Anthropic
  // sends them, so proxies and clients do not time out.
  void keep_alive() {
    auto self = shared_from_this();
    ctx_.after(ctx_.keepalive_s, [self] {
      if (self->any_token_ || self->done_) return;
      self->send({{"type", "ping"}});
      self->keep_alive();
    });
  }

  // The engine's events for this request, on the I/O thread.
  void on_event(EngineEvent&& ev) {
    if (ev.kind == EngineEvent::Kind::kProgress) return;  // Anthropic has no progress events
    any_token_ = true;
    thinking_ += ev.reasoning;
    content_ += ev.content;
    if (g_.stream) stream_piece(ev.reasoning, ev.content);
    if (ev.kind == EngineEvent::Kind::kToken) return;
    done_ = true;
    stats_ = ev.stats;
    if (registered_) ctx_.active.erase(id_);
    if (!ev.error.empty()) {
      const ApiError e = ApiError::internal(ev.error);
      if (!g_.stream) return anthropic_error(*r_, e);
      send(anthropic_error_json(e));
      return r_->end();
    }
    g_.stream ? finish_stream() : finish_whole();
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  // Anthropic's `event:` line repeats the data's type.
  void send(const json& event) {
    r_->write(sse_event(event["type"].get<std::string>(), dump(event)));
  }

  std::string tool_use_id(int32_t index) const {
    return fmt::format("toolu_{}{:02d}", base_, index);
  }

  // The message object around `content` (message_start's, or the whole answer).
  json message(json content, json stop_reason) const {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", m_->model_name},
            {"content", std::move(content)},
            {"stop_reason", std::move(stop_reason)},
            {"stop_sequence", nullptr},
            {"usage", usage()}};
  }

  // Anthropic's usage: input_tokens are the prompt tokens not read from the cache, so
  // input_tokens + cache_read_input_tokens is the prompt (message_start, before the prompt ran,
  // counts it all; message_delta corrects it).
  json usage() const {
    const int32_t n_prompt = stats_.n_prompt > 0 ? stats_.n_prompt : n_prompt_;
    return {{"input_tokens", n_prompt - stats_.n_reused},
            {"output_tokens", stats_.n_gen},
            {"cache_read_input_tokens", stats_.n_reused},
            {"cache_creation_input_tokens", 0}};
  }

  // The stop sequence that ended the answer: of those in the generated text, the one whose first
  // occurrence ends first, where the engine stopped (it ends on a stop string without saying
  // which; the matched text is not sent).
  std::string matched_stop_sequence() const {
    if (stats_.finish_reason != "stop" || g_.options.stop.empty()) return "";
    const std::string text = m_->tokenizer.decode(stats_.tokens);
    size_t best = std::string::npos;
    std::string found;
    for (const std::string& s : g_.options.stop) {
      const size_t p = text.find(s);
      if (p != std::string::npos && (best == std::string::npos || p + s.size() < best)) {
        best = p + s.size();
        found = s;
      }
    }
    return found;
  }

  void close_block() {
    if (open_ == Block::kNone) return;
    if (open_ == Block::kThinking)
      send({{"type", "content_block_delta"},
            {"index", index_},
            {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    send({{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
  }

  void open_block(Block kind, json block) {
    close_block();
    open_ = kind;
    index_ = n_blocks_++;
    send({{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
  }

  void stream_text(const std::string& text) {
    if (text.empty()) return;
    if (open_ != Block::kText) open_block(Block::kText, {{"type", "text"}, {"text", ""}});
    send({{"type", "content_block_delta"},
          {"index", index_},
          {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }

  void stream_calls(const std::vector<grammar::ToolCallEvent>& events) {
    for (const grammar::ToolCallEvent& e : events) {
      if (e.kind == grammar::ToolCallEvent::Kind::kContent) {
        stream_text(e.text);
      } else if (e.kind == grammar::ToolCallEvent::Kind::kCallStart) {
        ++n_calls_;
        open_block(Block::kToolUse, {{"type", "tool_use"},
                                     {"id", tool_use_id(e.index)},
                                     {"name", e.text},
                                     {"input", json::object()}});
      } else if (!e.text.empty() && open_ == Block::kToolUse) {
        send({{"type", "content_block_delta"},
              {"index", index_},
              {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
      }
    }
  }

  void stream_piece(const std::string& reasoning, const std::string& content) {
    if (!reasoning.empty()) {
      if (open_ != Block::kThinking)
        open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      send({{"type", "content_block_delta"},
            {"index", index_},
            {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
    }
    if (content.empty()) return;
    if (calls_) return stream_calls(calls_->push(content));
    // The answer's text; the blank lines R1 writes after </think> open no block of their own.
    if (open_ != Block::kText && content.find_first_not_of(" \t\r\n") == std::string::npos) {
      held_ += content;
      return;
    }
    stream_text(open_ == Block::kText ? content : trim_start(held_ + content));
    held_.clear();
  }

  static std::string trim_start(const std::string& s) {
    const size_t p = s.find_first_not_of(" \t\r\n");
    return p == std::string::npos ? "" : s.substr(p);
  }

  void finish_stream() {
    if (calls_) stream_calls(calls_->finish());
    close_block();
    const std::string stop = matched_stop_sequence();
    json u = usage();
    send({{"type", "message_delta"},
          {"delta",
           {{"stop_reason",
             anthropic_stop_reason(stats_.finish_reason, n_calls_ > 0, !stop.empty())},
            {"stop_sequence", stop.empty() ? json(nullptr) : json(stop)}}},
          {"usage", u}});
    send({{"type", "message_stop"}});
    r_->end();
  }

  void finish_whole() {
    json content = json::array();
    if (!thinking_.empty())
      content.push_back({{"type", "thinking"}, {"thinking", thinking_}, {"signature", ""}});
    int32_t n_calls = 0;
    if (g_.tool_calls) {
      const grammar::ParsedAnswer a = grammar::parse_tool_calls(content_);
      if (!a.content.empty()) content.push_back({{"type", "text"}, {"text", a.content}});
      for (const grammar::ToolCall& c : a.calls) {
        content.push_back({{"type", "tool_use"},
                           {"id", tool_use_id(n_calls++)},
                           {"name", c.name},
                           {"input", tool_input(c.arguments)}});
      }
    } else if (const std::string text = trim_start(content_); !text.empty()) {
      content.push_back({{"type", "text"}, {"text", text}});
    }
    const std::string stop = matched_stop_sequence();
    json m = message(std::move(content),
                     anthropic_stop_reason(stats_.finish_reason, n_calls > 0, !stop.empty()));
    if (!stop.empty()) m["stop_sequence"] = stop;
    reply_json(*r_, 200, m);
  }

  ServerContext& ctx_;
  ModelRef m_;  // the request's model, loaded while the job lives
  std::shared_ptr<Responder> r_;
  GenerationRequest g_;
  std::string base_, id_;
  int32_t n_prompt_ = 0;
  bool registered_ = false;
  bool any_token_ = false;
  bool done_ = false;
  std::string thinking_, content_;
  GenerateStats stats_;
  // Streaming: the open content block, its index, the calls read from the answer as it comes.
  Block open_ = Block::kNone;
  int32_t index_ = -1;
  int32_t n_blocks_ = 0;
  int32_t n_calls_ = 0;
  std::string held_;  // whitespace before the first text
  std::unique_ptr<grammar::ToolCallStream> calls_;
};

std::optional<GenerationRequest> parse(ServerContext& ctx, const HttpRequest& req, Responder& r,
                                       bool count_tokens, std::string* model) {
  json body = json::parse(req.body(), nullptr, false);
  if (body.is_discarded()) {
    anthropic_error(r, ApiError::bad_request("the request body is not valid JSON"));
    return std::nullopt;
  }
  GenerationRequest g;
  if (auto e = parse_messages_request(body, ctx.defaults, count_tokens, &g)) {
    anthropic_error(r, *e);
    return std::nullopt;
  }
  g.conversation_id = header_value(req, "x-conversation-id");
  *model = model_field(body);
  return g;
}

// The request's model, loaded, then `then`; an unknown one is Anthropic's not_found_error.
// waiting: set when the stream opened while the model loads (its error is then an event).
void run_with_model(ServerContext& ctx, const std::string& name, std::shared_ptr<Responder> r,
                    std::function<void(ModelRef)> then, std::shared_ptr<bool> waiting = nullptr) {
  with_model(
      ctx, name, r,
      [then = std::move(then), waiting](ModelRef m) {
        if (waiting) *waiting = false;
        then(std::move(m));
      },
      [r, name, waiting](const ApiError& e) {
        ApiError a = e;
        if (e.code == "model_not_found") a.message = "model: " + name;  // Anthropic's words
        if (!waiting) return anthropic_error(*r, a);
        *waiting = false;
        const json j = anthropic_error_json(a);
        r->write(sse_event(j["type"].get<std::string>(), dump(j)));
        r->end();
      });
}

}  // namespace

void add_anthropic_routes(Router& router, ServerContext& ctx) {
  router.set_error_shape("/v1/messages",
                         [](Responder& r, const ApiError& e) { anthropic_error(r, e); });
  router.add(
      http::verb::post, "/v1/messages", [&ctx](HttpRequest&& req, std::shared_ptr<Responder> r) {
        std::string name;
        auto g = parse(ctx, req, *r, false, &name);
        if (!g) return;
        // A stream whose model must load first opens now with pings (Anthropic's
        // keep-alive, which its SDKs skip) until the model is there.
        const std::string base = random_hex(24);
        std::shared_ptr<bool> waiting =
            open_stream_while_loading(ctx, name, g->stream, r,
                                      [r] {
                                        r->write(sse_event("ping", dump(json{{"type", "ping"}})));
                                      },
                                      {{"request-id", "msg_" + base}});
        auto job_g = std::make_shared<GenerationRequest>(std::move(*g));
        run_with_model(
            ctx, name, r,
            [&ctx, r, job_g, base, waiting](ModelRef m) {
              std::make_shared<MessagesJob>(ctx, std::move(m), r, std::move(*job_g), base)
                  ->start(waiting != nullptr);
            },
            waiting);
      });
  // The prompt's tokens as the model's template renders them (tools and system included).
  router.add(http::verb::post, "/v1/messages/count_tokens",
             [&ctx](HttpRequest&& req, std::shared_ptr<Responder> r) {
               std::string name;
               auto g = parse(ctx, req, *r, true, &name);
               if (!g) return;
               auto job_g = std::make_shared<GenerationRequest>(std::move(*g));
               run_with_model(ctx, name, r, [r, job_g](ModelRef m) {
                 std::vector<int32_t> tokens;
                 if (auto e = prompt_tokens(*m, *job_g, &tokens)) return anthropic_error(*r, *e);
                 reply_json(*r, 200, {{"input_tokens", tokens.size()}});
               });
             });
}

}  // namespace ponder::server
