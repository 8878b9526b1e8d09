// Broken Hugging Face folders: each is refused with a message naming the file, the tensor or the
// field and what was expected, and no output (nor its temp file) is left behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "convert/hf_converter.h"
#include "convert/hf_exporter.h"
#include "convert/json_file.h"
#include "gguf/gguf_file.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A good HF folder exported from the tiny model, copied fresh for each case.
class ConvertErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs each test in its own process, several at once.
    base_ = std::string(PONDER_BINARY_DIR) + "/convert_test_tmp/errors_base_" +
            std::to_string(::getpid());
    fs::remove_all(base_);
    auto f = GgufFile::open(std::string(PONDER_SHARED_DIR) + "/models/tiny-F16.gguf");
    ASSERT_TRUE(f.has_value()) << f.status().message();
    ASSERT_TRUE(export_hf(*f, base_));
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }
  void SetUp() override {
    dir_ = std::string(PONDER_BINARY_DIR) + "/convert_test_tmp/errors_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(base_, dir_ + "/hf", fs::copy_options::recursive);
    out_ = dir_ + "/out.gguf";
  }
  // Converts and returns the error message ("" on success); checks nothing was left behind.
  std::string convert_error() {
    ConvertOptions o;
    o.n_threads = 1;
    HfConverter c(o);
    Status st = c.open(dir_ + "/hf");
    if (st) st = c.write(out_);
    if (!st) {
      EXPECT_FALSE(fs::exists(out_));
      EXPECT_FALSE(fs::exists(out_ + ".tmp"));
    }
    return st ? "" : st.message();
  }
  void edit_json(const std::string& file, const std::function<void(json&)>& edit) {
    auto j = read_json_file(dir_ + "/hf/" + file);
    ASSERT_TRUE(j.has_value());
    edit(*j);
    ASSERT_TRUE(write_json_file(dir_ + "/hf/" + file, *j));
  }

  static std::string base_;
  std::string dir_, out_;
};
std::string ConvertErrorsTest::base_;

#define EXPECT_ERROR_HAS(msg, text) \
  EXPECT_NE((msg).find(text), std::string::npos) << "message: " << (msg)

TEST_F(ConvertErrorsTest, TheGoodFolderConverts) { EXPECT_EQ(convert_error(), ""); }

TEST_F(ConvertErrorsTest, TruncatedSafetensors) {
  const std::string st = dir_ + "/hf/model.safetensors";
  fs::resize_file(st, fs::file_size(st) - 1000);
  const std::string msg = convert_error();
  EXPECT_ERROR_HAS(msg, "model.safetensors: tensor ");
  EXPECT_ERROR_HAS(msg, "run past the end of the data");
}

TEST_F(ConvertErrorsTest, HeaderLengthPastTheFile) {
  const std::string st = dir_ + "/hf/model.safetensors";
  {
    std::fstream f(st, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t len = fs::file_size(st);
    f.write(reinterpret_cast<const char*>(&len), 8);
  }
  EXPECT_ERROR_HAS(convert_error(), "model.safetensors: header length");
}

TEST_F(ConvertErrorsTest, ShapeDisagreesWithConfig) {
  edit_json("config.json", [](json& j) { j["intermediate_size"] = 512; });
  const std::string msg = convert_error();
  EXPECT_ERROR_HAS(msg,
                   "tensor model.layers.0.mlp.gate_proj.weight has shape [768, 256], expected "
                   "[512, 256] from config.json");
}

TEST_F(ConvertErrorsTest, MissingAndUnknownTensors) {
  edit_json("config.json", [](json& j) { j["num_hidden_layers"] = 3; });
  EXPECT_ERROR_HAS(convert_error(), "tensor model.layers.2.input_layernorm.weight is missing");
  edit_json("config.json", [](json& j) { j["num_hidden_layers"] = 1; });
  EXPECT_ERROR_HAS(convert_error(), "tensor model.layers.1.");
  EXPECT_ERROR_HAS(convert_error(), "is past num_hidden_layers 1");
  edit_json("config.json", [](json& j) {
    j["num_hidden_layers"] = 2;
    j["tie_word_embeddings"] = false;
  });
  EXPECT_EQ(convert_error(), "");
}

TEST_F(ConvertErrorsTest, UnknownArchitecture) {
  edit_json("config.json", [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; });
  const std::string msg = convert_error();
  EXPECT_ERROR_HAS(msg, "config.json: architecture LlamaForCausalLM is not supported");
  EXPECT_ERROR_HAS(msg, "Qwen2ForCausalLM");
}

TEST_F(ConvertErrorsTest, MissingFiles) {
  fs::remove(dir_ + "/hf/tokenizer.json");
  EXPECT_ERROR_HAS(convert_error(), "cannot open " + dir_ + "/hf/tokenizer.json");
  fs::remove(dir_ + "/hf/config.json");
  EXPECT_ERROR_HAS(convert_error(), "cannot open " + dir_ + "/hf/config.json");
  fs::remove_all(dir_ + "/hf");
  EXPECT_ERROR_HAS(convert_error(), "is not a directory");
}

TEST_F(ConvertErrorsTest, MissingWeights) {
  fs::remove(dir_ + "/hf/model.safetensors");
  EXPECT_ERROR_HAS(convert_error(), "no model.safetensors");
}

TEST_F(ConvertErrorsTest, BadConfigAndTokenizerFields) {
  edit_json("config.json", [](json& j) { j["hidden_size"] = "big"; });
  EXPECT_ERROR_HAS(convert_error(),
                   "config.json: \"hidden_size\" is \"big\", expected a positive integer");
  edit_json("config.json", [](json& j) {
    j["hidden_size"] = 256;
    j["vocab_size"] = 100;
  });
  EXPECT_ERROR_HAS(convert_error(), "is past config.json's vocab_size 100");
  edit_json("config.json", [](json& j) { j.erase("vocab_size"); });
  edit_json("tokenizer.json", [](json& j) { j["model"]["merges"][3] = 7; });
  EXPECT_ERROR_HAS(convert_error(), "merge 7 is neither");
  edit_json("tokenizer.json", [](json& j) {
    j["model"]["merges"][3] = "a b";
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  });
  EXPECT_ERROR_HAS(convert_error(), "is not Qwen2's");
  edit_json("tokenizer.json", [](json& j) { j["model"]["type"] = "Unigram"; });
  EXPECT_ERROR_HAS(convert_error(), "model type \"Unigram\" is not supported");
}

TEST_F(ConvertErrorsTest, DtypeShapeMismatchInTheHeader) {
  // Rewrite the header so one tensor claims a dtype whose size does not match its bytes.
  const std::string st = dir_ + "/hf/model.safetensors";
  std::ifstream in(st, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  std::string header = bytes.substr(8, len);
  const size_t p = header.find("\"F16\"");
  ASSERT_NE(p, std::string::npos);
  header.replace(p, 5, "\"F32\"");
  std::ofstream(st, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, 8) << header << bytes.substr(8 + len);
  const std::string msg = convert_error();
  EXPECT_ERROR_HAS(msg, "model.safetensors: tensor ");
  EXPECT_ERROR_HAS(msg, "F32 of shape");
}

}  // namespace
}  // namespace ponder
