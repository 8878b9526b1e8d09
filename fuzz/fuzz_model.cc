// The model binding on arbitrary GGUF bytes: the Qwen2 config, every weight bound by name with
// its shape and type checked, the x16 copies made, then a forward pass of a 3-token prompt and
// one decode step on what was accepted. A file is loaded and run or refused with a Status, never
// a crash, a sanitizer report, an out-of-bounds read of the weights or an allocation beyond the
// bound. Seeds: whole tiny models of several weight types (scripts/make_fuzz_seeds.py); with
// PONDER_FUZZ_VERBOSE set, each input's fate is printed (`fuzz_model fuzz/corpus/fuzz_model/*`
// checks that the seeds load and run).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/qwen2_model.h"

namespace {

bool verbose() {
  static const bool v = std::getenv("PONDER_FUZZ_VERBOSE") != nullptr;
  return v;
}

int refused(const ponder::Status& s) {
  if (verbose()) std::fprintf(stderr, "fuzz_model: refused: %s\n", s.message().c_str());
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ponder::ThreadPool pool(1);
  auto file = ponder::GgufFile::parse(data, size, "fuzz.gguf");
  if (!file.has_value()) return refused(file.status());
  auto model =
      ponder::Qwen2Model::load(*file, /*x16=*/true, /*threads=*/1, ponder::X16CacheOptions{});
  if (!model.has_value()) return refused(model.status());
  ponder::Qwen2Model& m = **model;
  const int64_t block = 16;
  ponder::KvCache cache = m.make_cache(1, block);
  const std::vector<int32_t> table = {0};
  const int32_t n_vocab = static_cast<int32_t>(m.config().n_vocab);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  ponder::Batch prompt;
  prompt.block_tables.push_back(table);
  const int32_t tokens[] = {0, n_vocab - 1, n_vocab / 2};
  for (int32_t i = 0; i < 3; ++i) prompt.rows.push_back({tokens[i], i, 0, i == 2});
  if (auto s = m.forward(prompt, cache, logits.data(), pool); !s.is_ok()) return refused(s);
  ponder::Batch step;
  step.block_tables.push_back(table);
  step.rows.push_back({n_vocab / 3, 3, 0, true});
  if (auto s = m.forward(step, cache, logits.data(), pool); !s.is_ok()) return refused(s);
  if (verbose())
    std::fprintf(stderr, "fuzz_model: ran (%s, logit[0] %g)\n", m.config().summary().c_str(),
                 logits[0]);
  return 0;
}
