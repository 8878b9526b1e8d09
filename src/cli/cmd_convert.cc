// ponder convert HF_DIR OUT.gguf [--type F16|BF16|F32|Q8_0]: a Hugging Face Qwen2 folder
// (DeepSeek-R1-Distill-Qwen) to GGUF, with llama.cpp's keys, tensor names and tokenizer layout.
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "base/thread_pool.h"
#include "cli/command.h"
#include "convert/hf_converter.h"

namespace ponder::cli {
namespace {

int run_convert(int argc, char** argv) {
  CLI::App app{
      "Convert a Hugging Face Qwen2ForCausalLM folder (safetensors, config.json, "
      "tokenizer.json, tokenizer_config.json) to GGUF"};
  std::string dir, out, type_name = "F16";
  ConvertOptions options;
  bool quiet = false;
  app.add_option("hf_dir", dir, "Hugging Face model folder")->required();
  app.add_option("out", out, "Output GGUF file")->required();
  app.add_option("--type", type_name,
                 "Type of the matrices: F16 (default), BF16, F32 or Q8_0; "
                 "norms and biases stay F32");
  app.add_option("--name", options.name, "general.name (default: from config.json or the folder)");
  app.add_flag("--vocab-only", options.vocab_only, "Write the metadata and tokenizer only");
  app.add_option("-t,--threads", options.n_threads, "Conversion threads (default: all cores)");
  app.add_flag("-q,--quiet", quiet, "No progress line");
  CLI11_PARSE(app, argc, argv);

  auto type = ggml_type_from_name(type_name);
  if (!type.has_value() || (*type != GgmlType::F32 && *type != GgmlType::F16 &&
                            *type != GgmlType::BF16 && *type != GgmlType::Q8_0)) {
    return fail("convert", fmt::format("--type {}: expected F16, BF16, F32 or Q8_0", type_name));
  }
  options.type = *type;

  HfConverter converter(options);
  if (Status st = converter.open(dir); !st) return fail("convert", st.message());
  const HfConfig& c = converter.config();
  const double total_mb = static_cast<double>(converter.output_bytes()) / 1e6;
  fmt::print(stderr,
             "convert: {} layers, n_embd {}, n_ff {}, {} tokens (pre {}), {} tensors, "
             "{:.1f} MB as {}\n",
             c.n_layer, c.n_embd, c.n_ff, converter.vocab().tokens.size(), converter.vocab().pre,
             converter.plan().size(), total_mb, ggml_type_name(options.type));

  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double done_mb = 0;
  // One line rewritten in place on a terminal; nothing per tensor into a log file.
  if (!quiet && isatty(fileno(stderr))) {
    converter.set_progress([&](size_t i, size_t n, const ConvertPlan& p) {
      int64_t elems = 1;
      for (int64_t d : p.shape) elems *= d;
      done_mb += static_cast<double>(ggml_row_bytes(p.type, elems)) / 1e6;
      fmt::print(stderr, "\r[{:>4}/{}] {:<28} {:<5} {:6.1f}/{:.1f} MB {:6.1f} s\x1b[K", i, n,
                 p.name, ggml_type_name(p.type), done_mb, total_mb, seconds());
      if (i == n) fmt::print(stderr, "\n");
    });
  }
  if (Status st = converter.write(out); !st) {
    if (!quiet && isatty(fileno(stderr))) fmt::print(stderr, "\n");
    return fail("convert", st.message());
  }
  const double s = seconds();
  fmt::print(stderr, "convert: wrote {} ({:.1f} MB of tensors in {:.2f} s, {:.0f} MB/s)\n", out,
             total_mb, s, s > 0 ? total_mb / s : 0.0);
  return 0;
}

}  // namespace

PONDER_COMMAND("convert", "convert a Hugging Face Qwen2 folder (safetensors) to GGUF", run_convert);

}  // namespace ponder::cli
