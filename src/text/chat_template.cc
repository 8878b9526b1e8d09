#include "text/chat_template.h"

namespace ponder::text {

namespace {

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kThinkOpen = "<think>\n";

void add(std::vector<ChatSegment>* out, std::string_view text, bool is_template) {
  if (text.empty()) return;
  // Adjacent segments of the same kind are merged: fewer, longer stretches.
  if (!out->empty() && out->back().is_template == is_template) {
    out->back().text.append(text);
  } else {
    out->push_back({std::string(text), is_template});
  }
}

// An assistant's calls as R1 writes them: <｜tool▁calls▁begin｜>, each call
//   <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
// with "\n" between two calls, then <｜tool▁calls▁end｜>. The markers are template text like the
// tool-output markers (plain text in this vocabulary all the same); names and arguments are
// message text.
void add_tool_calls(std::vector<ChatSegment>* out, const std::vector<ChatToolCall>& calls) {
  if (calls.empty()) return;
  add(out, "<｜tool▁calls▁begin｜>", true);
  for (size_t i = 0; i < calls.size(); ++i) {
    add(out,
        i == 0 ? "<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
               : "\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
        true);
    add(out, calls[i].name, false);
    add(out, "\n```json\n", true);
    add(out, calls[i].arguments, false);
    add(out, "\n```<｜tool▁call▁end｜>", true);
  }
  add(out, "<｜tool▁calls▁end｜>", true);
}

Status unknown_role(const ChatTemplate& t, size_t i, const std::string& role, const char* known) {
  return Status::errorf("chat template {}: message {} has role \"{}\", expected one of {}",
                        t.name(), i, role, known);
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::from_name(std::string_view name) {
  if (name == "deepseek-r1" || name == "deepseek-r1-qwen" || name == "deepseek3") {
    return ChatTemplate(ChatFormat::kDeepSeekR1);
  }
  if (name == "chatml" || name == "qwen2" || name == "qwen2.5") {
    return ChatTemplate(ChatFormat::kChatML);
  }
  return Status::errorf("unknown chat template \"{}\": expected \"deepseek-r1\" or \"chatml\"",
                        name);
}

Expected<ChatTemplate> ChatTemplate::detect(std::string_view jinja) {
  if (jinja.find(kAssistant) != std::string_view::npos &&
      jinja.find(kUser) != std::string_view::npos) {
    return ChatTemplate(ChatFormat::kDeepSeekR1);
  }
  if (jinja.find("<|im_start|>") != std::string_view::npos)
    return ChatTemplate(ChatFormat::kChatML);
  return Status::error(
      "tokenizer.chat_template: not a DeepSeek-R1 or ChatML template (no <｜Assistant｜> or "
      "<|im_start|> in it); choose one by name: deepseek-r1, chatml");
}

Expected<ChatTemplate> ChatTemplate::for_model(const GgufFile& file,
                                               std::string_view override_name) {
  if (!override_name.empty()) return from_name(override_name);
  if (file.find("tokenizer.chat_template") == nullptr) {
    return Status::errorf("{}: no tokenizer.chat_template; choose one by name: deepseek-r1, chatml",
                          file.path());
  }
  PONDER_ASSIGN_OR_RETURN(std::string jinja, file.get_string("tokenizer.chat_template"));
  return detect(jinja);
}

const char* ChatTemplate::name() const {
  return format_ == ChatFormat::kDeepSeekR1 ? "deepseek-r1" : "chatml";
}

Expected<std::vector<ChatSegment>> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                                        bool add_generation_prompt) const {
  std::vector<ChatSegment> out;
  if (format_ == ChatFormat::kDeepSeekR1) {
    PONDER_RETURN_IF_ERROR(render_r1(messages, add_generation_prompt, &out));
  } else {
    PONDER_RETURN_IF_ERROR(render_chatml(messages, add_generation_prompt, &out));
  }
  return out;
}

// Follows the Jinja of the DeepSeek-R1-Distill tokenizer_config.json line by line, quirks
// included: only the last system message is kept, and it is written right after BOS, before
// the first turn; only the first tool output of a conversation opens <｜tool▁outputs▁begin｜>;
// an assistant message right after tool outputs follows <｜tool▁outputs▁end｜> directly (no
// <｜Assistant｜>, its thinking not removed); no generation prompt after tool outputs.
// Tool calls follow the later DeepSeek-R1 Jinja (after its tool-call fix): the message as
// above, then its calls, then <｜tool▁calls▁end｜><｜end▁of▁sentence｜>. The older Jinja of the
// R1-Distill files writes calls only when the content is null and closes the block only after a
// second call; both open <｜tool▁calls▁begin｜> once per conversation (ns.is_first is never
// reset), and the later one starts calls after tool outputs with <｜Assistant｜> without
// closing the outputs. Here every message's calls are a whole block, so the history shows the
// model the format tool_call_grammar() makes it write (docs/tool-calls.md).
Status ChatTemplate::render_r1(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               std::vector<ChatSegment>* out) const {
  const std::string* system_prompt = nullptr;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "system") system_prompt = &messages[i].content;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return unknown_role(*this, i, role, "system, user, assistant, tool");
    }
    if (role != "assistant" && !messages[i].tool_calls.empty()) {
      return Status::errorf(
          "chat template {}: message {} has role \"{}\" and tool_calls; only "
          "an assistant message can call tools",
          name(), i, role);
    }
  }
  add(out, kBos, true);
  if (system_prompt != nullptr) add(out, *system_prompt, false);
  bool is_tool = false;
  bool is_output_first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      is_tool = false;
      add(out, kUser, true);
      add(out, m.content, false);
    } else if (m.role == "assistant") {
      if (is_tool) {
        add(out, "<｜tool▁outputs▁end｜>", true);
        add(out, m.content, false);
        is_tool = false;
      } else {
        std::string_view content = m.content;
        // Earlier answers go back without their thinking: keep what follows the last </think>.
        if (size_t p = content.rfind(kThinkEnd); p != std::string_view::npos) {
          content.remove_prefix(p + kThinkEnd.size());
        }
        add(out, kAssistant, true);
        add(out, content, false);
      }
      add_tool_calls(out, m.tool_calls);
      add(out, kEos, true);
    } else if (m.role == "tool") {
      is_tool = true;
      add(out,
          is_output_first ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                          : "\n<｜tool▁output▁begin｜>",
          true);
      is_output_first = false;
      add(out, m.content, false);
      add(out, "<｜tool▁output▁end｜>", true);
    }
  }
  if (is_tool) add(out, "<｜tool▁outputs▁end｜>", true);
  if (add_generation_prompt && !is_tool) {
    add(out, kAssistant, true);
    add(out, kThinkOpen, true);
  }
  return Status::ok();
}

