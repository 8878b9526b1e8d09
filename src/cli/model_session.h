// ModelSession: what every command that runs a model needs: the mapped GGUF file, its
// tokenizer, chat template and Qwen2 model, loaded with clear errors and timed.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/qwen2_model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ponder::cli {

struct ModelSession {
  GgufFile file;
  text::Tokenizer tokenizer;
  std::unique_ptr<Qwen2Model> model;
  double load_s = 0;
  X16CacheOptions x16_cache;  // where the model's x16 layout was looked for and is kept

  // progress, if given, hears how far the load is (0..1) and what it does: the file's pages are
  // then read in by this call (the first pass of the load would read them anyway), so the
  // fraction follows the disk.
  static Expected<std::unique_ptr<ModelSession>> open(
      const std::string& path, const X16CacheOptions& x16_cache = x16_cache_default(),
      const std::function<void(double, const std::string&)>& progress = {});
  // A line for the log: the x16 cache's directory, this model's file and the bound.
  std::string x16_cache_summary() const;
  // template_name: "" to detect from the file, else "deepseek-r1" / "chatml".
  Expected<text::ChatTemplate> chat_template(const std::string& template_name) const;
};

// Threads to use when the user gives none: the machine's cores.
int default_threads();

}  // namespace ponder::cli
