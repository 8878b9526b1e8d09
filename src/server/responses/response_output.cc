#include "server/responses/response_output.h"

#include <fmt/core.h>

namespace ponder::server {

using nlohmann::json;

ResponseOutput::ResponseOutput(std::string id_suffix, bool tools, Emit emit)
    : id_suffix_(std::move(id_suffix)), emit_(std::move(emit)) {
  if (tools) tools_ = std::make_unique<grammar::ToolCallStream>();
}

void ResponseOutput::emit(const std::string& type, json fields) {
  if (emit_) emit_(type, std::move(fields));
}

std::string ResponseOutput::item_id(const char* prefix) const {
  return fmt::format("{}_{}{}", prefix, id_suffix_, items_.size());
}

void ResponseOutput::open_item(Open kind, json item) {
  close("completed");
  open_ = kind;
  text_.clear();
  items_.push_back(std::move(item));
  emit("response.output_item.added",
       {{"output_index", items_.size() - 1}, {"item", items_.back()}});
}

// Ends the open item: its "done" events, then response.output_item.done with the whole item.
void ResponseOutput::close(const char* status) {
  if (open_ == Open::kNone) return;
  json& item = items_.back();
  const json where = {{"item_id", item["id"]}, {"output_index", items_.size() - 1}};
  auto with = [&where](json fields) {
    fields.update(where);
    return fields;
  };
  if (open_ == Open::kReasoning) {
    const json part = {{"type", "summary_text"}, {"text", text_}};
    emit("response.reasoning_summary_text.done", with({{"summary_index", 0}, {"text", text_}}));
    emit("response.reasoning_summary_part.done", with({{"summary_index", 0}, {"part", part}}));
    item["summary"] = json::array({part});
  } else if (open_ == Open::kMessage) {
    const json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
    emit("response.output_text.done",
         with({{"content_index", 0}, {"text", text_}, {"logprobs", json::array()}}));
    emit("response.content_part.done", with({{"content_index", 0}, {"part", part}}));
    item["content"] = json::array({part});
    item["status"] = status;
  } else {
    item["arguments"] = text_;
    emit("response.function_call_arguments.done",
         with({{"arguments", text_}, {"name", item["name"]}}));
    item["status"] = status;
  }
  open_ = Open::kNone;
  emit("response.output_item.done", {{"output_index", items_.size() - 1}, {"item", item}});
}

void ResponseOutput::reasoning(std::string_view piece) {
  if (piece.empty()) return;
  if (open_ != Open::kReasoning) {
    open_item(Open::kReasoning,
              {{"type", "reasoning"}, {"id", item_id("rs")}, {"summary", json::array()}});
    emit("response.reasoning_summary_part.added",
         {{"item_id", items_.back()["id"]},
          {"output_index", items_.size() - 1},
          {"summary_index", 0},
          {"part", {{"type", "summary_text"}, {"text", ""}}}});
  }
  text_ += piece;
  emit("response.reasoning_summary_text.delta", {{"item_id", items_.back()["id"]},
                                                 {"output_index", items_.size() - 1},
                                                 {"summary_index", 0},
                                                 {"delta", std::string(piece)}});
}

void ResponseOutput::text(std::string_view piece) {
  if (piece.empty()) return;
  if (open_ != Open::kMessage) {
    open_item(Open::kMessage, {{"type", "message"},
                               {"id", item_id("msg")},
                               {"status", "in_progress"},
                               {"role", "assistant"},
                               {"content", json::array()}});
    emit("response.content_part.added",
         {{"item_id", items_.back()["id"]},
          {"output_index", items_.size() - 1},
          {"content_index", 0},
          {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  }
  text_ += piece;
  emit("response.output_text.delta", {{"item_id", items_.back()["id"]},
                                      {"output_index", items_.size() - 1},
                                      {"content_index", 0},
                                      {"delta", std::string(piece)},
                                      {"logprobs", json::array()}});
}

void ResponseOutput::tool_events(const std::vector<grammar::ToolCallEvent>& events) {
  for (const grammar::ToolCallEvent& e : events) {
    if (e.kind == grammar::ToolCallEvent::Kind::kContent) {
      text(e.text);
    } else if (e.kind == grammar::ToolCallEvent::Kind::kCallStart) {
      open_item(Open::kCall, {{"type", "function_call"},
                              {"id", item_id("fc")},
                              {"call_id", fmt::format("call_{}{}", id_suffix_, n_calls_)},
                              {"name", e.text},
                              {"arguments", ""},
                              {"status", "in_progress"}});
      ++n_calls_;
    } else if (open_ == Open::kCall && !e.text.empty()) {
      text_ += e.text;
      emit("response.function_call_arguments.delta", {{"item_id", items_.back()["id"]},
                                                      {"output_index", items_.size() - 1},
                                                      {"delta", e.text}});
    }
  }
}

void ResponseOutput::content(std::string_view piece) {
  if (tools_) {
    tool_events(tools_->push(piece));
  } else {
    text(piece);
  }
}

void ResponseOutput::finish(bool complete) {
  if (tools_) tool_events(tools_->finish());
  close(complete ? "completed" : "incomplete");
}

}  // namespace ponder::server
