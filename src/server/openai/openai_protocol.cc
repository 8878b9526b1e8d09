#include "server/openai/openai_protocol.h"

#include <fmt/core.h>

#include "server/common/field_policy.h"
#include "server/common/field_reader.h"
#include "server/common/request_fields.h"
#include "server/openai/openai_tools.h"

namespace ponder::server {

using nlohmann::json;

namespace {

constexpr int32_t kMaxChoices = 16;

}  // namespace

// The fields of the chat and completions routes (OpenAI's, and the extensions of llama-server and
// vLLM that clients of those servers send), each honoured, fixed or refused (field_policy.h).
namespace {

FieldPolicy make_openai_policy(bool chat) {
  FieldPolicy p;
  p.honoured = {"model",
                "temperature",
                "top_p",
                "top_k",
                "min_p",
                "presence_penalty",
                "frequency_penalty",
                "repeat_penalty",
                "repetition_penalty",
                "repeat_last_n",
                "seed",
                "stop",
                "logit_bias",
                "max_tokens",
                "max_completion_tokens",
                "n_predict",
                "n",
                "n_keep",
                "stream",
                "stream_options",
                "ignore_eos",
                "cache",
                "cache_prompt",
                "return_progress",
                "user",
                "safety_identifier",
                "prompt_cache_key",
                "reasoning_format",
                "reasoning_effort",
                "reasoning_budget",
                "response_format",
                "grammar",
                "json_schema",
                "logprobs",
                "metadata",
                "service_tier",
                "modalities",
                "chat_template_kwargs",
                "thinking",
                "user_id"};
  if (chat) {
    for (std::string_view n :
         {"messages", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls"})
      p.honoured.push_back(n);
  } else {
    for (std::string_view n : {"prompt", "echo", "suffix", "best_of", "tools", "tool_choice"})
      p.honoured.push_back(n);
  }
  p.fixed = {{"store", false, "Ponder keeps no completions"},
             {"verbosity", "medium", "the answer's length is the model's"},
             {"typical_p", 1, "typical sampling is not implemented"},
             {"tfs_z", 1, "tail-free sampling is not implemented"},
             {"mirostat", 0, "mirostat sampling is not implemented"},
             {"dynatemp_range", 0, "dynamic temperature is not implemented"},
             {"xtc_probability", 0, "XTC sampling is not implemented"},
             {"dry_multiplier", 0, "DRY sampling is not implemented"},
             {"penalize_nl", false, "newlines are penalized like any token only by repeat_penalty"},
             {"min_tokens", 0, "a minimum length is not implemented"},
             {"use_beam_search", false, "beam search is not implemented"},
             {"skip_special_tokens", true, "special tokens are never written into the text"},
             {"include_stop_str_in_output", false, "stop strings are not written"},
             {"add_generation_prompt", true, "the assistant's turn is always opened"},
             {"continue_final_message", false, "a final assistant message is a finished turn"},
             {"id_slot", -1, "any request may use the whole context: Ponder has no slots"}};
  if (chat) {
    p.fixed.push_back({"echo", false, "the prompt is not repeated"});
    p.fixed.push_back({"best_of", 1, "one sample is drawn per choice"});
  }
  p.refused = {{"audio", "Ponder answers in text"},
               {"prediction", "predicted outputs are not implemented"},
               {"web_search_options", "Ponder has no web search"},
               {"functions", "deprecated: send 'tools'"},
               {"function_call", "deprecated: send 'tool_choice'"},
               {"samplers", "the sampler order is fixed"},
               {"n_probs", "send 'logprobs' and 'top_logprobs'"},
               {"post_sampling_probs", "logprobs are the model's, before sampling"},
               {"stop_token_ids", "send 'stop' strings"},
               {"t_max_predict_ms", "send 'max_tokens'"},
               {"lora", "adapters are not implemented"},
               {"guided_json", "send 'response_format' with a json_schema"},
               {"guided_regex", "send 'grammar' (GBNF)"},
               {"guided_choice", "send 'grammar' (GBNF)"},
               {"guided_grammar", "send 'grammar' (GBNF)"}};
  return p;
}

}  // namespace

const FieldPolicy& openai_field_policy(bool chat) {
  static const FieldPolicy chat_policy = make_openai_policy(true);
  static const FieldPolicy completion_policy = make_openai_policy(false);
  return chat ? chat_policy : completion_policy;
}

namespace {

// Fields whose values the policy cannot say by one fixed value.
void read_accepted(FieldReader& f, const json& body, GenerationRequest* out) {
  if (body.contains("modalities") && body["modalities"].is_array()) {
    for (const auto& m : body["modalities"]) {
      if (m != "text")
        f.fail(ApiError::unsupported("modalities", "an output modality other than text"));
    }
  }
  if (auto v = f.string("service_tier"); v && *v != "auto" && *v != "default") {
    f.fail(ApiError::unsupported(
        "service_tier", fmt::format("'service_tier' = '{}' (one tier: auto or default)", *v)));
  }
  f.string("model");  // one model is served: any name is answered by it (docs/server.md)
  if (f.has("metadata") && !body["metadata"].is_object())
    f.fail(ApiError::bad_request("'metadata' must be an object", "metadata"));
  f.boolean("cache_prompt");  // the prefix cache is always on: checked, nothing to do
  for (const char* name : {"safety_identifier", "user_id"}) {  // OpenAI's newer, DeepSeek's
    if (auto v = f.string(name); v && out->user.empty()) out->user = *v;
  }
  // DeepSeek's thinking switch: {"type": "enabled" | "disabled"}.
  if (f.has("thinking")) {
    const json& t = body["thinking"];
    const json* type = t.is_object() ? &t["type"] : nullptr;
    if (type == nullptr || (*type != "enabled" && *type != "disabled" && *type != "adaptive")) {
      return f.fail(ApiError::bad_request(
          "'thinking' must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}", "thinking"));
    }
    if (*type == "disabled") out->thinking = false;
  }
  // llama-server's chat_template_kwargs: enable_thinking false answers without thinking.
  if (f.has("chat_template_kwargs")) {
    const json& k = body["chat_template_kwargs"];
    if (!k.is_object()) {
      return f.fail(ApiError::bad_request("'chat_template_kwargs' must be an object",
                                          "chat_template_kwargs"));
    }
    for (const auto& [name, value] : k.items()) {
      if (name == "enable_thinking" && value.is_boolean()) {
        out->thinking = out->thinking && value.get<bool>();
      } else {
        return f.fail(ApiError::unsupported(
            "chat_template_kwargs",
            fmt::format("'chat_template_kwargs.{}' (the template takes enable_thinking, a "
                        "boolean)",
                        name)));
      }
    }
  }
}

// logit_bias: {"token id": bias}; -100 or less bans the token (OpenAI's convention).
void read_logit_bias(FieldReader& f, const json& body, SamplerParams* s) {
  if (!f.has("logit_bias")) return;
  const json& lb = body["logit_bias"];
  if (!lb.is_object()) {
    return f.fail(
        ApiError::bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias"));
  }
  {
    {
      for (const auto& [key, value] : lb.items()) {
        char* end = nullptr;
        const long id = std::strtol(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX || !value.is_number()) {
          f.fail(ApiError::bad_request(
              fmt::format("'logit_bias' entry '{}' must map a token id to a number", key),
              "logit_bias"));
          break;
        }
        const double b = value.get<double>();
        if (b < -100 || b > 100) {
          f.fail(ApiError::bad_request(
              fmt::format("'logit_bias' of token {} is {}; it must be between -100 and 100", id, b),
              "logit_bias"));
          break;
        }
        s->logit_bias.push_back(
            {static_cast<int32_t>(id), b <= -100 ? -INFINITY : static_cast<float>(b)});
      }
    }
  }
}

void read_common(FieldReader& f, const json& body, const ServingDefaults& defaults,
                 GenerationRequest* out) {
  out->options.sampling = defaults.sampling;
  out->options.max_tokens = defaults.max_tokens;
  out->options.reasoning_budget = defaults.reasoning_budget;
  // reasoning_effort (OpenAI's, DeepSeek's reasoning models): a budget, or no thinking phase.
  if (auto v = f.string("reasoning_effort"); v && !apply_reasoning_effort(*v, defaults, out)) {
    f.fail(ApiError::bad_request(
        fmt::format(
            "'reasoning_effort' is '{}'; it must be none, minimal, low, medium, high, xhigh or max",
            *v),
        "reasoning_effort"));
  }
  if (auto v = f.integer("reasoning_budget", -1, 1 << 24)) {
    if (f.has("reasoning_effort"))
      f.fail(ApiError::bad_request("send only one of 'reasoning_effort' and 'reasoning_budget'",
                                   "reasoning_budget"));
    out->options.reasoning_budget = static_cast<int32_t>(*v);
  }
  out->seed_given = read_sampling(f, &out->options);
  read_logit_bias(f, body, &out->options.sampling);
  // max_completion_tokens (newer) and max_tokens (older) both count thinking and answer.
  for (const char* name : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (auto v = f.integer(name, 1, 1 << 24)) {
      out->options.max_tokens = defaults.max_tokens > 0 ? std::min<int32_t>(*v, defaults.max_tokens)
                                                        : static_cast<int32_t>(*v);
    }
  }
  if (auto v = f.integer("n", 1, kMaxChoices)) out->n = static_cast<int32_t>(*v);
  if (auto v = f.integer("n_keep", -1, 1 << 24))
    out->options.n_keep = static_cast<int32_t>(*v);  // llama.cpp's
  if (auto v = f.boolean("stream")) out->stream = *v;
  if (f.has("stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) {
      f.fail(ApiError::bad_request("'stream_options' must be an object", "stream_options"));
    } else {
      FieldReader s(so);
      if (auto v = s.boolean("include_usage")) out->include_usage = *v;
      if (!s.ok()) f.fail(s.error());
    }
  }
  if (auto v = f.boolean("ignore_eos")) out->options.stop_at_eog = !*v;
  if (auto v = f.boolean("cache")) out->cache = *v;
  if (auto v = f.boolean("return_progress")) out->return_progress = *v;
  if (auto v = f.string("user")) out->user = *v;
  if (auto v = f.string("prompt_cache_key")) out->prompt_cache_key = *v;
  if (auto v = f.string("reasoning_format")) {
    if (*v == "none") {
      out->split_reasoning = false;
    } else if (*v == "deepseek" || *v == "auto" || *v == "deepseek-legacy") {
      out->split_reasoning = true;
    } else {
      f.fail(ApiError::bad_request(
          fmt::format("'reasoning_format' is '{}'; it must be none or deepseek", *v),
          "reasoning_format"));
    }
  }
  const FieldPolicy& policy = openai_field_policy(out->chat);
  policy.check(f, body);
  read_accepted(f, body, out);
  out->ignored_fields = policy.unknown(body);
  read_constraint(f, body, out);
}

std::optional<std::string> message_content(FieldReader& f, const json& m, size_t i,
                                           const std::string& role) {
  const std::string where = fmt::format("messages[{}].content", i);
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    if (role == "assistant") return std::string();  // OpenAI's assistant turns may omit it
    f.fail(ApiError::bad_request(fmt::format("'{}' is required for a {} message", where, role),
                                 where));
    return std::nullopt;
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    f.fail(
        ApiError::bad_request(fmt::format("'{}' must be a string or an array of text parts, not {}",
                                          where, json_type_name(*it)),
                              where));
    return std::nullopt;
  }
  std::string text;
  for (const auto& part : *it) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      f.fail(ApiError::bad_request(
          fmt::format("each part of '{}' must be an object with a 'type'", where), where));
      return std::nullopt;
    }
    if (part["type"] != "text") {
      f.fail(ApiError::unsupported(
          where, fmt::format("a content part of type '{}'", part["type"].get<std::string>())));
      return std::nullopt;
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      f.fail(ApiError::bad_request(fmt::format("a text part of '{}' needs a string 'text'", where),
                                   where));
      return std::nullopt;
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

std::optional<ApiError> parse_chat_request(const json& body, const ServingDefaults& defaults,
                                           GenerationRequest* out) {
  if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  FieldReader f(body);
  out->chat = true;
  read_common(f, body, defaults, out);
  if (auto lp = f.boolean("logprobs"); lp && *lp) out->n_logprobs = 0;
  if (auto k = f.integer("top_logprobs", 0, 20)) {
    if (out->n_logprobs < 0) {
      f.fail(ApiError::bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs"));
    } else {
      out->n_logprobs = static_cast<int32_t>(*k);
    }
  }
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array()) {
    f.fail(ApiError::bad_request("'messages' must be an array of messages", "messages"));
  } else if (it->empty()) {
    f.fail(ApiError::bad_request("'messages' is empty", "messages"));
  } else {
    for (size_t i = 0; i < it->size() && f.ok(); ++i) {
      const json& m = (*it)[i];
      const std::string where = fmt::format("messages[{}]", i);
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        f.fail(ApiError::bad_request(
            fmt::format("'{}' must be an object with a string 'role'", where), where + ".role"));
        break;
      }
      std::string role = m["role"].get<std::string>();
      if (role == "developer") role = "system";
      if (role == "function") {
        f.fail(
            ApiError::unsupported(where + ".role", "the deprecated role 'function' (send 'tool')"));
        break;
      }
      if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
        f.fail(ApiError::bad_request(
            fmt::format("'{}.role' is '{}'; it must be system, developer, user, assistant or tool",
                        where, role),
            where + ".role"));
        break;
      }
      text::ChatMessage msg{role, ""};
      if (!read_message_tool_calls(f, m, where, &msg)) break;
      if (role == "tool") {
        if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string()) {
          f.fail(ApiError::bad_request(
              fmt::format("'{}.tool_call_id' is required for a tool message", where),
              where + ".tool_call_id"));
          break;
        }
        msg.tool_call_id = m["tool_call_id"].get<std::string>();
      }
      const bool may_be_empty = role == "assistant" || !msg.tool_calls.empty();
      auto content = message_content(f, m, i, may_be_empty ? "assistant" : role);
      if (!content) break;
      msg.content = std::move(*content);
      out->messages.push_back(std::move(msg));
    }
  }
  if (f.ok()) read_tools(f, body, out);
  if (!f.ok()) return f.error();
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(const json& body, const ServingDefaults& defaults,
                                                 GenerationRequest* out) {
  if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  FieldReader f(body);
  out->chat = false;
  out->split_reasoning = false;  // a raw prompt: the text comes back as generated
  read_common(f, body, defaults, out);
  if (auto k = f.integer("logprobs", 0, 5)) out->n_logprobs = static_cast<int32_t>(*k);
  if (auto echo = f.boolean("echo"); echo && *echo) f.fail(ApiError::unsupported("echo", "'echo'"));
  if (f.has("suffix")) f.fail(ApiError::unsupported("suffix", "'suffix'"));
  for (const char* name : {"tools", "tool_choice"}) {
    if (f.has(name))
      f.fail(ApiError::unsupported(
          name, fmt::format("'{}' on completions (the chat route has them)", name)));
  }
  if (f.has("best_of") && body["best_of"] != 1)
    f.fail(ApiError::unsupported("best_of", "'best_of' other than 1"));
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    f.fail(ApiError::bad_request("'prompt' is required", "prompt"));
  } else if (it->is_string()) {
    out->prompt = it->get<std::string>();
  } else if (it->is_array() && !it->empty() && (*it)[0].is_string()) {
    if (it->size() > 1)
      f.fail(ApiError::unsupported("prompt", "more than one prompt per request"));
    else
      out->prompt = (*it)[0].get<std::string>();
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    for (const auto& t : *it) {
      if (!t.is_number_integer()) {
        f.fail(
            ApiError::bad_request("'prompt' must be a string or an array of token ids", "prompt"));
        break;
      }
      out->prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  } else {
    f.fail(ApiError::bad_request("'prompt' must be a string or an array of token ids", "prompt"));
  }
  if (!f.ok()) return f.error();
  if (out->prompt.empty() && out->prompt_tokens.empty())
    return ApiError::bad_request("'prompt' is empty", "prompt");
  return std::nullopt;
}

json Usage::to_json() const {
  json u = {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}},
            // DeepSeek's names (the AI SDK's deepseek provider reads them)
            {"prompt_cache_hit_tokens", cached_tokens},
            {"prompt_cache_miss_tokens", prompt_tokens - cached_tokens},
            {"completion_tokens_details", {{"reasoning_tokens", reasoning_tokens}}}};
  if (drafted_tokens > 0) {
    u["completion_tokens_details"]["accepted_prediction_tokens"] = draft_accepted_tokens;
    u["completion_tokens_details"]["rejected_prediction_tokens"] =
        drafted_tokens - draft_accepted_tokens;
  }
  if (response_cached) u["response_cached"] = true;
  if (!response_cached_question.empty()) u["response_cached_question"] = response_cached_question;
  return u;
}

namespace {
json token_bytes(const std::string& b) {
  json a = json::array();
  for (unsigned char c : b) a.push_back(static_cast<int>(c));
  return a;
}
}  // namespace

json chat_logprob_entry(const text::Tokenizer& tok, const EngineEvent& ev) {
  const std::string& b = tok.token_to_bytes(ev.token);
  json top = json::array();
  for (const TokenLogprob& t : ev.top_logprobs) {
    const std::string& tb = tok.token_to_bytes(t.token);
    top.push_back({{"token", tb}, {"logprob", t.logprob}, {"bytes", token_bytes(tb)}});
  }
  return {{"token", b}, {"logprob", ev.logprob}, {"bytes", token_bytes(b)}, {"top_logprobs", top}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace ponder::server
