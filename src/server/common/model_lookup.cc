#include "server/common/model_lookup.h"

namespace ponder::server {

std::string model_field(const nlohmann::json& body) {
  if (!body.is_object()) return "";
  for (const char* key : {"model", "name"}) {
    if (auto it = body.find(key); it != body.end() && it->is_string())
      return it->get<std::string>();
  }
  return "";
}

void with_model(ServerContext& ctx, const std::string& name, const std::shared_ptr<Responder>& r,
                std::function<void(ModelRef)> then, std::function<void(const ApiError&)> fail,
                ModelRegistry::Progress on_progress) {
  const int index = ctx.models->find(name);
  if (index < 0) return fail(ApiError::model_not_found(name));
  auto gone = std::make_shared<bool>(false);
  if (ctx.models->peek(index) == nullptr) {
    r->on_disconnect([gone] { *gone = true; });  // replaced by the request's own once it runs
  }
  ctx.models->acquire(
      index,
      [then = std::move(then), fail = std::move(fail), name, gone](ModelRef m,
                                                                   const std::string& error) {
        if (*gone) {  // nothing is submitted; fail ends what the route began (its stream)
          return fail(ApiError{499, "the client went away while its model loaded", "client_gone",
                               "", "client_gone"});
        }
        if (m) return then(std::move(m));
        if (error == "the server is shutting down") return fail(ApiError::busy(error));
        fail(ApiError::internal("the model '" + name + "' could not be loaded: " + error));
      },
      std::move(on_progress));
}

bool model_needs_load(ServerContext& ctx, const std::string& name) {
  const int index = ctx.models->find(name);
  return index >= 0 && ctx.models->peek(index) == nullptr;
}

nlohmann::json load_progress_json(const std::string& model, double fraction, double seconds) {
  return {{"model", model}, {"progress", fraction}, {"time_ms", seconds * 1000}};
}

namespace {
void beat_while(ServerContext& ctx, std::function<void()> beat, std::shared_ptr<bool> waiting) {
  ctx.after(ctx.keepalive_s, [&ctx, beat = std::move(beat), waiting]() mutable {
    if (!*waiting) return;
    beat();
    beat_while(ctx, std::move(beat), waiting);
  });
}
}  // namespace

std::shared_ptr<bool> open_stream_while_loading(ServerContext& ctx, const std::string& name,
                                                bool stream, const std::shared_ptr<Responder>& r,
                                                std::function<void()> beat,
                                                const HttpHeaders& headers) {
  if (!stream || !model_needs_load(ctx, name)) return nullptr;
  r->start_stream(200, "text/event-stream", headers);
  beat();
  auto waiting = std::make_shared<bool>(true);
  beat_while(ctx, std::move(beat), waiting);
  return waiting;
}

ModelRef loaded_model(ServerContext& ctx, const std::string& name) {
  const int index = ctx.models->find(name);
  return index < 0 ? nullptr : ctx.models->peek(index);
}

}  // namespace ponder::server
