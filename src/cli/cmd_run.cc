// ponder run -m M.gguf -p "...": one completion, streamed, with the model's thinking shown apart
// from its answer, then timings.
#include <fmt/core.h>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/generation_flags.h"
#include "cli/model_session.h"

namespace ponder::cli {
namespace {

int run_run(int argc, char** argv) {
  CLI::App app{"Generate one completion for a prompt (chat template applied unless --raw)"};
  GenerationFlags flags;
  std::string prompt, system;
  bool raw = false;
  flags.add_to(app);
  app.add_option("-p,--prompt", prompt, "the prompt")->required();
  app.add_option("--system", system, "system prompt");
  app.add_flag("--raw", raw, "feed the prompt as it is (special tokens parsed), no template");
  CLI11_PARSE(app, argc, argv);
  if (Status st = flags.validate(); !st.is_ok()) return fail("run", st.message());
  if (prompt.empty()) return fail("run", "the prompt is empty");

  auto session = ModelSession::open(flags.model_path, flags.x16_cache_options());
  if (!session.has_value()) return fail("run", session.status().message());
  ModelSession& s = **session;
  if (Status st = flags.kv_types.apply(*s.model, flags.flash_attn); !st.is_ok())
    return fail("run", st.message());
  flags.apply_to_process(s);

  std::vector<int32_t> tokens;
  bool thinking = false;
  if (raw) {
    tokens = s.tokenizer.encode(prompt, true);
    if (s.tokenizer.add_bos() && s.tokenizer.bos() >= 0)
      tokens.insert(tokens.begin(), s.tokenizer.bos());
  } else {
    auto tmpl = s.chat_template(flags.template_name);
    if (!tmpl.has_value()) return fail("run", tmpl.status().message());
    std::vector<text::ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    auto segments = tmpl->render(messages, true);
    if (!segments.has_value()) return fail("run", segments.status().message());
    tokens = text::tokenize_chat(s.tokenizer, *segments);
    thinking = tmpl->format() == text::ChatFormat::kDeepSeekR1;
  }
  if (tokens.empty()) return fail("run", "the prompt is empty");

  EngineConfig engine_config = flags.engine_config(s);
  std::shared_ptr<SharedDraftModel> draft;
  if (Status st = flags.attach_draft(s, &engine_config, &draft); !st.is_ok())
    return fail("run", st.message());
  Engine engine(*s.model, s.tokenizer, engine_config);
  ThinkingPrinter printer(flags.hide_thinking);
  EngineRequest request;
  request.prompt = std::move(tokens);
  request.options = flags.gen;
  request.starts_in_thinking = thinking;
  auto stats = run_request(engine, std::move(request),
                           [&](const std::string& r, const std::string& c) { printer.push(r, c); });
  if (!stats.has_value()) return fail("run", stats.status().message());
  printer.finish();
  std::fprintf(stderr, "\n%s | load %.2f s\n", format_stats(*stats).c_str(), s.load_s);
  return 0;
}

}  // namespace

PONDER_COMMAND("run", "generate one completion for a prompt", run_run);

}  // namespace ponder::cli
