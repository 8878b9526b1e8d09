#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gguf/gguf_file.h"

namespace ponder {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ponder_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(GgufWriterTest, RoundTripsEveryValueTypeAndTensors) {
  GgufWriter w;
  w.set("a.u8", GgufValue::u8(200));
  w.set("a.i8", GgufValue::i8(-5));
  w.set("a.u16", GgufValue::u16(60000));
  w.set("a.i16", GgufValue::i16(-30000));
  w.set("a.u32", GgufValue::u32(4000000000u));
  w.set("a.i32", GgufValue::i32(-2000000000));
  w.set("a.f32", GgufValue::f32(3.25f));
  w.set("a.bool", GgufValue::boolean(true));
  w.set("a.u64", GgufValue::u64(1ull << 60));
  w.set("a.i64", GgufValue::i64(-(1ll << 60)));
  w.set("a.f64", GgufValue::f64(-1e300));
  w.set("a.string", GgufValue::string("héllo\nworld"));
  w.set("a.strings", GgufValue::string_array({"x", "", "a longer string than fifteen bytes"}));
  w.set("a.f32s", GgufValue::f32_array({1.0f, -2.5f}));
  w.set("a.nested", GgufValue::array_of_arrays(
                        {GgufValue::i32_array({1, 2, 3}), GgufValue::string_array({"p", "q"})}));
  w.set_alignment(64);
  std::vector<float> t1(32 * 3);
  for (size_t i = 0; i < t1.size(); ++i) t1[i] = static_cast<float>(i) * 0.5f;
  std::vector<uint8_t> t2(34 * 2, 7);  // two Q8_0 blocks
  ASSERT_TRUE(w.add_tensor_bytes("t1", GgmlType::F32, {32, 3}, t1.data()).is_ok());
  ASSERT_TRUE(w.add_tensor_bytes("t2", GgmlType::Q8_0, {64}, t2.data()).is_ok());
  const std::string path = temp_path("roundtrip.gguf");
  ASSERT_TRUE(w.write(path).is_ok());

  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.has_value()) << f.status().message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  ASSERT_EQ(f->metadata().size(), w.metadata().size());
  for (size_t i = 0; i < w.metadata().size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, w.metadata()[i].first);
    EXPECT_TRUE(f->metadata()[i].second == w.metadata()[i].second) << w.metadata()[i].first;
  }
  const TensorInfo* a = f->find_tensor("t1");
  const TensorInfo* b = f->find_tensor("t2");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(std::memcmp(a->data, t1.data(), t1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(b->data, t2.data(), t2.size()), 0);
  EXPECT_EQ((b->data - f->tensors()[0].data) % 64, 0);
  std::filesystem::remove(path);
}

TEST(GgufWriterTest, RewritingARealModelIsIdentical) {
  auto src = GgufFile::open(std::string(PONDER_SHARED_DIR) + "/models/tiny-Q4_K_M.gguf");
  ASSERT_TRUE(src.has_value());
  GgufWriter w;
  for (const auto& [k, v] : src->metadata()) w.set(k, v);
  for (const TensorInfo& t : src->tensors()) {
    ASSERT_TRUE(w.add_tensor_bytes(t.name, t.type, t.shape, t.data).is_ok());
  }
  const std::string path = temp_path("rewrite.gguf");
  ASSERT_TRUE(w.write(path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.has_value());
  ASSERT_EQ(f->tensors().size(), src->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const TensorInfo& x = f->tensors()[i];
    const TensorInfo& y = src->tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.shape, y.shape);
    ASSERT_EQ(x.n_bytes, y.n_bytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.n_bytes), 0) << x.name;
  }
  EXPECT_EQ(f->file_size(), src->file_size());
  std::filesystem::remove(path);
}

TEST(GgufWriterTest, FailingProducerLeavesNoFile) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("t", GgmlType::F32, {4}, [](uint8_t*, int64_t) {
                 return Status::error("disk on fire");
               }).is_ok());
  const std::string path = temp_path("fail.gguf");
  Status st = w.write(path);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("disk on fire"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(GgufWriterTest, RejectsBadTensorShapes) {
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor_bytes("z", GgmlType::F32, {0}, nullptr).is_ok());
  EXPECT_FALSE(w.add_tensor_bytes("q", GgmlType::Q4_K, {128}, nullptr).is_ok());
  EXPECT_FALSE(w.add_tensor_bytes("d", GgmlType::F32, {1, 1, 1, 1, 1}, nullptr).is_ok());
  ASSERT_TRUE(w.add_tensor_bytes("x", GgmlType::F32, {1}, nullptr).is_ok());
  EXPECT_FALSE(w.add_tensor_bytes("x", GgmlType::F32, {1}, nullptr).is_ok());
}

TEST(GgufWriterTest, UnwritableDirectoryIsAClearError) {
  GgufWriter w;
  Status st = w.write("/nonexistent-dir/x.gguf");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/x.gguf.tmp"), std::string::npos);
}

}  // namespace
}  // namespace ponder
