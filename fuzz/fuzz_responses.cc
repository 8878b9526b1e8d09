// A request body as POST /v1/responses sees it: JSON parsing, the Responses schema with its
// validation (input items, tools, text.format, reasoning, previous_response_id and item_reference
// resolved against one stored conversation), the chat template and tokenization of what passed. Any
// input is accepted or refused with a 400, never a crash. The first byte also splits the `input`
// string, fed to ResponseOutput as an answer with tools in two pieces: the items must equal those
// of the answer fed whole.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_common.h"
#include "server/responses/response_output.h"
#include "server/responses/responses_protocol.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const nlohmann::json body = nlohmann::json::parse(data + 1, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  static const nlohmann::json earlier = nlohmann::json::parse(R"([
    {"type": "message", "role": "user", "content": "Weather?"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": "{}"}])");
  const ponder::server::ConversationLookup lookup =
      [](const std::string& id) -> std::optional<nlohmann::json> {
    if (id == "resp_1") return earlier;
    return std::nullopt;
  };
  ponder::server::ResponsesRequest r;
  const ponder::server::ServingDefaults defaults;
  const ponder::server::ItemLookup find_item =
      [](const std::string& id) -> std::optional<nlohmann::json> {
    if (id == "fc_1") return earlier[1];
    return std::nullopt;
  };
  if (auto e = ponder::server::parse_responses_request(body, defaults, lookup, &r, find_item)) {
    if (e->status != 400 || e->message.empty()) std::abort();
    return 0;
  }
  static const auto tmpl = ponder::text::ChatTemplate::from_name("deepseek-r1");
  auto segments = tmpl->render(r.g.messages, true);
  if (segments.has_value()) (void)ponder::text::tokenize_chat(ponder::fuzz::tokenizer(), *segments);
  if (body.contains("input") && body["input"].is_string()) {
    const std::string answer = body["input"].get<std::string>();
    const size_t cut = answer.empty() ? 0 : data[0] % (answer.size() + 1);
    ponder::server::ResponseOutput whole("a", true), split("a", true);
    whole.content(answer);
    whole.finish(true);
    split.content(std::string_view(answer).substr(0, cut));
    split.content(std::string_view(answer).substr(cut));
    split.finish(true);
    if (whole.items() != split.items()) std::abort();
  }
  return 0;
}
