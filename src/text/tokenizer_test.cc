#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "text/bpe.h"
#include "text/nfc.h"
#include "text/pre_tokenizer.h"
#include "text/test_util.h"
#include "text/utf8.h"

namespace ponder::text {
namespace {

using testing::r1_tokenizer;
using testing::shared_path;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> load_jsonl_cases() {
  std::vector<Case> cases;
  std::ifstream f(shared_path("tokenizer/cases.jsonl"));
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  return cases;
}

// The .inp/.out pairs as llama.cpp's test-tokenizer-0 reads them: inputs separated by
// "\n__ggml_vocab_test__\n", one line of ids per input.
std::vector<Case> load_ggml_vocab_cases() {
  const std::string base = shared_path("tokenizer/ggml-vocab-deepseek-r1-qwen.gguf");
  const std::string raw = read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<Case> cases;
  std::ifstream out(base + ".out");
  size_t i = 0;
  for (std::string line; std::getline(out, line); ++i) {
    Case c;
    c.text = i < inputs.size() ? inputs[i] : std::string();
    std::istringstream ss(line);
    for (int32_t id; ss >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(inputs.size(), cases.size());
  return cases;
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

TEST(Tokenizer, LoadsVocabulary) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 151936);
  EXPECT_EQ(tok->bos(), 151646);
  EXPECT_EQ(tok->eos(), 151643);
  EXPECT_EQ(tok->pad(), 151643);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->is_control(151643));
  EXPECT_FALSE(tok->is_control(151648));  // <think> is USER_DEFINED
  EXPECT_TRUE(tok->is_added(151648));
  EXPECT_TRUE(tok->is_eog(151643));
  EXPECT_TRUE(tok->is_eog(151647));  // <|EOT|>
  EXPECT_EQ(tok->find_token("<think>"), 151648);
  EXPECT_EQ(tok->find_token("<｜Assistant｜>"), 151645);
  EXPECT_EQ(tok->find_token("Ġthe"), 279);
  EXPECT_EQ(tok->find_token("no such token!"), std::nullopt);
  EXPECT_EQ(tok->token_to_bytes(279), " the");
  EXPECT_EQ(tok->token_to_bytes(151648), "<think>");
  EXPECT_EQ(tok->token_to_bytes(-1), "");
  EXPECT_EQ(tok->token_to_bytes(151936), "");
}

TEST(Tokenizer, CasesJsonl) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<Case> cases = load_jsonl_cases();
  ASSERT_EQ(cases.size(), 135u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok->encode(cases[i].text, /*parse_special=*/true);
    if (got != cases[i].ids) {
      ++failures;
      ADD_FAILURE() << "case " << i << " text: " << nlohmann::json(cases[i].text).dump()
                    << "\n  expected: " << ids_string(cases[i].ids)
                    << "\n  got:      " << ids_string(got);
    }
  }
  EXPECT_EQ(failures, 0);
}

// llama.cpp's test-tokenizer-0 encodes these with add_special = false and parse_special = false;
// the expected ids come from the Hugging Face tokenizer.
TEST(Tokenizer, GgmlVocabPairs) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<Case> cases = load_ggml_vocab_cases();
  ASSERT_GT(cases.size(), 40u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok->encode(cases[i].text, /*parse_special=*/false);
    if (got != cases[i].ids) {
      ++failures;
      ADD_FAILURE() << "input " << i << ": " << nlohmann::json(cases[i].text).dump()
                    << "\n  expected: " << ids_string(cases[i].ids)
                    << "\n  got:      " << ids_string(got);
    }
  }
  EXPECT_EQ(failures, 0);
}

std::string nfc(const std::string& s) {
  std::string out;
  return nfc_normalize(s, &out) ? out : s;
}

