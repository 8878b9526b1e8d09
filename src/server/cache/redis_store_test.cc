// The Redis level of the response cache against a real redis-server (Debian's package, started
// here on a free loopback port and stopped at the end): the URL, round trips, the byte bound,
// the TTL, two caches sharing answers as two replicas would, a tampered body, and Redis going
// away and coming back.
#include "server/cache/redis_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <thread>

#include "server/cache/response_cache.h"

namespace ponder::server {
namespace {

int free_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

// A redis-server child process on 127.0.0.1:port, without persistence.
class RedisProcess {
 public:
  explicit RedisProcess(int port) : port_(port) { start(); }
  ~RedisProcess() { stop(); }
  void start() {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string p = std::to_string(port_);
      execlp("redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--save",
             "", "--appendonly", "no", "--loglevel", "warning", static_cast<char*>(nullptr));
      _exit(127);
    }
    RedisConfig c;
    c.port = port_;
    for (int i = 0; i < 100; ++i) {  // until it answers PING
      RedisStore probe(c);
      if (probe.up()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "redis-server did not start on port " << port_
                  << " (scripts/setup.sh installs it)";
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

RedisConfig config_for(int port) {
  RedisConfig c;
  c.port = port;
  return c;
}

std::vector<EngineEvent> answer(const std::string& text) {
  std::vector<EngineEvent> e(1);
  e[0].kind = EngineEvent::Kind::kDone;
  e[0].content = text;
  e[0].stats.finish_reason = "stop";
  return e;
}

TEST(RedisStoreTest, ParsesUrls) {
  RedisConfig c;
  ASSERT_TRUE(parse_redis_url("redis://cache.internal:6380/3", &c).is_ok());
  EXPECT_EQ(c.host, "cache.internal");
  EXPECT_EQ(c.port, 6380);
  EXPECT_EQ(c.db, 3);
  RedisConfig d;
  ASSERT_TRUE(parse_redis_url("redis://:s3cret@10.0.0.5", &d).is_ok());
  EXPECT_EQ(d.host, "10.0.0.5");
  EXPECT_EQ(d.port, 6379);
  EXPECT_EQ(d.password, "s3cret");
  RedisConfig v6;
  ASSERT_TRUE(parse_redis_url("redis://[::1]:7000", &v6).is_ok());
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 7000);
  RedisConfig bad;
  EXPECT_FALSE(parse_redis_url("http://x", &bad).is_ok());
  EXPECT_FALSE(parse_redis_url("redis://x:99999", &bad).is_ok());
  EXPECT_FALSE(parse_redis_url("redis://x/abc", &bad).is_ok());
  EXPECT_FALSE(parse_redis_url("redis://", &bad).is_ok());
}

TEST(RedisStoreTest, RoundTripsAndKeepsToItsByteBound) {
  const int port = free_port();
  RedisProcess redis(port);
  RedisConfig c = config_for(port);
  c.max_bytes = 10000;
  RedisStore s(c);
  ASSERT_TRUE(s.up());
  const std::string binary("a\0b\r\n\xff", 6);
  ASSERT_TRUE(s.put("k", binary));
  EXPECT_EQ(s.get("k").value_or(""), binary);
  EXPECT_FALSE(s.get("absent").has_value());
  for (int i = 0; i < 30; ++i)
    ASSERT_TRUE(s.put("big" + std::to_string(i), std::string(1000, 'x')));
  EXPECT_LE(s.entries(), 10);  // 10,000 bytes hold at most ten of them
  EXPECT_GE(s.entries(), 9);
  EXPECT_TRUE(s.get("big29").has_value());  // the newest stays
  EXPECT_FALSE(s.get("big0").has_value());  // the oldest went first
  EXPECT_FALSE(s.get("k").has_value());
  EXPECT_TRUE(s.remove("big29"));
  EXPECT_FALSE(s.get("big29").has_value());
}

TEST(RedisStoreTest, AnswersExpireAfterTheirTtl) {
  const int port = free_port();
  RedisProcess redis(port);
  RedisConfig c = config_for(port);
  c.ttl_s = 1;
  RedisStore s(c);
  ASSERT_TRUE(s.put("short", "lived"));
  EXPECT_TRUE(s.get("short").has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  EXPECT_FALSE(s.get("short").has_value());
  ASSERT_TRUE(s.put("next", "one"));  // forgets the expired key's accounting too
  EXPECT_EQ(s.entries(), 1);
}

TEST(RedisStoreTest, TwoReplicasShareAnswersAndATamperedBodyIsNeverServed) {
  const int port = free_port();
  RedisProcess redis(port);
  ResponseCacheConfig c{"", 1 << 20, CacheMatch::kExact, config_for(port)};
  ResponseCache a(c), b(c);
  a.store("q1", answer("forty-two"));
  a.flush();
  auto hit = b.lookup("q1");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ((*hit)[0].content, "forty-two");
  EXPECT_EQ(b.stats().backend, "redis");
  EXPECT_TRUE(b.stats().disk_enabled);
  // A body changed under the cache (a torn write, another program): a miss and a counted error.
  RedisStore raw(config_for(port));
  std::string sealed = raw.get("q2").value_or("");
  EXPECT_TRUE(sealed.empty());
  sealed = seal_body(encode_events(answer("right")));
  sealed.replace(sealed.find("right"), 5, "wrong");
  ASSERT_TRUE(raw.put("q2", sealed));
  EXPECT_FALSE(b.lookup("q2").has_value());
  EXPECT_EQ(b.stats().errors, 1);
  ASSERT_TRUE(raw.put("q3", "not sealed at all"));
  EXPECT_FALSE(b.lookup("q3").has_value());
  EXPECT_EQ(b.stats().errors, 2);
}

TEST(RedisStoreTest, RedisGoingAwayAndBackChangesNothingButWhereAnswersLive) {
  const int port = free_port();
  auto redis = std::make_unique<RedisProcess>(port);
  ResponseCacheConfig c{"", 1 << 20, CacheMatch::kExact, config_for(port)};
  ResponseCache cache(c);
  cache.store("before", answer("one"));
  cache.flush();
  redis->stop();
  bool noticed = false;  // by the writer's PING, with no request at all
  for (int i = 0; i < 40 && !noticed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    noticed = !cache.stats().disk_enabled;
  }
  EXPECT_TRUE(noticed);
  // Gone: lookups miss quickly, stores still land in memory, nothing throws or blocks.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(cache.lookup("not-there").has_value());
  cache.store("during", answer("two"));
  cache.flush();
  EXPECT_FALSE(cache.stats().disk_enabled);
  EXPECT_TRUE(cache.lookup("during").has_value());  // from memory
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  redis->start();  // empty again: no persistence
  bool back = false;
  for (int i = 0; i < 60 && !back; ++i) {  // the writer reconnects about once a second
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = cache.stats().disk_enabled;
  }
  ASSERT_TRUE(back);
  cache.store("after", answer("three"));
  cache.flush();
  RedisStore raw(config_for(port));
  EXPECT_TRUE(raw.get("after").has_value());  // shared again
}

}  // namespace
}  // namespace ponder::server
