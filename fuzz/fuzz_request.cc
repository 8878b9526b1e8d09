// A request body as the OpenAI routes see it: JSON parsing, the chat and completion schemas with
// their validation, the routing key, the chat template and tokenization of what passed. Any
// input is accepted or refused with an ApiError naming a status in 400-499, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_common.h"
#include "server/openai_protocol.h"
#include "server/route_key.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const nlohmann::json body = nlohmann::json::parse(data + 1, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  ponder::server::GenerationRequest g;
  const ponder::server::ServingDefaults defaults;
  auto e = chat ? ponder::server::parse_chat_request(body, defaults, &g) : ponder::server::parse_completion_request(body, defaults, &g);
  if (e) {
    if (e->status < 400 || e->status > 499) std::abort();
    return 0;
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
