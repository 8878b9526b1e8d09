// ponder synth: write a random-weight model with the exact layout of a DeepSeek-R1-Distill-Qwen
// size, for benchmarks without downloads.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/timer.h"
#include "cli/command.h"
#include "synth/synth_model.h"

namespace ponder::cli {
namespace {

// The shared/ folder: $PONDER_SHARED_DIR, else the one beside the source tree the binary was
// built from, else ../shared from the current directory. Empty if none exists.
std::string find_shared_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("PONDER_SHARED_DIR"); env && fs::is_directory(env)) return env;
#ifdef PONDER_SHARED_DIR
  if (fs::is_directory(PONDER_SHARED_DIR)) return PONDER_SHARED_DIR;
#endif
  if (fs::is_directory("../shared")) return "../shared";
  return "";
}

int run_synth(int argc, char** argv) {
  CLI::App app(
      "Write a random-weight model with the exact layout, hyperparameters and tokenizer "
      "of a DeepSeek-R1-Distill-Qwen size.",
      "ponder synth");
  std::string preset_name;
  std::string output;
  std::string type_name = "F16";
  std::string vocab_path;
  uint64_t seed = 0;
  int n_threads = 0;
  app.add_option("--preset", preset_name, "Model size: tiny, 1.5b, 7b, 14b, 32b")->required();
  app.add_option("output", output, "Output GGUF file")->required();
  app.add_option("--seed", seed, "Random seed (the same seed writes the same bytes)");
  int64_t distinct_rows = 0;
  app.add_option("--type", type_name,
                 "Type of the weight matrices: F16 (default), F32, BF16, Q8_0, Q4_K, ..., or a "
                 "mix of ponder quantize (Q4_K_M, Q5_K_M, ...) (norms and biases are always F32)");
  app.add_option("--distinct-rows", distinct_rows,
                 "Draw only this many rows of each matrix and repeat them (0, the default: all); "
                 "quantizing is the slow part, so a big preset in a quantized type is written in "
                 "minutes. A forward pass's speed does not depend on the values")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--vocab", vocab_path,
                 "GGUF whose tokenizer.* keys are copied (default: shared/models/"
                 "vocab-r1-qwen.gguf, tiny-F32.gguf for --preset tiny)");
  app.add_option("-t,--threads", n_threads, "Worker threads (default: all cores)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const SynthPreset* preset = find_synth_preset(preset_name);
  if (preset == nullptr) {
    return fail("synth",
                "unknown preset '" + preset_name + "' (expected tiny, 1.5b, 7b, 14b or 32b)");
  }
  const auto type = ggml_type_from_name(type_name);
  // A plain type first (every matrix in it); else a mix, the types `ponder quantize` would pick.
  const auto mix = type ? std::nullopt : quant_mix_from_name(type_name);
  if (!mix && (!type || !synth_supports_type(*type))) {
    return fail("synth", "cannot store weights as '" + type_name +
                             "' (one type for every matrix: F16, F32, BF16, Q8_0, Q4_0, Q4_K, ...; "
                             "for a mix like Q4_K_M, synth F16 then run ponder quantize)");
  }
  if (vocab_path.empty()) {
    const std::string shared = find_shared_dir();
    if (shared.empty()) {
      return fail("synth",
                  "no --vocab given and no shared/ folder found (looked at "
                  "$PONDER_SHARED_DIR, the build's shared dir and ../shared)");
    }
    vocab_path = shared + "/" + preset->default_vocab;
    if (!std::filesystem::exists(vocab_path)) {
      return fail("synth", "no --vocab given and the default " + vocab_path + " does not exist");
    }
  }

  SynthOptions options;
  options.preset = preset;
  options.output_path = output;
  options.vocab_path = vocab_path;
  if (type) options.type = *type;
  options.mix = mix;
  options.distinct_rows = distinct_rows;
  options.seed = seed;
  options.n_threads = n_threads;
  Timer timer;
  double last_print = -1;
  options.progress = [&](size_t done, size_t count, int64_t bytes, int64_t total) {
    const double now = timer.seconds();
    if (done != count && now - last_print < 0.25) return;  // a line every quarter second
    last_print = now;
    std::fprintf(stderr, "\rsynth: %zu/%zu tensors, %.2f/%.2f GB, %.1f s   ", done, count,
                 bytes / 1e9, total / 1e9, now);
    if (done == count) std::fputc('\n', stderr);
  };
  const Status st = write_synth_model(options);
  if (!st.is_ok()) return fail("synth", st.message());
  std::printf("wrote %s: preset %s, %s, seed %llu, in %.1f s\n", output.c_str(),
              preset->name.c_str(),
              std::string(mix ? quant_mix_name(*mix) : ggml_type_name(*type)).c_str(),
              static_cast<unsigned long long>(seed), timer.seconds());
  return 0;
}

}  // namespace

PONDER_COMMAND("synth", "write a random-weight model with a real layout (benchmarks)", run_synth);

}  // namespace ponder::cli
