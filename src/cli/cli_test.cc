// End-to-end tests of the `ponder` binary: real processes, real files, exit codes and messages.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/pgld.h"

namespace ponder {
namespace {

const std::string kPonder = std::string(PONDER_BINARY_DIR) + "/ponder";
const std::string kShared = PONDER_SHARED_DIR;

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  const std::string cmd = kPonder + " " + args + " 2>&1 < /dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ponder_cli_" + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(CliTest, LogitsCommandMeetsTheGoldenThresholds) {
  const std::string out = temp_path("q8.pgld");
  Result r = run("logits -m " + kShared + "/models/tiny-Q8_0.gguf --prompt-file " + kShared +
                 "/golden/p2.txt --gen 8 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto ours = Pgld::read(out);
  auto golden = Pgld::read(kShared + "/golden/Q8_0-p2.pgld");
  ASSERT_TRUE(ours.has_value() && golden.has_value());
  ASSERT_EQ(ours->n_prompt, golden->n_prompt);  // same tokenization of the prompt
  for (uint32_t i = 0; i < ours->n_prompt; ++i) ASSERT_EQ(ours->tokens[i], golden->tokens[i]);
  // Greedy continuation and every row's top-64 against the golden (rows where tokens agree).
  for (size_t r2 = 0; r2 < ours->rows.size(); ++r2) {
    if (ours->tokens[std::min(r2, ours->tokens.size() - 1)] !=
        golden->tokens[std::min(r2, golden->tokens.size() - 1)])
      break;
    std::vector<float> full(ours->n_vocab, -1e30f);
    for (const auto& [id, logit] : ours->rows[r2].top) full[id] = logit;
    // Compare the golden's top ids with ours (ours kept top-64: compare on the intersection).
    double worst = 0;
    for (const auto& [id, logit] : golden->rows[r2].top) {
      if (full[id] <= -1e29f) continue;
      worst = std::max<double>(
          worst, std::fabs((logit - golden->rows[r2].lse) - (full[id] - ours->rows[r2].lse)));
    }
    EXPECT_LT(worst, 0.25) << "row " << r2;
  }
  std::filesystem::remove(out);
}

TEST(CliTest, RunGeneratesAndReportsTimings) {
  Result r = run("run -m " + kShared + "/models/tiny-Q4_K_M.gguf -p 'What is 2+2?' -n 8 --temp 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[thinking]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated 8 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first token"), std::string::npos) << r.out;
}

// A bf16 cache asked for on one side takes the other side too (auto), here on F16 weights, whose
// default is f16.
TEST(CliTest, RunWithABf16KvCache) {
  Result r = run("run -m " + kShared +
                 "/models/tiny-F16.gguf -p 'What is 2+2?' -n 8 --temp 0 --cache-type-k bf16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("generated 8 tokens"), std::string::npos) << r.out;
}

TEST(CliTest, RunWithAQ8_0KvCache) {
  Result r = run("run -m " + kShared +
                 "/models/tiny-Q4_K_M.gguf -p 'What is 2+2?' -n 8 --temp 0 --cache-type-k q8_0 "
                 "--cache-type-v q8_0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("generated 8 tokens"), std::string::npos) << r.out;
}

// --paired: decode at depth alternating with decode at depth 0, one ratio per repetition.
TEST(CliTest, BenchPairsDepthWithDepthZero) {
  const std::string model = kShared + "/models/tiny-Q8_0.gguf";
  Result r = run("bench -m " + model + " -p 0 -n 4 -d 0,64 -r 3 -t 1 --paired --no-bandwidth");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| tg4 @ d64 (paired) | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 (paired with d64) | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg4 @ d64 (paired) t=1: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of depth 0, the median of 3 paired repetitions"), std::string::npos)
      << r.out;
  Result j =
      run("bench -m " + model + " -p 0 -n 4 -d 64 -r 2 -t 1 --paired --no-bandwidth -o json");
  ASSERT_EQ(j.code, 0) << j.out;
  const size_t at = j.out.find("\"paired_ratios\": [");
  ASSERT_NE(at, std::string::npos) << j.out;
  double a = 0, b = 0;
  ASSERT_EQ(std::sscanf(j.out.c_str() + at, "\"paired_ratios\": [ %lf , %lf ]", &a, &b), 2)
      << j.out.substr(at, 80);
  EXPECT_GT(a, 0.0);
  EXPECT_GT(b, 0.0);
  // Prompts pair the same way (no memory roofline for them); the depth-0 rows of -d 0 stay
  // unpaired.
  Result p = run("bench -m " + model + " -p 32 -n 0 -d 0,64 -r 3 -t 1 --paired --no-bandwidth");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("| pp32 |"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("| pp32 @ d64 (paired) | 1 |"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("| pp32 (paired with d64) | 1 |"), std::string::npos) << p.out;
  const size_t line = p.out.find("pp32 @ d64 (paired) t=1: ");
  ASSERT_NE(line, std::string::npos) << p.out;
  const std::string summary = p.out.substr(line, p.out.find('\n', line) - line);
  EXPECT_NE(summary.find("of depth 0, the median of 3 paired repetitions"), std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("roofline"), std::string::npos) << summary;
}

TEST(CliTest, BadInputIsOneClearLineAndNonZeroExit) {
  const std::string tiny = kShared + "/models/tiny-Q8_0.gguf";
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"run -m /nonexistent.gguf -p hi", "cannot open /nonexistent.gguf"},
      {"run -m " + kShared + "/models/vocab-r1-qwen.gguf -p hi",
       "missing tensor token_embd.weight"},
      {"run -m " + tiny + " -p '' --raw", "the prompt is empty"},
      {"run -m " + tiny + " -p 'a b c d e f g h i j k l m n o p q r s t' --ctx 16",
       "but the context holds 16"},
      {"run -m " + tiny + " -p hi --chat-template nonsense", "nonsense"},
      {"info /etc/os-release", "not a GGUF file"},
      {"run -m " + tiny + " -p hi --flash-attn 0 --cache-type-v q8_0",
       "needs the block order of attention"},
      {"run -m " + tiny + " -p hi --cache-type-k q4_0", "q4_0"},
      {"run -m " + tiny + " -p hi --attn-scores bf16 --flash-attn 0", "--attn-scores bf16 needs"},
      {"run -m " + tiny + " -p hi --attn-scores f64", "f64"},
      {"run -m " + tiny + " -p hi --attn-scores int8", "--attn-scores int8 needs a Q8_0 K cache"},
      {"run -m " + tiny + " -p hi --attn-scores int8 --cache-type-k f16 --cache-type-v q8_0",
       "--attn-scores int8 needs a Q8_0 K cache"},
      {"run -m " + tiny + " -p hi --cache-type-k bf16 --cache-type-v f16",
       "takes K and V together"},
      {"run -m " + tiny + " -p hi --cache-type-k bf16 --attn-scores f32",
       "does not go with a bf16 KV cache"},
      {"run -m " + tiny + " -p hi --cache-type-k bf16 --flash-attn 0",
       "needs the block order of attention"},
      {"nosuchcommand", "unknown command"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Aborted"), std::string::npos) << c.args;
  }
}

TEST(CliTest, NotQwen2IsRefusedByName) {
  // A copy of the tiny model with another architecture name.
  auto src = std::string(kShared + "/models/tiny-Q8_0.gguf");
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find("qwen2");  // the value of general.architecture comes first
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "llama");
  const std::string path = temp_path("llama.gguf");
  std::ofstream(path, std::ios::binary) << bytes;
  Result r = run("run -m " + path + " -p hi");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(r.out.find("architecture is llama") != std::string::npos ||
              r.out.find("missing") != std::string::npos)
      << r.out;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ponder
