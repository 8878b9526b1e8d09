#include "server/server.h"

#include <chrono>
#include <thread>

#include "base/check.h"
#include "server/anthropic/anthropic_serving.h"
#include "server/llama/llama_completion.h"
#include "server/llama/llama_routes.h"
#include "server/ollama/ollama_routes.h"
#include "server/openai/openai_serving.h"
#include "server/page/web_routes.h"
#include "server/responses/responses_serving.h"

namespace ponder::server {

Server::Server(ServerConfig config, Qwen2Model& model, const text::Tokenizer& tokenizer,
               const text::ChatTemplate& tmpl)
    : config_(std::move(config)) {
  ModelSpec spec;
  spec.name = config_.model_name;
  spec.fingerprint = config_.fingerprint;
  spec.facts = config_.model;
  auto shared_tmpl = std::make_shared<const text::ChatTemplate>(tmpl);
  const EngineConfig engine = config_.engine;
  ModelLoader loader = [&model, &tokenizer, shared_tmpl, engine](const ModelSpec&,
                                                                 const LoadProgress&) {
    LoadedModel l;
    l.model = &model;
    l.tokenizer = &tokenizer;
    l.chat_template = shared_tmpl;
    l.engine = engine;
    return Expected<LoadedModel>(std::move(l));
  };
  init({std::move(spec)}, std::move(loader));
  const Status st = registry_->load_now(0);
  PONDER_CHECK(st.is_ok());
}

Server::Server(ServerConfig config, std::vector<ModelSpec> models, ModelLoader loader)
    : config_(std::move(config)) {
  init(std::move(models), std::move(loader));
}

void Server::init(std::vector<ModelSpec> models, ModelLoader loader) {
  router_ = std::make_unique<Router>(config_.access);
  http_ = std::make_unique<HttpServer>(config_.limits,
                                       [this](HttpRequest&& req, std::shared_ptr<Responder> r) {
                                         if (!config_.replica_id.empty())
                                           r->add_header("X-Ponder-Replica", config_.replica_id);
                                         router_->handle(std::move(req), std::move(r));
                                       });
  if (config_.response_cache) {
    cache_ = std::make_unique<ResponseCache>(ResponseCacheConfig{
        config_.cache_dir, config_.cache_bytes, config_.cache_match, config_.redis});
  }
  HttpServer* http = http_.get();
  RegistryConfig rc;
  rc.max_bytes = config_.max_memory;
  rc.keep_alive_s = config_.keep_alive_s;
  rc.post = [http](std::function<void()> f) { http->post(std::move(f)); };
  registry_ = std::make_unique<ModelRegistry>(std::move(models), std::move(loader), std::move(rc));
  ctx_ = std::make_unique<ServerContext>();
  ctx_->models = registry_.get();
  ctx_->replica_id = config_.replica_id;
  ctx_->defaults = config_.defaults;
  ctx_->cache = cache_.get();
  ctx_->post = [http](std::function<void()> f) { http->post(std::move(f)); };
  ctx_->after = [http](double s, std::function<void()> f) { http->after(s, std::move(f)); };
  ctx_->keepalive_s = config_.keepalive_s;
  ctx_->statuses = &http_->status_counts();
  ctx_->reasoning_field = config_.reasoning_field;
  add_openai_routes(*router_, *ctx_);
  add_responses_routes(*router_, *ctx_);
  add_llama_routes(*router_, *ctx_);
  add_llama_completion_route(*router_, *ctx_);
  add_ollama_routes(*router_, *ctx_);
  add_anthropic_routes(*router_, *ctx_);
  add_web_routes(*router_);
}

Server::~Server() {
  registry_->stop();  // cancels what runs; the last events go to the still-running I/O thread
  http_->stop();
  cache_.reset();  // waits for its pending writes
}

Engine& Server::engine() {
  const ModelRef m = registry_->peek(0);
  PONDER_CHECK(m != nullptr);
  return m->engine;  // stays: a test's model is loaded for the server's lifetime
}

Status Server::start() {
  for (const std::string& host : config_.hosts) {
    if (Status st = http_->listen(host, config_.port); !st.is_ok()) return st;
  }
  http_->start();
  ctx_->ready = true;
  return Status::ok();
}

bool Server::drain(double timeout_s) {
  ctx_->draining = true;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    bool idle = true;
    for (int i = 0; i < registry_->size(); ++i) {
      const ModelRef model = registry_->peek(i);
      if (!model) continue;
      const EngineMetrics m = model->engine.metrics();
      idle &= m.requests_waiting == 0 && m.sequences_running == 0;
    }
    if (idle) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ponder::server
