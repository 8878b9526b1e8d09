// A request body as the OpenAI, Ollama and Anthropic routes see it: JSON parsing, the schemas of
// /v1/chat/completions, /v1/completions, /api/chat, /api/generate, /v1/messages and
// /v1/messages/count_tokens with their validation (the first byte picks one: 0 completion, 1 chat,
// 2 Ollama generate, 3 Ollama chat, 4 Anthropic messages, 5 Anthropic count_tokens), the routing
// key, the chat template and tokenization of what passed. Any input is accepted or refused (an
// ApiError naming a status in 400-499, an Ollama message), never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_common.h"
#include "server/anthropic/anthropic_protocol.h"
#include "server/common/route_key.h"
#include "server/ollama/ollama_protocol.h"
#include "server/openai/openai_protocol.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] & 7;
  const bool chat = (mode & 1) != 0;
  const nlohmann::json body = nlohmann::json::parse(data + 1, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  ponder::server::GenerationRequest g;
  const ponder::server::ServingDefaults defaults;
  if (mode >= 4) {
    auto e = ponder::server::parse_messages_request(body, defaults, chat, &g);
    if (e) {
      if (e->status < 400 || e->status > 499) std::abort();
      return 0;
    }
  } else if (mode >= 2) {
    ponder::server::OllamaRequest extra;
    auto e = ponder::server::parse_ollama_request(body, defaults, chat, &g, &extra);
    if (e) {
      if (e->empty()) std::abort();  // a refusal says why
      return 0;
    }
  } else {
    auto e = chat ? ponder::server::parse_chat_request(body, defaults, &g)
                  : ponder::server::parse_completion_request(body, defaults, &g);
    if (e) {
      if (e->status < 400 || e->status > 499) std::abort();
      return 0;
    }
  }
  (void)ponder::server::route_key(g);
  static const auto tmpl = ponder::text::ChatTemplate::from_name("deepseek-r1");
  const ponder::text::Tokenizer& tok = ponder::fuzz::tokenizer();
  if (g.chat) {
    auto segments = tmpl->render(g.messages, true);
    if (segments.has_value()) (void)ponder::text::tokenize_chat(tok, *segments);
  } else if (g.prompt_tokens.empty()) {
    (void)tok.encode(g.prompt, true);
  }
  return 0;
}
