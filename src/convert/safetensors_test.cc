// Safetensors reading treats the file as hostile: every broken header is a clear error naming the
// file and the tensor. Also the writer/reader round trip and the sharded-folder checks.
#include "convert/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ponder {
namespace {

namespace fs = std::filesystem;

// 8-byte length + header + data.
std::vector<uint8_t> image(const std::string& header, size_t n_data) {
  std::vector<uint8_t> out(8 + header.size() + n_data, 0);
  const uint64_t len = header.size();
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < n_data; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(i);
  return out;
}

std::string parse_error(const std::string& header, size_t n_data) {
  auto img = image(header, n_data);
  auto f = SafetensorsFile::parse(img.data(), img.size(), "m.safetensors");
  return f.has_value() ? "" : f.status().message();
}

std::string tmp_dir(const std::string& name) {
  const std::string dir = std::string(PONDER_BINARY_DIR) + "/convert_test_tmp/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(SafetensorsTest, ReadsTensorsInPlace) {
  auto img = image(R"({"__metadata__":{"format":"pt"},)"
                   R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                   R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
                   R"("c":{"dtype":"F16","shape":[],"data_offsets":[32,34]}})",
                   34);
  auto f = SafetensorsFile::parse(img.data(), img.size(), "m.safetensors");
  ASSERT_TRUE(f.has_value()) << f.status().message();
  ASSERT_EQ(f->tensors().size(), 3u);
  const StTensor& a = f->tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, StDtype::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.n_elements, 6);
  EXPECT_EQ(a.n_bytes, 24);
  EXPECT_EQ(a.data[1], 1);
  EXPECT_EQ(f->tensors()[1].dtype, StDtype::kBF16);
  EXPECT_EQ(f->tensors()[1].data[0], 24);
  EXPECT_EQ(f->tensors()[2].n_elements, 1);  // a scalar
}

TEST(SafetensorsTest, HostileHeadersAreClearErrors) {
  const std::string ok_a = R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  // Too short for the length field.
  {
    uint8_t b[4] = {};
    auto f = SafetensorsFile::parse(b, 4, "m.safetensors");
    ASSERT_FALSE(f.has_value());
    EXPECT_NE(f.status().message().find("too short"), std::string::npos);
  }
  // Header length past the file.
  {
    auto img = image("{" + ok_a + "}", 24);
    const uint64_t huge = 1ull << 40;
    std::memcpy(img.data(), &huge, 8);
    auto f = SafetensorsFile::parse(img.data(), img.size(), "m.safetensors");
    ASSERT_FALSE(f.has_value());
    EXPECT_NE(f.status().message().find("header length 1099511627776 runs past the end"),
              std::string::npos)
        << f.status().message();
  }
  auto expect_error = [](const std::string& header, size_t n, const std::string& what) {
    const std::string msg = parse_error(header, n);
    EXPECT_NE(msg.find(what), std::string::npos) << "header " << header << "\nmessage: " << msg;
    EXPECT_NE(msg.find("m.safetensors"), std::string::npos) << msg;
  };
  // Truncated data.
  expect_error("{" + ok_a + "}", 20, "tensor a: data_offsets [0, 24] run past the end of the data");
  // dtype/shape vs byte size.
  expect_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24,
               "tensor a: F32 of shape [2,3] needs 24 bytes, data_offsets give 20");
  expect_error(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,24]}})", 24,
               "needs 12 bytes");
  // dtypes.
  expect_error(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1,
               "tensor a: unknown dtype \"Q9\"");
  expect_error(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8,
               "tensor a: dtype I64 is not supported");
  expect_error(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, "missing or non-string dtype");
  // Shapes and offsets.
  expect_error(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
               "shape entry -1 is not a non-negative integer");
  expect_error(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4,
               "is too large");
  expect_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8,
               "end before they begin");
  expect_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4,
               "data_offsets must be two non-negative integers");
  expect_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
               R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
               24, "tensors a and b overlap");
  // Not JSON, not an object.
  expect_error(R"({"a": )", 0, "header is not valid JSON");
  expect_error(R"([1,2])", 0, "header is a JSON array");
  expect_error(R"({"a":[1]})", 0, "tensor a: header entry is a array");
}

TEST(SafetensorsTest, WriterRoundTripAndShardedFolders) {
  const std::string dir = tmp_dir("safetensors_rt");
  std::vector<float> a(6);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f;
  std::vector<uint16_t> b = {1, 2, 3, 4};
  ASSERT_TRUE(write_safetensors(dir + "/model-00001-of-00002.safetensors",
                                {{"x.a", StDtype::kF32, {2, 3}, a.data()}}));
  ASSERT_TRUE(write_safetensors(dir + "/model-00002-of-00002.safetensors",
                                {{"x.b", StDtype::kBF16, {4}, b.data()}}));
  nlohmann::json index = {
      {"weight_map",
       {{"x.a", "model-00001-of-00002.safetensors"}, {"x.b", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  {
    auto set = SafetensorsSet::open_dir(dir);
    ASSERT_TRUE(set.has_value()) << set.status().message();
    EXPECT_EQ(set->n_files(), 2u);
    const StTensor* t = set->find("x.a");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(std::memcmp(t->data, a.data(), 24), 0);
    ASSERT_NE(set->find("x.b"), nullptr);
    EXPECT_EQ(std::memcmp(set->find("x.b")->data, b.data(), 8), 0);
  }
  auto open_error = [&] {
    auto set = SafetensorsSet::open_dir(dir);
    return set.has_value() ? std::string() : set.status().message();
  };
  // The index names a tensor its shard does not hold.
  index["weight_map"]["x.b"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  EXPECT_NE(open_error().find("tensor x.b should be in"), std::string::npos) << open_error();
  // A shard that is missing, or outside the folder.
  index["weight_map"]["x.b"] = "model-00003-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  EXPECT_NE(open_error().find("cannot open"), std::string::npos) << open_error();
  EXPECT_NE(open_error().find("model-00003-of-00002.safetensors"), std::string::npos);
  index["weight_map"]["x.b"] = "../etc/passwd";
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  EXPECT_NE(open_error().find("is not a file name in the folder"), std::string::npos);
  // No weights at all.
  const std::string empty = tmp_dir("safetensors_empty");
  auto set = SafetensorsSet::open_dir(empty);
  ASSERT_FALSE(set.has_value());
  EXPECT_NE(set.status().message().find("no model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace ponder
