#include "runtime/constrained.h"

#include <algorithm>
#include <random>
#include <vector>

#include "base/timer.h"
#include "grammar/program.h"

namespace ponder {

std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const text::Tokenizer& tokenizer,
                                                              int32_t n_vocab) {
  std::vector<std::string> bytes(static_cast<size_t>(std::max(n_vocab, tokenizer.n_vocab())));
  for (int32_t t = 0; t < tokenizer.n_vocab(); ++t) {
    const text::TokenType type = tokenizer.token_type(t);
    if (type == text::TokenType::kNormal || type == text::TokenType::kByte)
      bytes[static_cast<size_t>(t)] = tokenizer.token_to_bytes(t);
  }
  bytes.resize(static_cast<size_t>(n_vocab));
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes));
}

Expected<GrammarBenchResult> run_grammar_bench(
    const std::string& gbnf, std::shared_ptr<const grammar::Vocabulary> shared_vocab,
    int32_t n_steps, uint64_t seed) {
  const grammar::Vocabulary& vocab = *shared_vocab;
  GrammarBenchResult r;
  Timer compile;
  PONDER_ASSIGN_OR_RETURN(std::shared_ptr<grammar::Grammar> g, grammar::Grammar::compile(gbnf));
  r.compile_ms = compile.seconds() * 1000;
  grammar::Matcher m(g, shared_vocab);
  std::mt19937_64 rng(seed);
  std::vector<double> ms;
  std::vector<int32_t> allowed;
  for (int32_t step = 0; step < n_steps && !m.complete(); ++step) {
    Timer t;
    const auto mask = m.allowed();
    ms.push_back(t.seconds() * 1000);
    allowed.clear();
    for (int32_t tok = 0; tok < vocab.n_vocab(); ++tok) {
      if (((*mask)[static_cast<size_t>(tok) >> 6] >> (tok & 63)) & 1) allowed.push_back(tok);
    }
    if (allowed.empty()) break;
    // A model's tokens are mostly short pieces: the shortest of a few random candidates.
    int32_t pick = allowed[rng() % allowed.size()];
    for (int k = 0; k < 3; ++k) {
      const int32_t other = allowed[rng() % allowed.size()];
      if (vocab.bytes(other).size() < vocab.bytes(pick).size()) pick = other;
    }
    if (!m.accept_token(pick)) return Status::error("the grammar refused a token its mask allowed");
  }
  r.n_steps = static_cast<int32_t>(ms.size());
  if (!ms.empty()) {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    r.mask_p50_ms = sorted[sorted.size() / 2];
    r.mask_p99_ms = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    r.mask_max_ms = sorted.back();
    double sum = 0;
    for (double x : ms) sum += x;
    r.mask_mean_ms = sum / static_cast<double>(ms.size());
  }
  auto lock = g->program().lock();
  r.n_states = static_cast<int64_t>(g->program().n_states());
  return r;
}

}  // namespace ponder
