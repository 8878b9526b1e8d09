#include "server/responses/responses_serving.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "server/common/generation_service.h"
#include "server/common/ids.h"
#include "server/common/model_lookup.h"
#include "server/openai/openai_protocol.h"
#include "server/responses/response_output.h"
#include "server/responses/responses_protocol.h"
#include "server/transport/reply.h"

namespace ponder::server {

using nlohmann::json;
namespace http = boost::beast::http;

namespace {

constexpr const char* kPrefix = "/v1/responses/";

ApiError response_not_found(const std::string& id) {
  ApiError e = ApiError::not_found(fmt::format("Response with id '{}' not found.", id));
  e.type = "invalid_request_error";
  e.code.clear();
  return e;
}

// This turn's input as it is stored: every item with an id (GET .../input_items lists them by
// it), a message's content as parts.
json stored_input(const json& items, const std::string& suffix) {
  json out = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    json item = items[i];
    const bool typed = item.contains("type") && item["type"].is_string();
    const std::string type = typed ? item["type"].get<std::string>() : "message";
    const char* prefix = type == "function_call" ? "fc" : type == "message" ? "msg" : "fco";
    if (type == "message") {
      item["type"] = "message";
      if (item["content"].is_string()) {
        const bool assistant = item["role"] == "assistant";
        json part = {{"type", assistant ? "output_text" : "input_text"}, {"text", item["content"]}};
        if (assistant) part["annotations"] = json::array();
        item["content"] = json::array({part});
      }
    }
    if (!item.contains("id") || !item["id"].is_string())
      item["id"] = fmt::format("{}_{}in{}", prefix, suffix, i);
    out.push_back(std::move(item));
  }
  return out;
}

// GET /v1/responses/{id}/input_items: OpenAI's list (order desc by default, limit 1-100, after).
void list_input_items(const StoredResponse& stored, const HttpRequest& req, Responder& r) {
  const std::string order = query_param(req, "order").empty() ? "desc" : query_param(req, "order");
  if (order != "asc" && order != "desc")
    return reply_error(r, ApiError::bad_request("'order' must be asc or desc", "order"));
  int64_t limit = 20;
  if (const std::string l = query_param(req, "limit"); !l.empty()) {
    char* end = nullptr;
    limit = std::strtoll(l.c_str(), &end, 10);
    if (*end != '\0' || limit < 1 || limit > 100)
      return reply_error(
          r, ApiError::bad_request(fmt::format("'limit' is '{}'; it must be between 1 and 100", l),
                                   "limit"));
  }
  std::vector<json> items(stored.items.begin(),
                          stored.items.begin() + static_cast<std::ptrdiff_t>(stored.n_input));
  if (order == "desc") std::reverse(items.begin(), items.end());
  size_t first = 0;
  if (const std::string after = query_param(req, "after"); !after.empty()) {
    while (first < items.size() && items[first]["id"] != after) ++first;
    if (first == items.size())
      return reply_error(
          r, ApiError::bad_request(
                 fmt::format("'after' is '{}', which is not an input item", after), "after"));
    ++first;
  }
  json data = json::array();
  for (size_t i = first; i < items.size() && data.size() < static_cast<size_t>(limit); ++i)
    data.push_back(items[i]);
  const bool has_more = first + data.size() < items.size();
  reply_json(r, 200,
             {{"object", "list"},
              {"data", data},
              {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
              {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
              {"has_more", has_more}});
}

// An error after the stream opened: the Responses API's `error` event, then the end.
void stream_error(Responder& r, const ApiError& e) {
  json j = {{"type", "error"},
            {"code", e.code.empty() ? e.type : e.code},
            {"message", e.message},
            {"param", nullptr}};
  if (!e.param.empty()) j["param"] = e.param;
  r.write(sse_event("error", dump(j)));
  r.end();
}

// One request's response, built from its engine events on the I/O thread.
class ResponsesJob : public std::enable_shared_from_this<ResponsesJob> {
 public:
  ResponsesJob(ServerContext& ctx, ModelRef m, std::shared_ptr<ResponseStore> store,
               std::shared_ptr<Responder> r, ResponsesRequest req,
               std::shared_ptr<const StoredResponse> previous)
      : ctx_(ctx),
        m_(std::move(m)),
        store_(std::move(store)),
        r_(std::move(r)),
        req_(std::move(req)),
        previous_(std::move(previous)),
        suffix_(random_hex(16)),
        output_(suffix_, req_.g.tool_calls, emitter()) {
    id_ = "resp_" + (ctx_.replica_id.empty() ? "" : ctx_.replica_id + "_") + suffix_;
    created_ = unix_seconds();
  }

  // stream_open: the stream was opened already (it waited for its model's load).
  void start(bool stream_open = false) {
    Submission sub;
    if (auto e = submit_job(ctx_, m_, req_.g, *r_, shared_from_this(), &sub)) {
      if (e->param == "messages") e->param = "input";  // the conversation is too long
      if (!stream_open) return reply_error(*r_, *e);
      return stream_error(*r_, *e);
    }
    if (std::string(sub.cache) != "hit") {  // POST /v1/answer_now {"id": "resp_..."}
      ctx_.active[id_] = {m_, sub.id};
      registered_ = true;
    }
    if (!req_.g.stream) return;
    if (!stream_open) r_->start_stream(200, "text/event-stream", {{"X-Request-Id", id_}});
    const json r = response("in_progress");
    send("response.created", {{"response", r}});
    send("response.in_progress", {{"response", r}});
    keep_alive();
  }

  // The engine's events for this request, on the I/O thread.
  void on_event(EngineEvent&& ev) {
    if (ev.kind == EngineEvent::Kind::kProgress) return;
    any_token_ = true;
    output_.reasoning(ev.reasoning);
    output_.content(ev.content);
    if (ev.kind != EngineEvent::Kind::kDone) return;
    stats_ = ev.stats;
    error_ = ev.error;
    finish();
  }

 private:
  ResponseOutput::Emit emitter() {
    if (!req_.g.stream) return nullptr;
    return [this](const std::string& type, json fields) { send(type, std::move(fields)); };
  }

  // One typed event: "event: TYPE" and its JSON with type and sequence_number.
  void send(const std::string& type, json fields) {
    fields["type"] = type;
    fields["sequence_number"] = sequence_++;
    r_->write(sse_event(type, dump(fields)));
  }

  // A comment line every keepalive_s until the first token (long queues, prefills).
  void keep_alive() {
    auto self = shared_from_this();
    ctx_.after(ctx_.keepalive_s, [self] {
      if (self->any_token_ || self->done_) return;
      self->r_->write(sse_comment("keep-alive"));
      self->keep_alive();
    });
  }

  json usage() const {
    return {{"input_tokens", stats_.n_prompt},
            {"input_tokens_details", {{"cached_tokens", stats_.n_reused}}},
            {"output_tokens", stats_.n_gen},
            {"output_tokens_details", {{"reasoning_tokens", stats_.n_reasoning}}},
            {"total_tokens", stats_.n_prompt + stats_.n_gen}};
  }

  json response(const std::string& status) const {
    json r = req_.settings;
    r["id"] = id_;
    r["object"] = "response";
    r["created_at"] = created_;
    r["status"] = status;
    r["model"] = m_->model_name;
    r["output"] = done_ ? output_.items() : json::array();
    r["error"] = nullptr;
    r["incomplete_details"] = nullptr;
    r["usage"] = done_ ? usage() : json(nullptr);
    return r;
  }

  void finish() {
    done_ = true;
    if (registered_) ctx_.active.erase(id_);
    const std::string& reason = stats_.finish_reason;
    const bool cut = reason == "length" || reason == "context";
    output_.finish(!cut && error_.empty());
    std::string status = "completed";
    if (!error_.empty()) status = "failed";
    if (cut || reason == "cancelled") status = "incomplete";
    json r = response(status);
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (!error_.empty()) r["error"] = {{"code", "server_error"}, {"message", error_}};
    if (req_.store && status != "failed" && reason != "cancelled") {
      auto stored = std::make_shared<StoredResponse>();
      stored->response = r;
      stored->items = stored_input(req_.input_items, suffix_);
      stored->n_input = stored->items.size();
      for (const auto& item : output_.items()) stored->items.push_back(item);
      stored->previous = previous_;
      store_->put(id_, std::move(stored));
    }
    if (req_.g.stream) {
      send("response." + status, {{"response", r}});
      return r_->end();
    }
    if (!error_.empty()) return reply_error(*r_, ApiError::internal(error_));
    reply_json(*r_, 200, r);
  }

  ServerContext& ctx_;
  ModelRef m_;  // the request's model, loaded while the job lives
  std::shared_ptr<ResponseStore> store_;
  std::shared_ptr<Responder> r_;
  ResponsesRequest req_;
  std::shared_ptr<const StoredResponse> previous_;
  std::string suffix_;
  ResponseOutput output_;
  std::string id_;
  int64_t created_ = 0;
  int64_t sequence_ = 0;
  GenerateStats stats_;
  std::string error_;
  bool any_token_ = false;
  bool done_ = false;
  bool registered_ = false;  // in ctx_.active while it runs
};

void create(ServerContext& ctx, const std::shared_ptr<ResponseStore>& store, HttpRequest&& req,
            std::shared_ptr<Responder> r) {
  auto body = parse_json_body(req, *r);
  if (!body) return;
  std::shared_ptr<const StoredResponse> previous;
  const ConversationLookup lookup = [&](const std::string& id) -> std::optional<json> {
    previous = store->get(id);
    if (!previous) return std::nullopt;
    return previous->conversation();
  };
  ResponsesRequest parsed;
  const ItemLookup find_item = [&](const std::string& id) { return store->find_item(id); };
  if (auto e = parse_responses_request(*body, ctx.defaults, lookup, &parsed, find_item))
    return reply_error(*r, *e);
  parsed.g.conversation_id = header_value(req, "x-conversation-id");
  const std::string name = model_field(*body);
  // A stream whose model must load first opens now: comment lines while it loads (the API has
  // no event for a load; every SSE client skips comments).
  std::shared_ptr<bool> waiting = open_stream_while_loading(
      ctx, name, parsed.g.stream, r, [r] { r->write(sse_comment("loading model")); });
  auto job_req = std::make_shared<ResponsesRequest>(std::move(parsed));
  with_model(
      ctx, name, r,
      [&ctx, store, r, job_req, previous, waiting](ModelRef m) {
        if (waiting) *waiting = false;
        std::make_shared<ResponsesJob>(ctx, std::move(m), store, r, std::move(*job_req), previous)
            ->start(waiting != nullptr);
      },
      [r, waiting](const ApiError& e) {
        if (!waiting) return reply_error(*r, e);
        *waiting = false;
        stream_error(*r, e);
      });
}

}  // namespace

void add_responses_routes(Router& router, ServerContext& ctx,
                          std::shared_ptr<ResponseStore> store) {
  if (!store) store = std::make_shared<ResponseStore>();
  router.add(http::verb::post, "/v1/responses",
             [&ctx, store](HttpRequest&& req, std::shared_ptr<Responder> r) {
               create(ctx, store, std::move(req), std::move(r));
             });
  // GET /v1/responses/{id}: a stored response (not a replayed stream); .../input_items: its input.
  router.add_prefix(http::verb::get, kPrefix,
                    [store](HttpRequest&& req, std::shared_ptr<Responder> r) {
                      std::string id = target_path(req).substr(std::strlen(kPrefix));
                      constexpr std::string_view kItems = "/input_items";
                      if (id.ends_with(kItems)) {
                        id.resize(id.size() - kItems.size());
                        auto stored = store->get(id);
                        if (!stored) return reply_error(*r, response_not_found(id));
                        return list_input_items(*stored, req, *r);
                      }
                      if (query_param(req, "stream") == "true")
                        return reply_error(*r, ApiError::unsupported("stream", "'stream' on GET"));
                      auto stored = store->get(id);
                      if (!stored) return reply_error(*r, response_not_found(id));
                      reply_json(*r, 200, stored->response);
                    });
  router.add_prefix(http::verb::delete_, kPrefix,
                    [store](HttpRequest&& req, std::shared_ptr<Responder> r) {
                      const std::string id = target_path(req).substr(std::strlen(kPrefix));
                      if (!store->erase(id)) return reply_error(*r, response_not_found(id));
                      reply_json(*r, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
                    });
}

}  // namespace ponder::server
