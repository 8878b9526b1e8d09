// ChatTemplate: renders a conversation into the prompt text a model was trained on, natively (no
// Jinja engine). Two families:
//   deepseek-r1  the DeepSeek-R1-Distill template: BOS, the system prompt, <｜User｜> turns,
//                <｜Assistant｜> turns with their thinking (everything up to the last </think>)
//                removed and each closed by <｜end▁of▁sentence｜>, and the generation prompt
//                "<｜Assistant｜><think>\n" (so the model's output starts inside its thinking);
//                role "tool" outputs and assistant tool calls in R1's plain-text markers
//                (<｜tool▁calls▁begin｜>..., docs/tool-calls.md), which are not special tokens
//                of the R1-Distill-Qwen vocabulary;
//   chatml       <|im_start|>role\ncontent<|im_end|>\n (Qwen2.5 instruct), no default system.
// The output is a list of segments that say which text comes from the template and which from
// the messages, so that tokenize_chat() parses special tokens only in template text: a user who
// types "<｜Assistant｜>" gets plain-text tokens, never the control token.
// Depends on text/tokenizer.h and gguf.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "text/tokenizer.h"

namespace ponder::text {

// A function call an assistant made (OpenAI's message.tool_calls[i].function).
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text, written as given
  std::string id = {};    // the API's call id (a tool result names it); not written into the prompt
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" ("tool" for deepseek-r1)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant messages, deepseek-r1 only
  std::string tool_call_id = {};              // role "tool": the call it answers (API checks only)
};

struct ChatSegment {
  std::string text;
  bool is_template = false;  // true: written by the template, special tokens are parsed
};

enum class ChatFormat { kDeepSeekR1, kChatML };

class ChatTemplate {
 public:
  // "deepseek-r1" (also "deepseek-r1-qwen", "deepseek3") or "chatml" (also "qwen2", "qwen2.5").
  static Expected<ChatTemplate> from_name(std::string_view name);
  // Recognises the family from the Jinja text of tokenizer.chat_template.
  static Expected<ChatTemplate> detect(std::string_view jinja);
  // override_name if it is not empty, else the file's tokenizer.chat_template.
  static Expected<ChatTemplate> for_model(const GgufFile& file, std::string_view override_name);

  ChatFormat format() const { return format_; }
  const char* name() const;

  // Fails on a role the template does not know, and on tool_calls in a message that is not the
  // assistant's or in a chatml conversation (its tool format is not implemented).
  Expected<std::vector<ChatSegment>> render(const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt) const;

 private:
  explicit ChatTemplate(ChatFormat f) : format_(f) {}
  Status render_r1(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                   std::vector<ChatSegment>* out) const;
  Status render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                       std::vector<ChatSegment>* out) const;

  ChatFormat format_;
};

// The prompt as one string (what the Jinja template would produce).
std::string join_segments(const std::vector<ChatSegment>& segments);

// True when the rendered prompt ends inside <think> (the template wrote "<think>\n" last): the
// model's output starts with its thinking and the answer begins after its "</think>". False
// without a generation prompt, for chatml, and for deepseek-r1 after tool outputs, where R1's
// Jinja writes no generation prompt: the prompt ends with <｜tool▁outputs▁end｜> and the model
// continues its turn from there, with or without opening <think> itself.
bool prompt_opens_thinking(const std::vector<ChatSegment>& segments);

// What closes an opened thinking at once, for a turn without thoughts: after the generation
// prompt's "<think>\n" it makes "<think>\n\n</think>\n\n" (how R1's template writes an
// assistant turn whose thinking is empty), and the model's output starts with the answer.
inline constexpr std::string_view kEmptyThinkingClose = "\n</think>\n\n";

// Token ids of a rendered chat: added tokens are recognised in template segments only. Text
// between two added tokens is encoded as one stretch even when it spans segments, so the result
// equals encoding the joined prompt with parse_special whenever the messages hold no added token.
std::vector<int32_t> tokenize_chat(const Tokenizer& tokenizer,
                                   const std::vector<ChatSegment>& segments);

}  // namespace ponder::text
