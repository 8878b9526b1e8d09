// ponder quantize IN.gguf OUT.gguf TYPE [--threads N]: rewrite a model in a llama.cpp-compatible
// quantization mix (Q4_K_M, Q8_0, ...). The work is quant/model_quantizer.h; this file parses the
// arguments, guards the input against being overwritten and prints progress.
#include <fmt/core.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/command.h"
#include "gguf/gguf_file.h"
#include "quant/model_quantizer.h"
#include "quant/quant_mix.h"

namespace ponder::cli {
namespace {

std::string mix_names() {
  std::string names;
  for (QuantMix m : all_quant_mixes()) {
    if (!names.empty()) names += ", ";
    names += quant_mix_name(m);
  }
  return names;
}

// True if `out` names the same file as `in` (the same path, or another link to the same inode).
bool same_file(const std::string& in, const std::string& out) {
  if (in == out) return true;
  struct stat a {
  }, b{};
  if (::stat(in.c_str(), &a) != 0 || ::stat(out.c_str(), &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int run_quantize(int argc, char** argv) {
  CLI::App app(
      "Quantize a GGUF model with llama.cpp's per-tensor type mixes. The input may be "
      "F32, F16 or BF16 (a quantized input is dequantized first, losing quality).",
      "ponder quantize");
  std::string input, output, mix_name;
  int n_threads = 0;
  app.add_option("input", input, "Input GGUF file")->required();
  app.add_option("output", output, "Output GGUF file (written to OUTPUT.tmp, then renamed)")
      ->required();
  app.add_option("type", mix_name, "Mix: " + mix_names())->required();
  app.add_option("-t,--threads", n_threads, "Worker threads (default: all cores)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const auto mix = quant_mix_from_name(mix_name);
  if (!mix)
    return fail("quantize", "unknown type '" + mix_name + "' (expected " + mix_names() + ")");
  if (same_file(input, output)) {
    return fail("quantize", "output " + output + " is the input file; refusing to overwrite it");
  }
  auto in = GgufFile::open(input);
  if (!in) return fail("quantize", in.status().message());

  ModelQuantizer quantizer(*mix, n_threads > 0 ? n_threads : default_thread_count());
  quantizer.set_progress([](size_t index, size_t count, const TensorPlan& p) {
    const int width = static_cast<int>(fmt::format("{}", count).size());
    std::string shape;
    for (int64_t d : p.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::fprintf(stderr, "[%*zu/%zu] %-32s [%s] %s -> %s\n", width, index, count, p.name.c_str(),
                 shape.c_str(), std::string(ggml_type_name(p.from)).c_str(),
                 std::string(ggml_type_name(p.to)).c_str());
  });
  const Timer timer;
  if (Status st = quantizer.quantize(*in, output); !st.is_ok()) {
    return fail("quantize", st.message());
  }
  struct stat in_st {
  }, out_st{};
  ::stat(input.c_str(), &in_st);
  ::stat(output.c_str(), &out_st);
  std::fprintf(stderr, "ponder quantize: wrote %s (%s): %.1f MB -> %.1f MB in %.1f s\n",
               output.c_str(), std::string(quant_mix_name(*mix)).c_str(), in_st.st_size / 1e6,
               out_st.st_size / 1e6, timer.seconds());
  return 0;
}

}  // namespace

PONDER_COMMAND("quantize", "quantize a model (llama.cpp-compatible mixes: Q4_K_M, Q8_0, ...)",
               run_quantize);

}  // namespace ponder::cli