Status ChatTemplate::render_chatml(const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt,
                                   std::vector<ChatSegment>* out) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return unknown_role(*this, i, m.role, "system, user, assistant");
    }
    if (!m.tool_calls.empty()) {
      return Status::errorf(
          "chat template chatml: message {} has tool_calls; tool calls need the deepseek-r1 "
          "template",
          i);
    }
    add(out, "<|im_start|>" + m.role + "\n", true);
    add(out, m.content, false);
    add(out, "<|im_end|>\n", true);
  }
  if (add_generation_prompt) add(out, "<|im_start|>assistant\n", true);
  return Status::ok();
}

std::string join_segments(const std::vector<ChatSegment>& segments) {
  std::string s;
  for (const ChatSegment& seg : segments) s += seg.text;
  return s;
}

bool prompt_opens_thinking(const std::vector<ChatSegment>& segments) {
  return !segments.empty() && segments.back().is_template &&
         std::string_view(segments.back().text).ends_with(kThinkOpen);
}

std::vector<int32_t> tokenize_chat(const Tokenizer& tokenizer,
                                   const std::vector<ChatSegment>& segments) {
  std::vector<int32_t> ids;
  std::string text;  // plain text since the last added token
  for (const ChatSegment& seg : segments) {
    if (!seg.is_template) {
      text += seg.text;
      continue;
    }
    size_t i = 0;
    while (i < seg.text.size()) {
      const int32_t id = tokenizer.added_token_at(seg.text, i);
      if (id < 0) {
        text += seg.text[i++];
        continue;
      }
      tokenizer.encode_append(text, false, &ids);
      text.clear();
      ids.push_back(id);
      i += tokenizer.token_text(id).size();
    }
  }
  tokenizer.encode_append(text, false, &ids);
  return ids;
}

}  // namespace ponder::text
