// The grammar layer on arbitrary input (a request may carry a GBNF grammar or a JSON Schema).
// Byte 0 picks the mode. GBNF: compile never crashes; for a compiled grammar, every token a mask
// allows is accepted by the matcher, and no refused one is (over a small vocabulary and a few
// steps). JSON Schema: a schema that converts must give a grammar that compiles (but for the
// size bound and $ref cycles without a value between them).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

namespace {

const std::shared_ptr<const ponder::grammar::Vocabulary>& vocab() {
  static const auto v = std::make_shared<const ponder::grammar::Vocabulary>(
      std::vector<std::string>{"",    "a",    "b",    "ab",       "{",
                               "}",   "\"",   ":",    ",",        " ",
                               "\n",  "0",    "12",   "-",        ".",
                               "e",   "true", "null", "[",        "]",
                               "\\",  "\xC3", "\xA9", "\xC3\xA9", "\xE2\x86\x92",
                               "x",   "yz",   "aaaa", "\"a\"",    "{\"",
                               "\":", "\t"});
  return v;
}

void walk(const std::shared_ptr<ponder::grammar::Grammar>& g, const uint8_t* data, size_t size) {
  ponder::grammar::Matcher m(g, vocab());
  const auto& v = *vocab();
  for (size_t step = 0; step < 8 && !m.complete(); ++step) {
    const auto mask = m.allowed();
    std::vector<int32_t> ok;
    for (int32_t t = 0; t < v.n_vocab(); ++t) {
      const bool allowed = ((*mask)[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
      const std::string next = m.consumed() + v.bytes(t);
      if (allowed != (!v.bytes(t).empty() && g->accepts_prefix(next)))
        std::abort();  // the mask is exact
      if (allowed) ok.push_back(t);
    }
    if (ok.empty()) return;
    const int32_t pick = ok[(step < size ? data[step] : step) % ok.size()];
    if (!m.accept_token(pick)) std::abort();
  }
  if (m.accepting() != g->accepts(m.consumed())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    auto g = ponder::grammar::Grammar::compile(text);
    if (g.has_value()) walk(*g, data, size);
    return 0;
  }
  const nlohmann::json schema = nlohmann::json::parse(text, nullptr, false);
  if (schema.is_discarded()) return 0;
  auto gbnf = ponder::grammar::json_schema_to_gbnf(schema);
  if (!gbnf.has_value()) return 0;
  auto g = ponder::grammar::Grammar::compile(*gbnf);
  if (!g.has_value()) {
    // Only the size bound, and a $ref cycle with no value in between ({"$ref": "#"}: left
    // recursion, a 400 at submission), may refuse what the schema compiler wrote.
    const std::string& m = g.status().message();
    if (m.find("expands to more than") == std::string::npos &&
        m.find("left-recursive") == std::string::npos)
      std::abort();
    return 0;
  }
  walk(*g, data, size);
  return 0;
}
