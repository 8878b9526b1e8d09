// Hostile GGUF files: each must fail with a clear message, never crash, abort or allocate much
// more than the file's size (run under ASan in CI).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace ponder {
namespace {

// Builds GGUF images byte by byte, so that any field can be made wrong.
class Builder {
 public:
  Builder& u32(uint32_t v) { return raw(&v, 4); }
  Builder& u64(uint64_t v) { return raw(&v, 8); }
  Builder& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Builder& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  Builder& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  Builder& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  Builder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Builder& pad(size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  Builder& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

std::string parse_error(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "test.gguf");
  return f.has_value() ? "" : f.status().message();
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  const std::string msg = parse_error(bytes);
  ASSERT_FALSE(msg.empty()) << "expected an error containing: " << fragment;
  EXPECT_NE(msg.find(fragment), std::string::npos) << "message: " << msg;
}

// A valid small file: two keys, two F32 tensors.
Builder valid_file() {
  Builder b;
  b.header(2, 2).kv_u32("general.alignment", 32).str("name").u32(8).str("tiny");
  b.tensor("a", {8, 2}, 0, 0).tensor("b", {4}, 0, 64);
  b.pad(32).zeros(64 + 16);
  return b;
}

TEST(GgufHostileTest, ValidBaselineParses) {
  auto bytes = valid_file().bytes;
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "ok");
  ASSERT_TRUE(f.has_value()) << f.status().message();
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST(GgufHostileTest, EveryTruncationFailsCleanly) {
  auto bytes = valid_file().bytes;
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_FALSE(parse_error(cut).empty()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(GgufHostileTest, BadMagicAndVersions) {
  expect_error({}, "truncated file: magic");
  Builder bad;
  bad.u32(0x12345678).u32(3).u64(0).u64(0);
  expect_error(bad.bytes, "not a GGUF file");
  expect_error(Builder().header(0, 0, 1).bytes, "version 1 is not supported");
  expect_error(Builder().header(0, 0, 99).bytes, "unsupported GGUF version 99");
  expect_error(Builder().header(0, 0, 0x03000000).bytes, "big-endian");
  EXPECT_EQ(parse_error(Builder().header(0, 0, 2).bytes), "");  // v2 is fine
}

TEST(GgufHostileTest, ImpossibleCounts) {
  expect_error(Builder().header(0, ~0ull).bytes, "metadata count");
  expect_error(Builder().header(1ull << 40, 0).bytes, "tensor count");
}

TEST(GgufHostileTest, HugeStringsAndArrays) {
  expect_error(Builder().header(0, 1).u64(~0ull).zeros(16).bytes, "metadata key");
  expect_error(Builder().header(0, 1).str("k").u32(8).u64(1ull << 40).bytes, "string value");
  // Array of u32 whose byte count overflows 64 bits.
  expect_error(Builder().header(0, 1).str("k").u32(9).u32(4).u64(1ull << 62).bytes,
               "array of 4611686018427387904 u32");
  expect_error(Builder().header(0, 1).str("k").u32(9).u32(8).u64(1ull << 50).bytes,
               "strings cannot fit");
  expect_error(Builder().header(0, 1).str("k").u32(9).u32(9).u64(1ull << 50).bytes,
               "arrays cannot fit");
}

TEST(GgufHostileTest, NestedArraysTooDeep) {
  Builder b;
  b.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 10; ++i) b.u32(9).u64(1);
  b.u32(4).u64(0);
  expect_error(b.bytes, "nested deeper");
}

TEST(GgufHostileTest, UnknownValueTypes) {
  expect_error(Builder().header(0, 1).str("k").u32(13).u32(0).bytes,
               "key k: unknown value type 13");
  expect_error(Builder().header(0, 1).str("k").u32(9).u32(77).u64(1).bytes,
               "unknown element type 77");
  expect_error(Builder().header(0, 1).str("k").u32(7).raw("\x02", 1).bytes, "bool value 2");
}

TEST(GgufHostileTest, DuplicateKeysAndEmptyKeys) {
  expect_error(Builder().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes,
               "duplicate metadata key a");
  expect_error(Builder().header(0, 1).kv_u32("", 1).bytes, "empty key");
}

TEST(GgufHostileTest, BadAlignment) {
  expect_error(Builder().header(0, 1).str("general.alignment").u32(8).str("32").bytes,
               "key general.alignment: expected u32, found string");
  expect_error(Builder().header(0, 1).kv_u32("general.alignment", 0).bytes, "not a power of two");
  expect_error(Builder().header(0, 1).kv_u32("general.alignment", 48).bytes, "not a power of two");
}

Builder one_tensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data_bytes) {
  Builder b;
  b.header(1, 0).tensor("w", std::move(dims), type, offset).pad(32).zeros(data_bytes);
  return b;
}

TEST(GgufHostileTest, BadTensorShapes) {
  expect_error(one_tensor({4, 0}, 0, 0, 64).bytes, "tensor w: dimension 1 is zero");
  expect_error(one_tensor({}, 0, 0, 64).bytes, "0 dimensions");
  expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 64).bytes, "5 dimensions");
  expect_error(one_tensor({1ull << 32, 1ull << 32}, 0, 0, 64).bytes, "element count overflows");
  expect_error(one_tensor({1ull << 63}, 0, 0, 64).bytes, "element count overflows");
  expect_error(one_tensor({1ull << 40, 1}, 0, 0, 64).bytes, "need more bytes than the file has");
  expect_error(one_tensor({100}, 12, 0, 4096).bytes,
               "row length 100 is not a multiple of the Q4_K block size 256");
}

