// ResponseOutput: a response's output items built from R1's answer as it is generated: the
// thinking as a reasoning item (its whole text as one summary_text, the only summary R1 has), the
// answer as a message item with one output_text part, and with tools the calls as function_call
// items (read by grammar/tool_calls.h's ToolCallStream, so a streamed and a whole answer give
// the same items). Each step is also reported as the Responses API's streaming event
// (output_item.added, reasoning_summary_text.delta, output_text.delta,
// function_call_arguments.delta, ..., output_item.done) to an emitter, when there is one.
// Depends on grammar/tool_calls.h and nlohmann-json.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/tool_calls.h"

namespace ponder::server {

class ResponseOutput {
 public:
  // An event's type ("response.output_text.delta", ...) and its fields (type and sequence number
  // are the emitter's to add).
  using Emit = std::function<void(const std::string& type, nlohmann::json fields)>;

  // id_suffix makes the item ids ("rs_", "msg_", "fc_" + suffix + index) and call ids unique.
  ResponseOutput(std::string id_suffix, bool tools, Emit emit = nullptr);

  void reasoning(std::string_view piece);
  void content(std::string_view piece);
  // The end of the answer. complete false (cut by max_output_tokens): the last item is
  // "incomplete".
  void finish(bool complete);

  const nlohmann::json& items() const { return items_; }  // the output array
  int32_t n_calls() const { return n_calls_; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  void emit(const std::string& type, nlohmann::json fields);
  void open_item(Open kind, nlohmann::json item);
  void close(const char* status);
  void text(std::string_view piece);
  void tool_events(const std::vector<grammar::ToolCallEvent>& events);
  std::string item_id(const char* prefix) const;

  std::string id_suffix_;
  Emit emit_;
  std::unique_ptr<grammar::ToolCallStream> tools_;  // null: no tools offered
  nlohmann::json items_ = nlohmann::json::array();
  Open open_ = Open::kNone;
  std::string text_;  // the open item's text: thinking, answer or arguments
  int32_t n_calls_ = 0;
};

}  // namespace ponder::server
