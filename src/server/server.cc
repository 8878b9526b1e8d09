#include "server/server.h"

#include <chrono>
#include <thread>

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
  engine_ = std::make_unique<Engine>(model, tokenizer, config_.engine);
  ctx_ = std::unique_ptr<ServerContext>(new ServerContext{*engine_, tokenizer, tmpl});
  ctx_->model_name = config_.model_name;
  ctx_->replica_id = config_.replica_id;
  ctx_->defaults = config_.defaults;
  ctx_->cache = cache_.get();
  ctx_->fingerprint = config_.fingerprint;
  ctx_->model = config_.model;
  ctx_->numerics = model.numerics();
  ctx_->created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  HttpServer* http = http_.get();
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
  engine_.reset();  // cancels what runs; its last events go to the still-running I/O thread
  http_->stop();
  cache_.reset();  // waits for its pending writes
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
    const EngineMetrics m = engine_->metrics();
    if (m.requests_waiting == 0 && m.sequences_running == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ponder::server
