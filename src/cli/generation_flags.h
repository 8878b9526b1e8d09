// Command-line flags shared by the commands that generate text (run, chat): model, context,
// threads, sampling, and the terminal printer that shows R1's thinking apart from its answer.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runtime/generator.h"
#include "runtime/reasoning_splitter.h"

namespace ponder::cli {

struct GenerationFlags {
  std::string model_path;
  std::string template_name;
  int32_t n_ctx = 4096;
  int threads = 0;        // 0: default
  int threads_batch = 0;  // 0: as threads
  bool pin = false;
  bool hide_thinking = false;
  bool flash_attn = false;
  GenerateOptions gen;

  void add_to(CLI::App& app);
  Status validate() const;
  ThreadConfig thread_config() const;
};

// Prints streamed text: thinking dimmed (on a terminal) under a "thinking" header, then the
// answer. Also usable when there is no thinking (raw prompts).
class ThinkingPrinter {
 public:
  ThinkingPrinter(bool starts_in_thinking, bool hide_thinking);
  void push(std::string_view text);
  void finish();

 private:
  void print_reasoning(const std::string& s);
  void print_content(const std::string& s);
  ReasoningSplitter splitter_;
  bool hide_;
  bool tty_;
  bool in_reasoning_block_ = false;
  bool answer_started_ = false;
};

// "prompt 12 tokens (3 cached) at 150.2 t/s | 40 tokens at 25.1 t/s | first token 0.08 s"
std::string format_stats(const GenerateStats& s);

}  // namespace ponder::cli
