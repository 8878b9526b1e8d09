#include "server/cache/redis_store.h"

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>

#include "base/log.h"

namespace ponder::server {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

timeval to_timeval(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

// Drops one key and its accounting. KEYS[1] is the prefix; used by both scripts below.
constexpr const char* kForget = R"(
-- The last-use order: one counter shared by every replica.
local function score(p)
  return redis.call('INCR', p .. 'seq')
end
local function forget(p, k)
  local n = tonumber(redis.call('HGET', p .. 'sizes', k) or 0)
  redis.call('HDEL', p .. 'sizes', k)
  redis.call('ZREM', p .. 'lru', k)
  redis.call('DEL', p .. 'e:' .. k)
  return redis.call('DECRBY', p .. 'bytes', n)
end
)";

// ARGV: key, body, ttl (s), max_bytes. Forgets the least recently used answers that outlived
// their TTL (up to ten per call), stores, then evicts the least recently used answers (never the
// new one) until the total fits.
constexpr const char* kPut = R"(
local p, k, body = KEYS[1], ARGV[1], ARGV[2]
local ttl, maxb = tonumber(ARGV[3]), tonumber(ARGV[4])
for _, old in ipairs(redis.call('ZRANGE', p .. 'lru', 0, 9)) do
  if redis.call('EXISTS', p .. 'e:' .. old) == 0 then forget(p, old) end
end
local prev = tonumber(redis.call('HGET', p .. 'sizes', k) or 0)
redis.call('SET', p .. 'e:' .. k, body, 'EX', ttl)
redis.call('HSET', p .. 'sizes', k, #body)
redis.call('ZADD', p .. 'lru', score(p), k)
local total = redis.call('INCRBY', p .. 'bytes', #body - prev)
while total > maxb do
  local v = redis.call('ZRANGE', p .. 'lru', 0, 0)[1]
  if v == nil or v == k then break end
  total = forget(p, v)
end
return total
)";

// ARGV: key, ttl (s). The body, with its TTL and last use renewed.
constexpr const char* kGet = R"(
local p, k = KEYS[1], ARGV[1]
local b = redis.call('GET', p .. 'e:' .. k)
if b then
  redis.call('EXPIRE', p .. 'e:' .. k, tonumber(ARGV[2]))
  redis.call('ZADD', p .. 'lru', score(p), k)
end
return b
)";

constexpr const char* kRemove = "forget(KEYS[1], ARGV[1]) return 1";

// Each script with the helpers it calls, as sent.
const std::string kGetScript = std::string(kForget) + kGet;
const std::string kPutScript = std::string(kForget) + kPut;
const std::string kRemoveScript = std::string(kForget) + kRemove;

}  // namespace

struct RedisStore::Reply {
  int type = 0;
  long long integer = 0;
  std::string str;
};

Status parse_redis_url(const std::string& url, RedisConfig* cfg) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0)
    return Status::error("--cache-url must start with redis:// (got '" + url + "')");
  std::string rest = url.substr(scheme.size());
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string auth = rest.substr(0, at);
    const size_t colon = auth.find(':');
    cfg->password = colon == std::string::npos ? auth : auth.substr(colon + 1);
    rest = rest.substr(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      char* end = nullptr;
      const long v = std::strtol(db.c_str(), &end, 10);
      if (*end != '\0' || v < 0 || v > 1000000)
        return Status::error("--cache-url: '" + db + "' is not a database number");
      cfg->db = static_cast<int>(v);
    }
  }
  size_t colon = std::string::npos;  // before the port: after "]" for an IPv6 address
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos)
      return Status::error("--cache-url: unclosed '[' in '" + url + "'");
    if (close + 1 < rest.size() && rest[close + 1] == ':') colon = close + 1;
  } else {
    colon = rest.rfind(':');
  }
  if (colon != std::string::npos) {
    char* end = nullptr;
    const long v = std::strtol(rest.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || v < 1 || v > 65535)
      return Status::error("--cache-url: bad port in '" + url + "'");
    cfg->port = static_cast<int>(v);
    rest = rest.substr(0, colon);
  }
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']')
    rest = rest.substr(1, rest.size() - 2);
  if (rest.empty()) return Status::error("--cache-url: no host in '" + url + "'");
  cfg->host = rest;
  return Status::ok();
}

