// RedisStore: the response cache's shared level in Redis (`--cache-url redis://host:port/db`),
// so every replica behind a load balancer answers from the answers any of them stored. The same
// keys and bodies as the SQLite file; bounded by a TTL (sliding: a hit renews it) and by a total
// size in bytes (least recently used answers go first), both kept by Lua scripts so that the
// replicas' writes stay consistent with each other.
// Redis that cannot be reached never fails a request: a call that fails marks the store down
// (one log line), later calls return at once without touching the network, and keep_alive()
// (the cache's writer thread calls it about once a second) brings it back.
// Layout under the prefix "ponder:rc:": e:<key> the body (with its TTL); lru a sorted set of keys
// by last use (the counter seq, shared by the replicas);
// sizes a hash of key -> bytes; bytes the running total.
// Depends on hiredis (Debian's libhiredis-dev).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

struct redisContext;

namespace ponder::server {

struct RedisConfig {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string password;  // AUTH when not empty (redis://:password@host)
  int64_t max_bytes = 256ll << 20;
  int64_t ttl_s = 7 * 24 * 3600;
  int timeout_ms = 250;  // connect and each command
  std::string prefix = "ponder:rc:";
};

// redis://[[user]:password@]host[:port][/db] into cfg (other fields kept).
Status parse_redis_url(const std::string& url, RedisConfig* cfg);

class RedisStore {
 public:
  explicit RedisStore(RedisConfig config);  // connects once; down (and logged) if that fails
  ~RedisStore();
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // The stored body, renewing its TTL and last use; nullopt for a miss or while down.
  std::optional<std::string> get(const std::string& key);
  // Stores body under key, evicting the least recently used answers past max_bytes. False while
  // down or when the write failed.
  bool put(const std::string& key, const std::string& body);
  bool remove(const std::string& key);
  // About once a second (the cache's writer thread calls it): reconnects when down, else sends
  // a PING so that an idle replica notices Redis leaving (and its metric says so). True when up.
  bool keep_alive();
  bool up() const { return up_; }
  int64_t entries();  // answers recorded (0 while down)
  std::string address() const;

 private:
  // One command; nullptr-free reply handling inside. Marks the store down on a connection error.
  struct Reply;
  std::optional<Reply> command(const std::vector<std::string>& args);  // mu_ held
  bool connect(std::string* why);  // mu_ held; false: *why says what failed (nothing logged)
  void went_down(const std::string& why);  // mu_ held

  RedisConfig config_;
  std::mutex mu_;
  redisContext* ctx_ = nullptr;  // mu_
  int64_t last_attempt_ms_ = 0;  // mu_: the last connect, or the last command while up
  std::atomic<bool> up_{false};
};

}  // namespace ponder::server
