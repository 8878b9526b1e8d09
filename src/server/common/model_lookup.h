// The first step of every route that runs a model: the model the request names (its `model`
// field), loaded, before anything reads its tokenizer or engine. An unknown name is a 404
// (ApiError::model_not_found; each family answers it in its own shape); a model still loading is
// waited for (its progress given to the route, for streams that show it).
// Depends on server/common/server_context.h, server/models/model_registry.h.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "server/common/api_error.h"
#include "server/common/server_context.h"
#include "server/models/model_registry.h"

namespace ponder::server {

// The body's "model" (or, for Ollama's older clients, "name") when it is a string, else "".
std::string model_field(const nlohmann::json& body);

// Runs then(model) on the I/O thread once the named model is loaded (at once if it is), or
// fail(error): 404 model_not_found for a name no model answers to, 503 when the server stops,
// 500 when the model failed to load. on_progress is called while it loads. A client that goes
// away while its model loads gets fail(499) once it is loaded, and nothing is submitted for it.
void with_model(ServerContext& ctx, const std::string& name, const std::shared_ptr<Responder>& r,
                std::function<void(ModelRef)> then, std::function<void(const ApiError&)> fail,
                ModelRegistry::Progress on_progress = {});

// True when the named model is known and must be loaded first (a stream may show progress).
bool model_needs_load(ServerContext& ctx, const std::string& name);

// The load_progress object of a stream waiting for `model` (OpenAI and llama.cpp chunks carry it):
// {"model", "progress" (0 to 1), "time_ms"}.
nlohmann::json load_progress_json(const std::string& model, double fraction, double seconds);

// A stream whose model must load first opens at once (200, text/event-stream, `headers`) so that
// clients and proxies see bytes while a big model loads: beat() now and every keepalive_s until
// the returned flag is cleared (the route clears it when with_model calls then or fail). Null,
// and nothing written, when the request is no stream or its model needs no load.
std::shared_ptr<bool> open_stream_while_loading(ServerContext& ctx, const std::string& name,
                                                bool stream, const std::shared_ptr<Responder>& r,
                                                std::function<void()> beat,
                                                const HttpHeaders& headers = {});

// The loaded model of this name (or the first model when several are offered and none is named)
// for status routes (/props, /tokenize, ...): null when unknown; loads nothing.
ModelRef loaded_model(ServerContext& ctx, const std::string& name);

}  // namespace ponder::server