RedisStore::RedisStore(RedisConfig config) : config_(std::move(config)) {
  std::lock_guard<std::mutex> lock(mu_);
  last_attempt_ms_ = now_ms();
  std::string why;
  if (connect(&why)) {
    log_info("response cache: Redis at {}", address());
  } else {
    log_warn(
        "response cache: cannot reach Redis at {} ({}); answers are cached in memory only until it "
        "is (retried every second)",
        address(), why);
  }
}

RedisStore::~RedisStore() {
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx_ != nullptr) redisFree(ctx_);
}

std::string RedisStore::address() const {
  return config_.host + ":" + std::to_string(config_.port) + "/" + std::to_string(config_.db);
}

void RedisStore::went_down(const std::string& why) {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  if (up_.exchange(false)) {
    log_warn(
        "response cache: Redis at {} is unreachable ({}); answers are cached in memory only until "
        "it is back",
        address(), why);
  }
}

bool RedisStore::connect(std::string* why) {
  ctx_ =
      redisConnectWithTimeout(config_.host.c_str(), config_.port, to_timeval(config_.timeout_ms));
  if (ctx_ == nullptr || ctx_->err != 0) {
    *why = ctx_ != nullptr ? ctx_->errstr : "out of memory";
    if (ctx_ != nullptr) redisFree(ctx_);
    ctx_ = nullptr;
    return false;
  }
  redisSetTimeout(ctx_, to_timeval(config_.timeout_ms));
  up_ = true;  // command() needs it
  std::vector<std::vector<std::string>> setup;
  if (!config_.password.empty()) setup.push_back({"AUTH", config_.password});
  if (config_.db != 0) setup.push_back({"SELECT", std::to_string(config_.db)});
  setup.push_back({"PING"});
  for (const auto& c : setup) {
    auto r = command(c);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      *why = r ? c[0] + ": " + r->str : "no answer to " + c[0];
      up_ = false;
      if (ctx_ != nullptr) redisFree(ctx_);
      ctx_ = nullptr;
      return false;
    }
  }
  return true;
}

bool RedisStore::keep_alive() {
  std::lock_guard<std::mutex> lock(mu_);
  if (now_ms() - last_attempt_ms_ < 1000) return up_;
  if (up_) {
    command({"PING"});  // marks the store down if Redis is gone
    return up_;
  }
  last_attempt_ms_ = now_ms();
  std::string why;
  if (connect(&why)) log_info("response cache: Redis at {} is back", address());
  return up_;
}

std::optional<RedisStore::Reply> RedisStore::command(const std::vector<std::string>& args) {
  if (!up_ || ctx_ == nullptr) return std::nullopt;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  last_attempt_ms_ = now_ms();
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (r == nullptr) {
    went_down(ctx_->err != 0 ? ctx_->errstr : "no reply");
    return std::nullopt;
  }
  Reply out;
  out.type = r->type;
  out.integer = r->integer;
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  freeReplyObject(r);
  if (out.type == REDIS_REPLY_ERROR) log_warn("response cache: Redis said: {}", out.str);
  return out;
}

std::optional<std::string> RedisStore::get(const std::string& key) {
  if (!up_) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto r = command({"EVAL", kGetScript, "1", config_.prefix, key, std::to_string(config_.ttl_s)});
  if (!r || r->type != REDIS_REPLY_STRING) return std::nullopt;
  return std::move(r->str);
}

bool RedisStore::put(const std::string& key, const std::string& body) {
  if (!up_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto r = command({"EVAL", kPutScript, "1", config_.prefix, key, body,
                    std::to_string(config_.ttl_s), std::to_string(config_.max_bytes)});
  return r && r->type == REDIS_REPLY_INTEGER;
}

bool RedisStore::remove(const std::string& key) {
  if (!up_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto r = command({"EVAL", kRemoveScript, "1", config_.prefix, key});
  return r && r->type == REDIS_REPLY_INTEGER;
}

int64_t RedisStore::entries() {
  if (!up_) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto r = command({"ZCARD", config_.prefix + "lru"});
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
}

}  // namespace ponder::server
