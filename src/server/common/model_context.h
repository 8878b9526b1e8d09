// ModelContext: what a request needs of the one model it runs on: that model's Engine (and so its
// prefix cache), tokenizer and chat template, the name answers carry, the file's facts and
// fingerprint (the response cache's keys), and the constraints compiled for it.
// A ModelRef holds the model loaded: while any ModelRef to it lives (a request waiting, running or
// framing its last events), the registry (server/models/model_registry.h) never unloads it.
// Depends on runtime/engine.h, text, grammar, server/common/model_facts.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "runtime/engine.h"
#include "server/common/model_facts.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ponder::server {

struct ModelContext {
  ModelContext(Engine& e, const text::Tokenizer& t, const text::ChatTemplate& c)
      : engine(e), tokenizer(t), chat_template(c) {}
  Engine& engine;
  const text::Tokenizer& tokenizer;
  const text::ChatTemplate& chat_template;
  std::string model_name;    // what /v1/models lists and answers carry (--alias, else the stem)
  std::string fingerprint;   // the model file's (response cache keys)
  ModelFacts model;          // the file's template, size, quantization, metadata
  std::string numerics;      // the model's (response cache keys)
  int64_t created_unix = 0;  // when the model was loaded (/v1/models "created")
  grammar::GrammarCache grammars{64};  // compiled constraints by their text (their masks shared)
  bool r1() const { return chat_template.format() == text::ChatFormat::kDeepSeekR1; }
};

// A model in use: keeps it loaded while held (see above). Copy it into whatever outlives the call.
using ModelRef = std::shared_ptr<ModelContext>;

}  // namespace ponder::server
