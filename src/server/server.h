// Server: `ponder serve` as a library: the models offered (a ModelRegistry: one Engine per loaded
// model), the HTTP transport, the router with every API family's routes, and an orderly stop
// (draining: health fails at once, new generations are refused, running ones may finish).
// Destruction order matters and is fixed here: the engines go first (their last events are posted
// to the I/O thread, which is still alive), the transport after.
// Depends on runtime/engine.h and the server layer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"
#include "server/common/generation_request.h"
#include "server/common/model_facts.h"
#include "server/common/server_context.h"
#include "server/models/model_registry.h"
#include "server/transport/http_server.h"
#include "server/transport/router.h"

namespace ponder::server {

struct ServerConfig {
  std::vector<std::string> hosts{"127.0.0.1"};
  uint16_t port = 8080;  // 0: any free port (tests)
  AccessConfig access;
  HttpLimits limits;
  std::string model_name = "ponder";  // one model given as a Qwen2Model: its name
  ServingDefaults defaults;
  EngineConfig engine;
  // The response cache: on unless --no-response-cache; "" cache_dir keeps it in memory only.
  bool response_cache = true;
  std::string cache_dir;
  int64_t cache_bytes = 256ll << 20;
  CacheMatch cache_match = CacheMatch::kExact;
  std::string fingerprint;   // one model given as a Qwen2Model: the file's (model_fingerprint.h)
  ModelFacts model;          // and what /api/show, /api/tags and /props say of the file
  int64_t max_memory = 0;    // several models: the loaded ones' memory budget (0: no bound)
  double keep_alive_s = -1;  // several models: idle seconds before a model unloads (< 0: never)
  double keepalive_s = 5;    // SSE keep-alive comments until a stream's first token
  std::string reasoning_field = "reasoning_content";  // or "reasoning" (vLLM's newer name)
  std::string replica_id;            // --replica-id (docs/scaling.md); "" sends no X-Ponder-Replica
  std::optional<RedisConfig> redis;  // --cache-url: the shared response cache
};

class Server {
 public:
  // One model, loaded already; the model and tokenizer must outlive the server.
  Server(ServerConfig config, Qwen2Model& model, const text::Tokenizer& tokenizer,
         const text::ChatTemplate& tmpl);
  // The models offered, loaded by `loader` on first use (one model: call load(0) before start()).
  Server(ServerConfig config, std::vector<ModelSpec> models, ModelLoader loader);
  ~Server();

  Status load(int index) { return registry_->load_now(index); }
  Status start();  // listens on every host, starts the I/O thread
  uint16_t port() const { return http_->port(); }
  // Draining: /health answers 503 and new generations are refused; true when the engine went
  // idle within timeout_s (else what still runs is cancelled).
  bool drain(double timeout_s);
  Engine& engine();  // the first model's (loaded)
  ModelRegistry& models() { return *registry_; }
  ServerContext& context() { return *ctx_; }
  ResponseCache* cache() { return cache_.get(); }
  int64_t open_connections() const { return http_->open_connections(); }

 private:
  void init(std::vector<ModelSpec> models, ModelLoader loader);
  ServerConfig config_;
  std::unique_ptr<HttpServer> http_;      // destroyed last
  std::unique_ptr<ResponseCache> cache_;  // after the engines: their last answers are stored
  std::unique_ptr<ModelRegistry> registry_;
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<Router> router_;
};

}  // namespace ponder::server
