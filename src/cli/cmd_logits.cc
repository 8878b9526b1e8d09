// ponder logits: teacher-forced or greedy logits in the PGLD format of ../shared/golden, so a run
// can be compared with a golden file (or another engine) with one command.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "cli/generation_flags.h"
#include "cli/model_session.h"
#include "model/pgld.h"
#include "runtime/generator.h"

namespace ponder::cli {
namespace {

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf("cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Expected<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& path) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    try {
      size_t used = 0;
      const long v = std::stol(word, &used);
      if (used != word.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return Status::errorf("{}: '{}' is not a token id", path, word);
    }
  }
  return ids;
}

int run_logits(int argc, char** argv) {
  CLI::App app{"Write logits in the PGLD format (../shared/golden/README.md)"};
  std::string model_path, prompt_file, tokens_file, out;
  int n_gen = 0, threads = 0;
  bool flash_attn = true;
  uint32_t top_k = 64;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  auto* pf = app.add_option("--prompt-file", prompt_file,
                            "prompt text (special tokens parsed, no BOS added)");
  auto* tf = app.add_option("--tokens-file", tokens_file,
                            "token ids, whitespace-separated, used as they are");
  pf->excludes(tf);
  app.add_option("--gen", n_gen, "greedy tokens to generate after the prompt")
      ->capture_default_str();
  app.add_option("--top-k", top_k, "logits kept per row (0: all)")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads");
  app.add_option("--flash-attn", flash_attn,
                 "attention order: 1 the block order (default), 0 llama.cpp's")
      ->capture_default_str();
  KvTypeFlags kv_types;
  kv_types.add_to(app);
  app.add_option("--out", out, "output .pgld file")->required();
  CLI11_PARSE(app, argc, argv);
  if (prompt_file.empty() && tokens_file.empty())
    return fail("logits", "give --prompt-file or --tokens-file");
  if (n_gen < 0) return fail("logits", "--gen must not be negative");

  auto session = ModelSession::open(model_path);
  if (!session.has_value()) return fail("logits", session.status().message());
  ModelSession& s = **session;
  if (Status st = kv_types.apply(*s.model, flash_attn); !st.is_ok())
    return fail("logits", st.message());
  const std::string& in_path = prompt_file.empty() ? tokens_file : prompt_file;
  auto text = read_file(in_path);
  if (!text.has_value()) return fail("logits", text.status().message());
  std::vector<int32_t> tokens;
  if (!prompt_file.empty()) {
    tokens = s.tokenizer.encode(*text, true);
  } else {
    auto ids = parse_ids(*text, in_path);
    if (!ids.has_value()) return fail("logits", ids.status().message());
    tokens = std::move(*ids);
  }
  const int64_t n_vocab = s.model->config().n_vocab;
  if (top_k > n_vocab)
    return fail("logits",
                fmt::format("--top-k {} is larger than the vocabulary ({})", top_k, n_vocab));

  Pgld pgld;
  pgld.n_vocab = static_cast<uint32_t>(n_vocab);
  pgld.n_prompt = static_cast<uint32_t>(tokens.size());
  pgld.n_gen = static_cast<uint32_t>(n_gen);
  pgld.k = top_k;
  Generator gen(*s.model, s.tokenizer, static_cast<int32_t>(tokens.size() + n_gen + 1),
                threads > 0 ? threads : default_threads());
  std::vector<float> logits;
  auto st = gen.evaluate(tokens, true, &logits);
  if (!st.has_value()) return fail("logits", st.status().message());
  for (size_t r = 0; r < tokens.size(); ++r)
    pgld.rows.push_back(Pgld::make_row(&logits[r * n_vocab], n_vocab, top_k));
  // Greedy continuation: each generated token's row is the distribution that produced the next.
  std::vector<float> last(logits.end() - n_vocab, logits.end());
  for (int g = 0; g < n_gen; ++g) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    tokens.push_back(next);
    auto e = gen.evaluate(tokens, false, &last);
    if (!e.has_value()) return fail("logits", e.status().message());
    pgld.rows.push_back(Pgld::make_row(last.data(), n_vocab, top_k));
  }
  pgld.tokens = tokens;
  if (Status w = pgld.write(out); !w.is_ok()) return fail("logits", w.message());
  std::fprintf(stderr, "ponder logits: %u prompt + %d generated tokens -> %s\n", pgld.n_prompt,
               n_gen, out.c_str());
  return 0;
}

}  // namespace

PONDER_COMMAND("logits", "write logits in the PGLD golden format", run_logits);

}  // namespace ponder::cli
