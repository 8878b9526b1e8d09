// Hostile model files above the GGUF reader (gguf_hostile_test.cc covers the reader): the tiny
// Q8_0 model rewritten with one thing wrong each (zero, huge and inconsistent dimensions,
// wrong-typed metadata, token ids and merges that point nowhere, a vocabulary that disagrees with
// the output matrix, missing and misshapen tensors). Each must be refused by ModelSession::open,
// the loading path of every command, with a message naming what is wrong, never crash, and never
// allocate more than the file's size plus 64 MiB of heap while trying.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cli/model_session.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace ponder::testing_support {
long heap_live_bytes();
long heap_peak_bytes();
void reset_heap_peak();
}  // namespace ponder::testing_support

namespace ponder {
namespace {

const std::string kSource = std::string(PONDER_SHARED_DIR) + "/models/tiny-Q8_0.gguf";
const std::string kDir = std::string(PONDER_BINARY_DIR) + "/model_hostile_tmp";

struct Edit {
  std::string name;
  std::function<void(const GgufFile& src, GgufWriter& w)> metadata;  // may be empty
  std::string drop_tensor;                                           // "" keeps them all
  std::string reshape_tensor;                                        // its dims reversed
  std::string fragment;                                              // the message must say this
};

// The source file copied with one edit applied; returns the new file's path.
std::string rewrite(const Edit& e) {
  auto src = GgufFile::open(kSource);
  EXPECT_TRUE(src.has_value());
  GgufWriter w;
  for (const auto& [k, v] : src->metadata()) {
    if (k != "general.alignment") w.set(k, v);
  }
  w.set_alignment(static_cast<uint32_t>(src->alignment()));
  if (e.metadata) e.metadata(*src, w);
  for (const TensorInfo& t : src->tensors()) {
    if (t.name == e.drop_tensor) continue;
    std::vector<int64_t> shape = t.shape;
    if (t.name == e.reshape_tensor && shape.size() == 2) std::swap(shape[0], shape[1]);
    EXPECT_TRUE(w.add_tensor_bytes(t.name, t.type, shape, t.data).is_ok()) << t.name;
  }
  std::filesystem::create_directories(kDir);
  const std::string path = kDir + "/" + std::to_string(std::hash<std::string>{}(e.name)) + ".gguf";
  EXPECT_TRUE(w.write(path).is_ok());
  return path;
}

// What loading the file says: "" when it loaded.
std::string load_error(const std::string& path) {
  setenv("PONDER_X16_CACHE", "0", 1);  // no cache files written beside the user's
  auto session = cli::ModelSession::open(path);
  return session.has_value() ? "" : session.status().message();
}

std::vector<std::string> tokens_of(const GgufFile& f) {
  return **f.get_string_array("tokenizer.ggml.tokens");
}

std::vector<Edit> edits() {
  auto set = [](std::string key, GgufValue v) {
    return [key, v](const GgufFile&, GgufWriter& w) { w.set(key, v); };
  };
  auto drop = [](std::string key) {
    return [key](const GgufFile&, GgufWriter& w) { w.remove(key); };
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {
      {"zero width", set("qwen2.embedding_length", GgufValue::u32(0)), "", "", "embedding_length"},
      {"huge width", set("qwen2.embedding_length", GgufValue::u32(1u << 30)), "", "",
       "token_embd.weight"},
      {"zero layers", set("qwen2.block_count", GgufValue::u32(0)), "", "", "block_count"},
      {"more layers than tensors", set("qwen2.block_count", GgufValue::u32(100000)), "", "",
       "block_count is 100000"},
      {"2^32-1 layers (found by fuzz_model: the layer table sized by it)",
       set("qwen2.block_count", GgufValue::u32(0xFFFFFFFFu)), "", "", "block_count is 4294967295"},
      {"one layer more than the tensors", set("qwen2.block_count", GgufValue::u32(3)), "", "",
       "block_count is 3"},
      {"zero heads", set("qwen2.attention.head_count", GgufValue::u32(0)), "", "",
       "head_count is 0"},
      {"heads not dividing the width", set("qwen2.attention.head_count", GgufValue::u32(7)), "", "",
       "do not divide"},
      {"zero KV heads", set("qwen2.attention.head_count_kv", GgufValue::u32(0)), "", "",
       "head_count"},
      {"KV heads not dividing the heads", set("qwen2.attention.head_count_kv", GgufValue::u32(3)),
       "", "", "do not divide"},
      {"zero context", set("qwen2.context_length", GgufValue::u32(0)), "", "", "context_length"},
      {"infinite rope base",
       set("qwen2.rope.freq_base", GgufValue::f32(std::numeric_limits<float>::infinity())), "", "",
       "freq_base"},
      {"zero feed-forward", set("qwen2.feed_forward_length", GgufValue::u32(0)), "", "",
       "feed_forward_length"},
      {"huge feed-forward", set("qwen2.feed_forward_length", GgufValue::u32(4000000000u)), "", "",
       "ffn_gate"},
      {"NaN rope base", set("qwen2.rope.freq_base", GgufValue::f32(nan)), "", "", "freq_base"},
      {"negative rope base", set("qwen2.rope.freq_base", GgufValue::f32(-10000.0f)), "", "",
       "freq_base"},
      {"negative norm epsilon",
       set("qwen2.attention.layer_norm_rms_epsilon", GgufValue::f32(-1e-6f)), "", "", "epsilon"},
      {"width as a string", set("qwen2.embedding_length", GgufValue::string("wide")), "", "",
       "embedding_length"},
      {"layers as a float", set("qwen2.block_count", GgufValue::f32(2.0f)), "", "", "block_count"},
      {"no architecture", drop("general.architecture"), "", "", "general.architecture"},
      {"another architecture", set("general.architecture", GgufValue::string("llama")), "", "",
       "llama"},
      {"no width", drop("qwen2.embedding_length"), "", "", "embedding_length"},
      {"fewer tokens than the output matrix's rows is fine, more is not",
       [](const GgufFile& f, GgufWriter& w) {
         auto t = tokens_of(f);
         for (int i = 0; i < 5000; ++i) t.push_back("<extra_" + std::to_string(i) + ">");
         w.set("tokenizer.ggml.tokens", GgufValue::string_array(t));
         w.remove("tokenizer.ggml.token_type");
       },
       "", "", "the tokenizer has"},
      {"no tokens", drop("tokenizer.ggml.tokens"), "", "", "tokenizer.ggml.tokens"},
      {"tokens as numbers", set("tokenizer.ggml.tokens", GgufValue::i32_array({1, 2, 3})), "", "",
       "tokenizer.ggml.tokens"},
      {"token types shorter than the tokens",
       set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1})), "", "", "token_type"},
      {"bos out of range", set("tokenizer.ggml.bos_token_id", GgufValue::u32(10000000)), "", "",
       "bos"},
      {"eos out of range", set("tokenizer.ggml.eos_token_id", GgufValue::u32(10000000)), "", "",
       "eos"},
      {"merges naming unknown tokens",
       set("tokenizer.ggml.merges", GgufValue::string_array({"\xe2\x98\x83zz q\xe2\x98\x83"})), "",
       "", "merge"},
      {"a merge without a space", set("tokenizer.ggml.merges", GgufValue::string_array({"abc"})),
       "", "", "merge"},
      {"another tokenizer model", set("tokenizer.ggml.model", GgufValue::string("llama")), "", "",
       "llama"},
      {"another pre-tokenizer", set("tokenizer.ggml.pre", GgufValue::string("gpt-4o")), "", "",
       "gpt-4o"},
      {"a duplicate token",
       [](const GgufFile& f, GgufWriter& w) {
         auto t = tokens_of(f);
         t[300] = t[301];
         w.set("tokenizer.ggml.tokens", GgufValue::string_array(t));
       },
       "", "", "token"},
      {"no embeddings", {}, "token_embd.weight", "", "token_embd.weight"},
      {"no first attention query", {}, "blk.0.attn_q.weight", "", "blk.0.attn_q.weight"},
      {"no last norm", {}, "output_norm.weight", "", "output_norm.weight"},
      {"embeddings transposed", {}, "", "token_embd.weight", "token_embd.weight"},
      {"a feed-forward matrix transposed",
       {},
       "",
       "blk.1.ffn_down.weight",
       "blk.1.ffn_down.weight"},
  };
}

TEST(ModelHostileTest, EveryBrokenModelIsRefusedByName) {
  const auto src = GgufFile::open(kSource);
  ASSERT_TRUE(src.has_value());
  ASSERT_TRUE(load_error(kSource).empty()) << load_error(kSource);  // the baseline loads
  for (const Edit& e : edits()) {
    const std::string path = rewrite(e);
    const long size = static_cast<long>(std::filesystem::file_size(path));
    testing_support::reset_heap_peak();
    const long before = testing_support::heap_live_bytes();
    const std::string msg = load_error(path);
    const long grew = testing_support::heap_peak_bytes() - before;
    EXPECT_FALSE(msg.empty()) << e.name << ": accepted";
    if (!e.fragment.empty()) {
      EXPECT_NE(msg.find(e.fragment), std::string::npos) << e.name << ": " << msg;
    }
    EXPECT_LE(grew, size + (64l << 20))
        << e.name << ": the heap grew by " << grew << " bytes for a " << size << "-byte file";
    std::printf("  %-40s -> %s\n", e.name.c_str(), msg.c_str());
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace ponder