TEST(GgufHostileTest, UnknownTensorTypesAreNamed) {
  expect_error(one_tensor({256}, 16, 0, 4096).bytes, "type IQ2_XXS is not supported");
  expect_error(one_tensor({256}, 1000, 0, 4096).bytes, "type type 1000 is not supported");
}

TEST(GgufHostileTest, TensorDataOutsideTheFileOrMisaligned) {
  expect_error(one_tensor({16}, 0, 0, 32).bytes, "past the end");
  expect_error(one_tensor({4}, 0, 64, 32).bytes, "past the end");
  expect_error(one_tensor({4}, 0, ~0ull & ~31ull, 32).bytes, "past the end");
  expect_error(one_tensor({4}, 0, 8, 64).bytes, "offset 8 is not a multiple of the alignment 32");
  Builder b;
  b.header(1, 0).tensor("w", {4}, 0, 0);  // no data section at all
  expect_error(b.bytes, "truncated file: tensor data should start at offset 64");
}

TEST(GgufHostileTest, OverlappingAndDuplicateTensors) {
  Builder b;
  b.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad(32).zeros(128);
  expect_error(b.bytes, "tensors a and b overlap");
  Builder d;
  d.header(2, 0).tensor("a", {4}, 0, 0).tensor("a", {4}, 0, 32).pad(32).zeros(128);
  expect_error(d.bytes, "duplicate tensor name a");
}

TEST(GgufHostileTest, RandomByteFlipsNeverCrash) {
  const auto base = valid_file().bytes;
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto bytes = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      const size_t pos = rng() % bytes.size();
      if (rng() % 2) {
        bytes[pos] = static_cast<uint8_t>(rng());
      } else {
        bytes[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
    }
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "fuzz");
    if (f.has_value()) {
      ++parsed;
      for (const TensorInfo& t : f->tensors()) {
        ASSERT_GE(t.data, bytes.data());
        ASSERT_LE(t.data + t.n_bytes, bytes.data() + bytes.size());
      }
    } else {
      ASSERT_FALSE(f.status().message().empty());
    }
  }
  EXPECT_GT(parsed, 0);  // flips in tensor data or padding still parse
}

}  // namespace
}  // namespace ponder
