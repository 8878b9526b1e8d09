#include "server/common/generation_service.h"

#include <fmt/core.h>

#include "base/log.h"
#include "server/common/field_policy.h"
#include "server/common/ids.h"

namespace ponder::server {

std::string ignored_fields_note(const GenerationRequest& g) {
  std::string names = join_names(g.ignored_fields);
  log_info("server: fields this route does not know, ignored: {}", names);
  return names;
}

nlohmann::json prompt_progress(const EngineEvent& ev) {
  return {{"total", ev.stats.n_prompt},
          {"cache", ev.stats.n_reused},
          {"processed", ev.prompt_done},
          {"time_ms", ev.stats.prompt_s * 1000}};
}

std::optional<ApiError> prompt_tokens(const ModelContext& m, const GenerationRequest& g,
                                      std::vector<int32_t>* out, bool* opens_thinking) {
  if (g.chat) {
    auto segments = m.chat_template.render(g.messages, true);
    if (!segments.has_value())
      return ApiError::bad_request(segments.status().message(), "messages");
    bool opens = text::prompt_opens_thinking(*segments);
    if (opens && !g.thinking) {
      segments->push_back({std::string(text::kEmptyThinkingClose), true});
      opens = false;
    }
    *out = text::tokenize_chat(m.tokenizer, *segments);
    if (opens_thinking) *opens_thinking = opens;
  } else if (!g.prompt_tokens.empty()) {
    *out = g.prompt_tokens;
  } else {
    *out = m.tokenizer.encode(g.prompt, true);
    if (m.tokenizer.add_bos() && m.tokenizer.bos() >= 0)
      out->insert(out->begin(), m.tokenizer.bos());
  }
  if (out->empty())
    return ApiError::bad_request("the prompt is empty", g.chat ? "messages" : "prompt");
  return std::nullopt;  // token ids and the context: Engine::submit checks them, once
}

std::optional<ApiError> submit_generation(ServerContext& ctx, const ModelRef& m,
                                          const GenerationRequest& g, Responder& r,
                                          std::function<void(EngineEvent&&)> on_event,
                                          Submission* out) {
  if (ctx.draining.load()) return ApiError::busy("the server is shutting down");
  EngineRequest req;
  bool opens_thinking = false;
  if (auto e = prompt_tokens(*m, g, &req.prompt, &opens_thinking)) return e;
  const int64_t n_prompt = static_cast<int64_t>(req.prompt.size());
  req.options = g.options;
  if (g.context_limit > 0) {
    const std::string& field = g.context_limit_field;
    if (g.context_limit > m->engine.max_context()) {
      return ApiError::bad_request(
          fmt::format("'{}' is {}; this server's context is {} tokens (ponder serve -c)", field,
                      g.context_limit, m->engine.max_context()),
          field);
    }
    if (n_prompt >= g.context_limit) {
      ApiError e = ApiError::bad_request(
          fmt::format("the prompt has {} tokens; '{}' is {}", n_prompt, field, g.context_limit),
          field);
      e.code = "context_length_exceeded";
      return e;
    }
    const int32_t room = g.context_limit - static_cast<int32_t>(n_prompt);
    if (req.options.max_tokens <= 0 || req.options.max_tokens > room) req.options.max_tokens = room;
  }
  req.starts_in_thinking = g.chat && m->r1() && opens_thinking;
  req.split_reasoning = g.split_reasoning;
  req.n_choices = g.n;
  req.n_logprobs = g.n_logprobs;
  req.report_progress = g.return_progress && g.stream;
  if (!g.grammar.empty()) {
    grammar::CompileOptions o;
    o.leading_newlines = req.starts_in_thinking ? 2 : 0;  // R1's blank line after </think>
    auto compiled = m->grammars.get(g.grammar, o);
    if (!compiled.has_value()) {
      return ApiError::bad_request(
          fmt::format("'{}': {}", g.grammar_field, compiled.status().message()), g.grammar_field);
    }
    req.options.grammar = *compiled;
  }
  auto post = ctx.post;
  std::string key, context, question;
  if (ctx.cache != nullptr && g.cache) {
    // normalized / similar: a text question is keyed apart from the conversation before it.
    const bool text =
        g.chat ? !g.messages.empty() && g.messages.back().role == "user" : g.prompt_tokens.empty();
    std::string earlier;
    const bool by_question = ctx.cache->match() != CacheMatch::kExact && text;
    if (by_question && g.chat) {
      for (size_t i = 0; i + 1 < g.messages.size(); ++i) {
        earlier += g.messages[i].role + ": " + normalize_question(g.messages[i].content) + "\n";
        for (const text::ChatToolCall& c : g.messages[i].tool_calls)
          earlier += "call " + c.name + " " + c.arguments + "\n";
      }
    }
    const std::string& q = g.chat ? g.messages.back().content : g.prompt;
    CacheKeys keys = response_cache_keys(
        m->fingerprint, req, g.seed_given, m->numerics, m->engine.config().context_shift,
        by_question ? &earlier : nullptr, by_question ? &q : nullptr);
    key = std::move(keys.key);
    context = std::move(keys.context);
    question = std::move(keys.question);
  }
  if (!key.empty()) {
    std::optional<std::vector<EngineEvent>> events = ctx.cache->lookup(key);
    if (!events && ctx.cache->match() == CacheMatch::kSimilar && !context.empty()) {
      events = ctx.cache->lookup_similar(context, question, &out->cache_question);
    }
    if (events) {
      // A hit replays the stored events through the same path as a fresh answer.
      for (EngineEvent& ev : *events) {
        if (ev.kind == EngineEvent::Kind::kDone) {
          ev.stats.from_response_cache = true;
          ev.stats.n_reused = ev.stats.n_prompt;
        }
        post([on_event, ev = std::move(ev)]() mutable { on_event(std::move(ev)); });
      }
      out->n_prompt = static_cast<int32_t>(n_prompt);
      out->cache = "hit";
      return std::nullopt;
    }
    out->cache = "miss";
    // Record the answer; store it once every choice ended by stop or length.
    struct Recording {
      std::vector<EngineEvent> events;
      int32_t left = 0;
      bool storable = true;
    };
    auto rec = std::make_shared<Recording>();
    rec->left = g.n;
    ResponseCache* cache = ctx.cache;
    on_event = [on_event = std::move(on_event), rec, cache, key, context,
                question](EngineEvent&& ev) {
      if (ev.kind != EngineEvent::Kind::kProgress)
        rec->events.push_back(ev);  // progress is not the answer
      if (ev.kind == EngineEvent::Kind::kDone) {
        // An answer forced by "answer now" is not what the request asks for: never stored. (A
        // budget is part of the key, so a budget's cut answer is.)
        const bool clicked = ev.stats.thinking_cut_on_request;
        rec->storable &= ev.error.empty() && !clicked &&
                         (ev.stats.finish_reason == "stop" || ev.stats.finish_reason == "length");
        if (--rec->left == 0 && rec->storable) cache->store(key, rec->events, context, question);
      }
      on_event(std::move(ev));
    };
  }
  // The request's own times, for /metrics (a replayed answer took none).
  on_event = [on_event = std::move(on_event), &ctx](EngineEvent&& ev) {
    if (ev.kind == EngineEvent::Kind::kDone && ev.error.empty()) {
      ctx.times_total.add(ev.stats);
      ctx.times_since_scrape.add(ev.stats);
    }
    on_event(std::move(ev));
  };
  if (!g.seed_given) req.options.sampling.seed = random_u64();
  req.sink = [post, on_event = std::move(on_event)](EngineEvent&& ev) {
    post([on_event, ev = std::move(ev)]() mutable { on_event(std::move(ev)); });
  };
  auto id = m->engine.submit(std::move(req));
  if (!id.has_value()) {
    const Status& st = id.status();
    switch (st.kind()) {
      case StatusKind::kBusy:
        return ApiError::busy(st.message());
      case StatusKind::kTooLong: {
        ApiError e = ApiError::bad_request(st.message(), g.chat ? "messages" : "prompt");
        e.code = "context_length_exceeded";
        return e;
      }
      case StatusKind::kInvalidInput:
      case StatusKind::kFailed:
        break;
    }
    // Invalid input the parsers could not see: token ids given directly, or a bias on an absent id.
    return ApiError::bad_request(st.message(), g.prompt_tokens.empty() ? "" : "prompt");
  }
  out->id = *id;
  out->n_prompt = static_cast<int32_t>(n_prompt);
  // A weak ref: the callback may outlive the request, and must not keep its model loaded.
  const std::weak_ptr<ModelContext> model = m;
  const uint64_t rid = *id;
  r.on_disconnect([model, rid] {
    if (ModelRef live = model.lock()) live->engine.cancel(rid);
  });
  return std::nullopt;
}

}  // namespace ponder::server
