#include "cli/model_session.h"

#include <fmt/core.h>

#include "base/thread_pool.h"
#include "base/timer.h"
#include "cpu/topology.h"

namespace ponder::cli {

namespace {

// Reads the file's pages in, in twenty steps, saying how far it got (the share `span` of the load).
void read_in(const GgufFile& file, double span,
             const std::function<void(double, const std::string&)>& progress) {
  const uint8_t* p = file.bytes();
  const size_t n = file.file_size();
  constexpr int kSteps = 20;
  volatile uint8_t sink = 0;
  for (int step = 0; step < kSteps; ++step) {
    const size_t begin = n * step / kSteps, end = n * (step + 1) / kSteps;
    uint8_t acc = 0;
    for (size_t i = begin; i < end; i += 4096) acc ^= p[i];
    sink = sink ^ acc;
    progress(span * (step + 1) / kSteps, "reading the weights");
  }
}

}  // namespace

Expected<std::unique_ptr<ModelSession>> ModelSession::open(
    const std::string& path, const X16CacheOptions& x16_cache,
    const std::function<void(double, const std::string&)>& progress) {
  Timer t;
  PONDER_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  file.mapping().read_ahead();        // the load's pass over the weights then reads at full speed
  constexpr double kReadShare = 0.7;  // of the load's time, roughly, on a cold page cache
  if (progress) read_in(file, kReadShare, progress);
  auto tok = text::Tokenizer::from_gguf(file);
  if (!tok.has_value()) return tok.status().with_context(path);
  // Moving the GgufFile keeps its map (and so every pointer into it) where it is.
  auto s = std::make_unique<ModelSession>(
      ModelSession{std::move(file), std::move(*tok), nullptr, 0, x16_cache});
  if (progress) progress(kReadShare, "laying out the weights");
  auto model = Qwen2Model::load(s->file, Qwen2Model::x16_default(), 0, x16_cache);
  if (!model.has_value()) return model.status().with_context(path);
  s->model = std::move(*model);
  if (s->tokenizer.n_vocab() > s->model->config().n_vocab) {
    return Status::errorf("{}: the tokenizer has {} tokens but the model's embedding only {}", path,
                          s->tokenizer.n_vocab(), s->model->config().n_vocab);
  }
  s->load_s = t.seconds();
  if (progress) progress(1.0, "ready");
  return s;
}

std::string ModelSession::x16_cache_summary() const {
  if (x16_cache.dir.empty()) return "x16 cache off";
  const X16CacheUsage u = x16_cache_usage(x16_cache.dir);
  if (model->x16_copy_bytes() < x16_cache.min_bytes) {
    return fmt::format(
        "x16 cache {}: this model's layout is not kept (under {} MB); {} file(s) "
        "{:.2f} GB of at most {:.2f} GB",
        x16_cache.dir, x16_cache.min_bytes >> 20, u.files, u.bytes / 1e9,
        x16_cache.max_bytes / 1e9);
  }
  return fmt::format(
      "x16 cache {}: this model's layout {:.2f} GB ({}), {} file(s) {:.2f} GB of at most {:.2f} GB",
      x16_cache.dir, model->x16_copy_bytes() / 1e9,
      model->x16_from_cache() ? "read from it" : "written after the start", u.files, u.bytes / 1e9,
      x16_cache.max_bytes / 1e9);
}

Expected<text::ChatTemplate> ModelSession::chat_template(const std::string& name) const {
  return text::ChatTemplate::for_model(file, name);
}

int default_threads() { return cpu_topology().default_threads(); }

}  // namespace ponder::cli