TEST(Tokenizer, DecodeRoundTrips) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  std::vector<Case> cases = load_jsonl_cases();
  for (Case& c : load_ggml_vocab_cases()) cases.push_back(std::move(c));
  for (const Case& c : cases) {
    EXPECT_EQ(tok->decode(tok->encode(c.text, false)), nfc(c.text));
    EXPECT_EQ(tok->decode(tok->encode(c.text, true)), nfc(c.text));
  }
  // Invalid UTF-8 survives too: every byte has a token.
  const std::string bad = "a\xFF\xC3(b\xE2\x82 \xF0\x9F\x98";
  EXPECT_EQ(tok->decode(tok->encode(bad, false)), bad);
}

TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "<｜User｜>hi<｜Assistant｜><think>\nx</think><｜end▁of▁sentence｜>";
  EXPECT_EQ(tok->encode(text, true),
            (std::vector<int32_t>{151644, 6023, 151645, 151648, 198, 87, 151649, 151643}));
  for (int32_t id : tok->encode(text, false)) {
    EXPECT_FALSE(tok->is_added(id)) << id;
  }
  EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
  // A prefix of an added token is plain text.
  for (int32_t id : tok->encode("<think <｜Assistant", true)) EXPECT_FALSE(tok->is_added(id));
}

TEST(Tokenizer, EmptyAndTiny) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->encode("", true).empty());
  EXPECT_EQ(tok->encode(" ", false), std::vector<int32_t>{220});
  EXPECT_EQ(tok->encode("\n", false), std::vector<int32_t>{198});
}

// The scan and the heap merge orders must agree on any input: random merge tables over a
// four-symbol alphabet, random sequences, including ties (the same pair several times).
TEST(Bpe, ScanAndHeapAgree) {
  std::mt19937 rng(42);
  for (int table = 0; table < 50; ++table) {
    MergeTable merges;
    int32_t n_ids = 4;
    for (int32_t rank = 0; rank < 40; ++rank) {
      const int32_t l = static_cast<int32_t>(rng() % n_ids);
      const int32_t r = static_cast<int32_t>(rng() % n_ids);
      merges.insert(l, r, {rank, n_ids++});
    }
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<int32_t> a(1 + rng() % 300);
      for (int32_t& x : a) x = static_cast<int32_t>(rng() % 4);
      std::vector<int32_t> b = a;
      BpeScratch s1, s2;
      bpe_merge(merges, &a, &s1, BpeMethod::kScan);
      bpe_merge(merges, &b, &s2, BpeMethod::kHeap);
      ASSERT_EQ(a, b) << "table " << table << " trial " << trial;
    }
  }
}

TEST(Tokenizer, LongRunsAreFast) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  // One 200 kB piece: quadratic merging would take minutes.
  const std::string letters(200000, 'a');
  const std::vector<int32_t> ids = tok->encode(letters, false);
  EXPECT_EQ(tok->decode(ids), letters);
  const std::string spaces(200000, ' ');
  EXPECT_EQ(tok->decode(tok->encode(spaces, false)), spaces);
}

// Long texts go through the per-call piece cache; the ids must equal encoding each piece alone.
TEST(Tokenizer, PieceCacheIsTransparent) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  std::string text;
  for (int round = 0; round < 3; ++round) {
    for (const Case& c : load_jsonl_cases()) text += c.text + "\n\n";
  }
  text = nfc(text);
  ASSERT_GT(text.size(), 10000u);
  PreTokenizer pre;
  std::vector<std::string_view> pieces;
  pre.split(text, &pieces);
  std::vector<int32_t> expected;
  for (std::string_view p : pieces) tok->encode_append(p, false, &expected);
  EXPECT_EQ(tok->encode(text, false), expected);
}

// Encoding is const and keeps its scratch space per thread: threads must not disturb each other.
TEST(Tokenizer, ThreadSafe) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<Case> cases = load_jsonl_cases();
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        for (const Case& c : cases) failures[t] += tok->encode(c.text, true) != c.ids;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(Tokenizer, RejectsBadVocabularies) {
  Tokenizer::Vocab v;
  EXPECT_FALSE(Tokenizer::from_vocab(v).has_value());
  v.tokens = {"a", "b"};
  auto t = Tokenizer::from_vocab(v);
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.status().message().find("no token for byte"), std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace ponder::text
