#include "cli/model_session.h"

#include "base/thread_pool.h"
#include "base/timer.h"
#include "cpu/topology.h"

namespace ponder::cli {

Expected<std::unique_ptr<ModelSession>> ModelSession::open(const std::string& path) {
  Timer t;
  PONDER_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  file.mapping().read_ahead();  // the load's pass over the weights then reads at full speed
  auto tok = text::Tokenizer::from_gguf(file);
  if (!tok.has_value()) return tok.status().with_context(path);
  // Moving the GgufFile keeps its map (and so every pointer into it) where it is.
  auto s =
      std::make_unique<ModelSession>(ModelSession{std::move(file), std::move(*tok), nullptr, 0});
  auto model = Qwen2Model::load(s->file);
  if (!model.has_value()) return model.status().with_context(path);
  s->model = std::move(*model);
  if (s->tokenizer.n_vocab() > s->model->config().n_vocab) {
    return Status::errorf("{}: the tokenizer has {} tokens but the model's embedding only {}", path,
                          s->tokenizer.n_vocab(), s->model->config().n_vocab);
  }
  s->load_s = t.seconds();
  return s;
}

Expected<text::ChatTemplate> ModelSession::chat_template(const std::string& name) const {
  return text::ChatTemplate::for_model(file, name);
}

int default_threads() { return cpu_topology().default_threads(); }

}  // namespace ponder::cli
