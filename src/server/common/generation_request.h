// GenerationRequest: what any API family (OpenAI, llama.cpp, Ollama) asks of the engine once its
// JSON is parsed and checked: the messages or the raw prompt, the generation options, and how
// the answer is to be sent back. ServingDefaults: what a request that omits a field gets (the
// model card's sampling for R1, the server's -n).
// Depends on runtime/request.h and text/chat_template.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/request.h"
#include "text/chat_template.h"

namespace ponder::server {

// The thinking budgets that the reasoning efforts of the APIs stand for (OpenAI's reasoning_effort
// and reasoning.effort, Ollama's think "low" | "medium" | "high"); -1: no limit. "minimal" /
// "none" / think false turn the thinking off instead. --effort-budgets sets them.
struct EffortBudgets {
  int32_t low = 512;
  int32_t medium = 2048;
  int32_t high = -1;
};

struct ServingDefaults {
  SamplerParams sampling;  // temperature 0.6, top_p 0.95 (DeepSeek-R1's card) unless flags say
  int32_t max_tokens = 0;  // 0: up to the context (the server's -n caps every request)
  int32_t reasoning_budget = -1;  // --reasoning-budget: thinking tokens before the answer is forced
  EffortBudgets efforts;
};

struct GenerationRequest {
  bool chat = true;
  std::vector<text::ChatMessage> messages;  // chat
  std::string prompt;                       // completion: text (special tokens parsed)
  std::vector<int32_t> prompt_tokens;       // completion: ids given directly
  GenerateOptions options;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t n_logprobs = -1;     // -1 none, 0 the chosen token's, k: and the top k
  bool cache = true;           // may be answered from / stored in the response cache
  bool seed_given = false;     // the client chose the seed (else the server draws one)
  bool return_progress =
      false;                    // llama.cpp's: prompt_progress chunks while the prompt is processed
  bool split_reasoning = true;  // R1: thinking apart from the answer (reasoning_format deepseek)
  // R1: false answers without a thinking phase: the prompt closes an empty thinking
  // ("<think>\n\n</think>\n\n", what R1's template writes for a turn without thoughts), so the
  // answer's first token comes at once (Ollama think false, reasoning effort minimal / none).
  bool thinking = true;
  std::string user;
  std::string prompt_cache_key;  // OpenAI's field (server/common/route_key.h)
  std::string conversation_id;   // the X-Conversation-Id header (server/common/route_key.h)
  // Constrained decoding: the GBNF the answer must follow ("" none), built from whichever field
  // asked for it (response_format, grammar, json_schema, format, tools), named for errors.
  std::string grammar;
  std::string grammar_field;
  bool tool_calls = false;  // tools were offered: the answer is read for R1's tool calls
  // A context smaller than the server's for this request (Ollama's options.num_ctx; 0: the
  // server's): the prompt must fit in it, and the generation stops at it.
  int32_t context_limit = 0;
  std::string context_limit_field;
  // Fields the route does not know and its API lets it ignore (field_policy.h): named in the
  // answer's X-Ponder-Ignored-Fields header.
  std::vector<std::string> ignored_fields;
};

}  // namespace ponder::server
