// ResponseCache: answers to identical deterministic requests (temperature 0, or a fixed seed),
// kept as the engine events they streamed, so a hit replays through the same code path as a fresh
// answer (same SSE framing, same fields) in any API family. An in-memory LRU in front of SQLite
// (WAL mode) so answers survive restarts, or of Redis (server/cache/redis_store.h) so that replicas
// share them; all bounded in bytes. Stored bodies carry a checksum: a torn or altered one is a
// miss (and a counted error), never served.
// The key (response_cache_key) covers the model's fingerprint, Ponder's cache format version,
// the prompt tokens and every option that changes the events (sampling, stops, lengths, n,
// logprobs, the reasoning split, the attention order, context shift).
// A cache that cannot work never fails a request: a corrupt file is moved aside and rebuilt; a
// file that cannot be opened or written turns the disk part off (memory only), with a log line
// and a counted error; Redis going away does the same until it is back (the writer thread
// reconnects). Writes go through a writer thread; flush() and the destructor wait for them.
// Depends on runtime/request.h, server/cache/redis_store.h, SQLite, nlohmann-json.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/request.h"
#include "server/cache/question_match.h"
#include "server/cache/redis_store.h"

struct sqlite3;

namespace ponder::server {

struct ResponseCacheConfig {
  std::string dir;                        // the SQLite file lives here; "" = memory only
  int64_t max_bytes = 256ll << 20;        // on disk; memory holds at most a quarter of it
  CacheMatch match = CacheMatch::kExact;  // --cache-match; similar needs the disk (FTS5)
  std::optional<RedisConfig> redis;  // --cache-url: Redis instead of the SQLite file (dir unused)
};

struct ResponseCacheStats {
  int64_t hits = 0, misses = 0, stores = 0, errors = 0, entries_memory = 0, entries_disk = 0;
  bool disk_enabled = false;       // the level under memory (the SQLite file or Redis) is in use
  std::string backend = "memory";  // "sqlite", "redis" or "memory"
};

class ResponseCache {
 public:
  explicit ResponseCache(ResponseCacheConfig config);
  ~ResponseCache();
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  std::optional<std::vector<EngineEvent>> lookup(const std::string& key);
  // --cache-match similar: the stored answer of the most similar question asked in the same
  // context (everything but the question equal), if one is accepted; *matched gets its text.
  std::optional<std::vector<EngineEvent>> lookup_similar(const std::string& context,
                                                         const std::string& question,
                                                         std::string* matched);
  // question/context: recorded for similar matching (ignored in the other modes).
  void store(const std::string& key, const std::vector<EngineEvent>& events,
             const std::string& context = "", const std::string& question = "");
  CacheMatch match() const { return config_.match; }
  void flush();  // returns once every store() so far is on disk
  ResponseCacheStats stats() const;
  std::string path() const { return path_; }

 private:
  bool open_disk();
  void close_disk();
  void disk_failed(const std::string& what, int rc);   // corrupt: move aside, rebuild; else off
  bool move_aside_and_reopen(const std::string& why);  // once per process
  void writer_loop();
  std::string lookup_below(const std::string& key);  // SQLite or Redis; "" for a miss
  struct Write;
  void write_sqlite(const Write& w);
  void write_redis(const Write& w);
  void remember(const std::string& key, std::string body);  // into the memory LRU (mu_ held)
  void count_error();                                       // stats_.errors++ (takes mu_)

  ResponseCacheConfig config_;
  std::string path_;
  // Two locks, taken in this order when both are needed: db_mu_ (the SQLite connection; held
  // through a disk read or write) and mu_ (memory, stats, the write queue; never held across
  // SQLite calls), so a memory hit never waits for the writer.
  std::mutex db_mu_;
  sqlite3* db_ = nullptr;      // db_mu_
  bool rebuilt_once_ = false;  // db_mu_
  std::atomic<bool> disk_ok_{false};
  mutable std::mutex mu_;       // everything below
  std::list<std::string> lru_;  // keys, least recently used first
  struct Entry {
    std::string body;
    std::list<std::string>::iterator it;
  };
  std::unordered_map<std::string, Entry> memory_;
  int64_t memory_bytes_ = 0;
  ResponseCacheStats stats_;
  struct Write {
    std::string key, body, context, question;  // body "": only touch last_used
  };
  std::deque<Write> pending_;
  int64_t written_ = 0, queued_ = 0;
  std::condition_variable cv_, flushed_cv_;
  bool stop_ = false;
  std::thread writer_;
  std::unique_ptr<RedisStore> redis_;  // --cache-url; then db_ stays closed
};

// The key of a request, or "" when its answer is not deterministic (temperature > 0 without a
// seed the client chose) and must not be cached. numerics: Qwen2Model::numerics() (the attention
// order and the KV types, which change the logits).
std::string response_cache_key(const std::string& model_fingerprint, const EngineRequest& request,
                               bool seed_given, const std::string& numerics, bool context_shift);

// Every key a request needs, computed once: `key` ("" when not cacheable) and, for
// --cache-match normalized|similar with a text question (`earlier`: the conversation before it
// as "role: text" lines, normalized; `question`: the question as written), `context` (the hash of
// everything but the question) and the key of the normalized question in that context.
struct CacheKeys {
  std::string key, context, question;
};
CacheKeys response_cache_keys(const std::string& model_fingerprint, const EngineRequest& request,
                              bool seed_given, const std::string& numerics, bool context_shift,
                              const std::string* earlier = nullptr,
                              const std::string* question = nullptr);

// 128-bit hash as 32 hex digits (keys).
std::string cache_hash(const std::string& s);

// A stored body with its checksum, and back (nullopt: torn, altered or not sealed).
std::string seal_body(const std::string& body);
std::optional<std::string> unseal_body(const std::string& sealed);

// Events <-> the stored text.
std::string encode_events(const std::vector<EngineEvent>& events);
std::optional<std::vector<EngineEvent>> decode_events(const std::string& body);

}  // namespace ponder::server
