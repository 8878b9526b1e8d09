// ponder chat -m M.gguf: an interactive multi-turn chat in the terminal. The history is kept
// (earlier thinking dropped by the template); after each answer the engine computes the
// answer-only form of the turn into its prefix cache while the user types, so the next turn
// prefills only the new message. Ctrl-C stops the current answer and Ctrl-D (or /exit) leaves.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <iostream>

#include "base/log.h"
#include "cli/command.h"
#include "cli/generation_flags.h"
#include "cli/model_session.h"

namespace ponder::cli {
namespace {

std::atomic<bool> g_cancel{false};

void on_sigint(int) { g_cancel.store(true); }

int run_chat(int argc, char** argv) {
  CLI::App app{"Chat with a model in the terminal"};
  GenerationFlags flags;
  std::string system;
  flags.add_to(app);
  app.add_option("--system", system, "system prompt");
  CLI11_PARSE(app, argc, argv);
  if (Status st = flags.validate(); !st.is_ok()) return fail("chat", st.message());

  auto session = ModelSession::open(flags.model_path, flags.x16_cache_options());
  if (!session.has_value()) return fail("chat", session.status().message());
  ModelSession& s = **session;
  if (Status st = flags.kv_types.apply(*s.model, flags.flash_attn); !st.is_ok())
    return fail("chat", st.message());
  flags.apply_to_process(s);
  auto tmpl = s.chat_template(flags.template_name);
  if (!tmpl.has_value()) return fail("chat", tmpl.status().message());
  const bool thinking = tmpl->format() == text::ChatFormat::kDeepSeekR1;

  EngineConfig engine_config = flags.engine_config(s);
  std::shared_ptr<SharedDraftModel> draft;
  if (Status st = flags.attach_draft(s, &engine_config, &draft); !st.is_ok())
    return fail("chat", st.message());
  Engine engine(*s.model, s.tokenizer, engine_config);
  std::signal(SIGINT, on_sigint);
  std::vector<text::ChatMessage> history;
  if (!system.empty()) history.push_back({"system", system});
  std::fprintf(stderr,
               "ponder chat: %s (%s template, %lld-token context). Ctrl-C stops an answer, "
               "/reset clears the history, Ctrl-D or /exit leaves.\n",
               flags.model_path.c_str(), tmpl->name(),
               static_cast<long long>(engine.max_context()));
  std::string line;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    g_cancel.store(false);
    if (!std::getline(std::cin, line)) {
      if (g_cancel.load() && std::cin.eof() == false) {
        std::cin.clear();
        continue;
      }
      break;
    }
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(system.empty() ? 0 : 1);
      std::fputs("(history cleared)\n", stdout);
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    auto segments = tmpl->render(history, true);
    if (!segments.has_value()) return fail("chat", segments.status().message());
    EngineRequest request;
    request.prompt = text::tokenize_chat(s.tokenizer, *segments);
    request.options = flags.gen;
    request.starts_in_thinking = thinking;
    std::string reasoning, answer;
    ThinkingPrinter printer(flags.hide_thinking);
    auto stats = run_request(
        engine, std::move(request),
        [&](const std::string& r, const std::string& c) {
          reasoning += r;
          answer += c;
          printer.push(r, c);
        },
        &g_cancel);
    if (!stats.has_value()) {
      // A turn that no longer fits: say so and let the user /reset; the program keeps running.
      std::fprintf(stderr, "ponder chat: %s\n", stats.status().message().c_str());
      history.pop_back();
      continue;
    }
    printer.finish();
    if (stats->finish_reason == "cancelled") std::fputs("(stopped)\n", stdout);
    std::fprintf(stderr, "%s\n", format_stats(*stats).c_str());
    // The answer goes back into the history as said, thinking included; the template drops it.
    const bool closed = !answer.empty();
    history.push_back(
        {"assistant",
         thinking ? "<think>\n" + reasoning + (closed ? "</think>\n\n" + answer : "") : answer});
    // Warm the next turn: its prompt starts with this turn in answer-only form.
    if (auto next = tmpl->render(history, false); next.has_value()) {
      EngineRequest warm;
      warm.prompt = text::tokenize_chat(s.tokenizer, *next);
      warm.prefill_only = true;
      if (auto id = engine.submit(std::move(warm)); !id.has_value()) {
        log_debug("chat: the next turn's prefix is not warmed: {}", id.status().message());
      }
    }
  }
  return 0;
}

}  // namespace

PONDER_COMMAND("chat", "chat with a model in the terminal", run_chat);

}  // namespace ponder::cli
