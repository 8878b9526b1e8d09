#include "server/cache/response_cache.h"

#include <fmt/core.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/hash128.h"
#include "base/log.h"
#include "server/cache/question_match.h"
#include "server/common/ids.h"

namespace ponder::server {

using nlohmann::json;

namespace {

// Bumped whenever the stored events or the key change meaning.
constexpr const char* kCacheFormat = "ponder-response-cache-2";
// What a sealed body starts with: this tag, 32 hex digits of cache_hash(body), a newline.
constexpr const char* kSealTag = "ponder-sealed ";

}  // namespace

std::string cache_hash(const std::string& s) {
  Hash128 h;
  h.add(s);
  return h.hex();
}

std::string seal_body(const std::string& body) { return kSealTag + cache_hash(body) + "\n" + body; }

std::optional<std::string> unseal_body(const std::string& sealed) {
  const size_t tag = std::char_traits<char>::length(kSealTag), head = tag + 32 + 1;
  if (sealed.size() < head || sealed.compare(0, tag, kSealTag) != 0 || sealed[head - 1] != '\n')
    return std::nullopt;
  std::string body = sealed.substr(head);
  if (cache_hash(body) != sealed.substr(tag, 32)) return std::nullopt;
  return body;
}

namespace {

bool exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

}  // namespace

namespace {

// What decides a request's answer besides its prompt; null when the answer is not deterministic.
json options_key(const std::string& fingerprint, const EngineRequest& r, bool seed_given,
                 const std::string& numerics, bool context_shift) {
  const SamplerParams& s = r.options.sampling;
  if (s.temperature > 0 && !seed_given) return nullptr;
  json k = {kCacheFormat,
            fingerprint,
            r.options.max_tokens,
            r.options.stop,
            r.options.stop_at_eog,
            r.options.n_keep,
            r.options.reasoning_budget,
            r.starts_in_thinking,
            r.split_reasoning,
            r.n_choices,
            r.n_logprobs,
            numerics,
            context_shift,
            s.temperature,
            s.top_k,
            s.top_p,
            s.min_p,
            s.penalty_last_n,
            s.repeat_penalty,
            s.presence_penalty,
            s.frequency_penalty,
            s.temperature > 0 ? s.seed : 0};
  json bias = json::array();
  for (const auto& [id, b] : s.logit_bias) bias.push_back({id, std::isinf(b) ? -1e30 : b});
  k.push_back(bias);
  if (r.options.grammar)
    k.push_back({r.options.grammar->text(), r.options.grammar->options().leading_newlines});
  return k;
}

}  // namespace

CacheKeys response_cache_keys(const std::string& fingerprint, const EngineRequest& r,
                              bool seed_given, const std::string& numerics, bool context_shift,
                              const std::string* earlier, const std::string* question) {
  CacheKeys out;
  json k = options_key(fingerprint, r, seed_given, numerics, context_shift);
  if (k.is_null()) return out;
  if (earlier != nullptr && question != nullptr) {
    out.context = cache_hash(k.dump() + "\n" + *earlier);
    out.question = *question;
    out.key = cache_hash(out.context + "\n" + normalize_question(*question));
    return out;
  }
  k.push_back(r.prompt);
  out.key = cache_hash(k.dump());
  return out;
}

std::string response_cache_key(const std::string& fingerprint, const EngineRequest& r,
                               bool seed_given, const std::string& numerics, bool context_shift) {
  return response_cache_keys(fingerprint, r, seed_given, numerics, context_shift).key;
}

std::string encode_events(const std::vector<EngineEvent>& events) {
  json a = json::array();
  for (const EngineEvent& e : events) {
    json top = json::array();
    for (const TokenLogprob& t : e.top_logprobs) top.push_back({t.token, t.logprob});
    json j = {{"k", e.kind == EngineEvent::Kind::kDone ? 1 : 0},
              {"c", e.choice},
              {"t", e.token},
              {"r", e.reasoning},
              {"x", e.content},
              {"l", e.logprob},
              {"tl", top}};
    if (e.kind == EngineEvent::Kind::kDone) {
      const GenerateStats& s = e.stats;
      j["s"] = {s.n_prompt, s.n_reused, s.n_gen, s.n_reasoning, s.finish_reason, s.tokens};
    }
    a.push_back(std::move(j));
  }
  return a.dump();
}

std::optional<std::vector<EngineEvent>> decode_events(const std::string& body) {
  const json a = json::parse(body, nullptr, false);
  if (!a.is_array()) return std::nullopt;
  std::vector<EngineEvent> out;
  try {
    for (const json& j : a) {
      EngineEvent e;
      e.kind = j.at("k").get<int>() == 1 ? EngineEvent::Kind::kDone : EngineEvent::Kind::kToken;
      e.choice = j.at("c").get<int32_t>();
      e.token = j.at("t").get<int32_t>();
      e.reasoning = j.at("r").get<std::string>();
      e.content = j.at("x").get<std::string>();
      e.logprob = j.at("l").get<float>();
      for (const json& t : j.at("tl"))
        e.top_logprobs.push_back({t.at(0).get<int32_t>(), t.at(1).get<float>()});
      if (e.kind == EngineEvent::Kind::kDone) {
        const json& s = j.at("s");
        e.stats.n_prompt = s.at(0).get<int32_t>();
        e.stats.n_reused = s.at(1).get<int32_t>();
        e.stats.n_gen = s.at(2).get<int32_t>();
        e.stats.n_reasoning = s.at(3).get<int32_t>();
        e.stats.finish_reason = s.at(4).get<std::string>();
        e.stats.tokens = s.at(5).get<std::vector<int32_t>>();
      }
      out.push_back(std::move(e));
    }
  } catch (const json::exception&) {
    return std::nullopt;  // a body from another format: a miss, not a failure
  }
  return out;
}

ResponseCache::ResponseCache(ResponseCacheConfig config) : config_(std::move(config)) {
  if (config_.redis) {
    redis_ = std::make_unique<RedisStore>(*config_.redis);
  } else if (!config_.dir.empty()) {
    path_ = (std::filesystem::path(config_.dir) / "responses.sqlite").string();
    std::lock_guard<std::mutex> db(db_mu_);
    disk_ok_ = open_disk();
  }
  writer_ = std::thread([this] { writer_loop(); });
}

ResponseCache::~ResponseCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();  // the loop writes everything queued before it returns
  std::lock_guard<std::mutex> db(db_mu_);
  close_disk();
}

bool ResponseCache::open_disk() {
  std::error_code ec;
  std::filesystem::create_directories(config_.dir, ec);
  int rc =
      sqlite3_open_v2(path_.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    log_warn("response cache: cannot open {}: {}; answers are cached in memory only", path_,
             db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    close_disk();
    count_error();
    return false;
  }
  sqlite3_busy_timeout(db_, 200);
  const bool ok =
      exec(db_, "PRAGMA journal_mode=WAL") && exec(db_, "PRAGMA synchronous=NORMAL") &&
      exec(db_,
           "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, body TEXT NOT NULL, "
           "bytes INTEGER NOT NULL, last_used INTEGER NOT NULL)") &&
      exec(db_, "CREATE INDEX IF NOT EXISTS answers_by_use ON answers(last_used)") &&
      exec(db_,
           "CREATE VIRTUAL TABLE IF NOT EXISTS questions USING fts5(key UNINDEXED, context "
           "UNINDEXED, question)");
  sqlite3_stmt* st = nullptr;
  bool healthy = ok &&
                 sqlite3_prepare_v2(db_, "PRAGMA quick_check", -1, &st, nullptr) == SQLITE_OK &&
                 sqlite3_step(st) == SQLITE_ROW &&
                 std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "ok";
  sqlite3_finalize(st);
  if (!healthy) {
    const int err = sqlite3_errcode(db_);
    const std::string msg = sqlite3_errmsg(db_);
    close_disk();
    count_error();
    if ((err == SQLITE_CORRUPT || err == SQLITE_NOTADB || ok) && !rebuilt_once_)
      return move_aside_and_reopen(msg);
    log_warn("response cache: {} is unusable ({}); answers are cached in memory only", path_, msg);
    return false;
  }
  if (sqlite3_prepare_v2(db_, "SELECT COUNT(*) FROM answers", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const int64_t n = sqlite3_column_int64(st, 0);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.entries_disk = n;
  }
  sqlite3_finalize(st);
  return true;
}

bool ResponseCache::move_aside_and_reopen(const std::string& why) {
  rebuilt_once_ = true;
  std::error_code ec;
  const std::string aside = fmt::format("{}.corrupt-{}", path_, unix_seconds());
  log_warn("response cache: {} is damaged ({}); moved aside to {} and rebuilt", path_, why, aside);
  std::filesystem::rename(path_, aside, ec);
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(path_ + suffix, ec);
  return open_disk();
}

void ResponseCache::close_disk() {
  if (db_ != nullptr) sqlite3_close(db_);
  db_ = nullptr;
}

void ResponseCache::count_error() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.errors++;
}

void ResponseCache::disk_failed(const std::string& what, int rc) {
  count_error();
  log_warn("response cache: {} failed: {}", what, sqlite3_errstr(rc));
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
    return;  // another writer: skip this one, keep going
  close_disk();
  disk_ok_ = (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) && !rebuilt_once_ &&
             move_aside_and_reopen(sqlite3_errstr(rc));
  if (!disk_ok_)
    log_warn("response cache: the disk cache is off; answers are cached in memory only");
}

void ResponseCache::remember(const std::string& key, std::string body) {
  const int64_t limit = config_.max_bytes / 4;
  if (static_cast<int64_t>(body.size()) > limit) return;
  if (auto it = memory_.find(key); it != memory_.end()) {
    memory_bytes_ -= static_cast<int64_t>(it->second.body.size());
    lru_.erase(it->second.it);
    memory_.erase(it);
  }
  memory_bytes_ += static_cast<int64_t>(body.size());
  lru_.push_back(key);
  memory_[key] = Entry{std::move(body), std::prev(lru_.end())};
  while (memory_bytes_ > limit && !lru_.empty()) {
    auto victim = memory_.find(lru_.front());
    memory_bytes_ -= static_cast<int64_t>(victim->second.body.size());
    memory_.erase(victim);
    lru_.pop_front();
  }
  stats_.entries_memory = static_cast<int64_t>(memory_.size());
}

std::optional<std::vector<EngineEvent>> ResponseCache::lookup(const std::string& key) {
  std::string body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      lru_.splice(lru_.end(), lru_, it->second.it);
      body = it->second.body;
    }
  }
  if (body.empty()) body = lookup_below(key);
  auto events = body.empty() ? std::nullopt : decode_events(body);
  std::lock_guard<std::mutex> lock(mu_);
  if (events) {
    stats_.hits++;
  } else {
    stats_.misses++;
  }
  return events;
}

std::string ResponseCache::lookup_below(const std::string& key) {
  std::string sealed;
  bool touch = false;  // SQLite's last_used moves on through the writer; Redis's get renews it
  if (redis_) {
    sealed = redis_->get(key).value_or("");
  } else {
    std::unique_lock<std::mutex> db(db_mu_);
    if (!disk_ok_) return "";  // the writer may have turned the disk off meanwhile
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db_, "SELECT body FROM answers WHERE key = ?", -1, &st, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      rc = sqlite3_step(st);
      if (rc == SQLITE_ROW)
        sealed.assign(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                      static_cast<size_t>(sqlite3_column_bytes(st, 0)));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) disk_failed("a lookup", rc);
    touch = true;
  }
  if (sealed.empty()) return "";
  std::optional<std::string> body = unseal_body(sealed);
  std::lock_guard<std::mutex> lock(mu_);
  if (!body) {  // torn or altered: never served; the next store of the key replaces it
    stats_.errors++;
    log_warn("response cache: a stored answer failed its checksum ({} bytes); treated as a miss",
             sealed.size());
    return "";
  }
  remember(key, *body);
  if (touch) {
    pending_.push_back({key, "", "", ""});
    queued_++;
    cv_.notify_one();
  }
  return *body;
}

void ResponseCache::store(const std::string& key, const std::vector<EngineEvent>& events,
                          const std::string& context, const std::string& question) {
  std::string body = encode_events(events);
  std::lock_guard<std::mutex> lock(mu_);
  remember(key, body);
  stats_.stores++;
  if (!disk_ok_ && !redis_) return;  // Redis may come back before the writer gets to it
  pending_.push_back(
      {key, std::move(body), config_.match == CacheMatch::kSimilar ? context : "", question});
  queued_++;
  cv_.notify_one();
}

void ResponseCache::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t target = queued_;
  flushed_cv_.wait(lock, [&] { return written_ >= target; });
}

void ResponseCache::writer_loop() {
  for (;;) {
    Write w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (redis_) {
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_ || !pending_.empty(); });
      } else {
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      }
      if (pending_.empty() && stop_) return;
      if (redis_ && !stop_) {
        lock.unlock();
        redis_->keep_alive();
        lock.lock();
      }
      if (pending_.empty()) continue;
      w = std::move(pending_.front());
      pending_.pop_front();
    }
    if (redis_) {
      write_redis(w);
    } else {
      write_sqlite(w);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      written_++;
    }
    flushed_cv_.notify_all();
  }
}

void ResponseCache::write_redis(const Write& w) {
  if (w.body.empty()) return;
  if (!redis_->put(w.key, seal_body(w.body))) {
    if (redis_->up()) count_error();  // Redis answered with an error (logged)
    return;
  }
  const int64_t n = redis_->entries();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.entries_disk = n;
}

void ResponseCache::write_sqlite(const Write& w) {
  const std::string& key = w.key;
  const std::string body = w.body.empty() ? "" : seal_body(w.body);
  std::lock_guard<std::mutex> db(db_mu_);
  if (!disk_ok_ || db_ == nullptr) return;
  sqlite3_stmt* st = nullptr;
  const char* sql =
      body.empty()
          ? "UPDATE answers SET last_used = ?2 WHERE key = ?1"
          : "INSERT OR REPLACE INTO answers (key, body, bytes, last_used) VALUES (?1, ?3, ?4, ?2)";
  int rc = sqlite3_prepare_v2(db_, sql, -1, &st, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, unix_seconds());
    if (!body.empty()) {
      sqlite3_bind_text(st, 3, body.c_str(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 4, static_cast<int64_t>(body.size()));
    }
    rc = sqlite3_step(st);
  }
  sqlite3_finalize(st);
  if (rc == SQLITE_DONE && !w.context.empty()) {
    sqlite3_stmt* q = nullptr;
    rc = sqlite3_prepare_v2(
        db_, "INSERT INTO questions (key, context, question) VALUES (?1, ?2, ?3)", -1, &q, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(q, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(q, 2, w.context.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(q, 3, w.question.c_str(), -1, SQLITE_TRANSIENT);
      rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
  }
  if (rc != SQLITE_DONE) {
    disk_failed("a write", rc);
  } else if (!body.empty()) {
    // Bounded in bytes: the least recently used answers go first.
    exec(db_, fmt::format(
                  "DELETE FROM answers WHERE key IN (SELECT key FROM (SELECT key, SUM(bytes) OVER "
                  "(ORDER BY last_used DESC, rowid DESC) AS run FROM answers) WHERE run > {})",
                  config_.max_bytes)
                  .c_str());
    sqlite3_stmt* c = nullptr;
    if (sqlite3_prepare_v2(db_, "SELECT COUNT(*) FROM answers", -1, &c, nullptr) == SQLITE_OK &&
        sqlite3_step(c) == SQLITE_ROW) {
      const int64_t n = sqlite3_column_int64(c, 0);
      std::lock_guard<std::mutex> lock(mu_);
      stats_.entries_disk = n;
    }
    sqlite3_finalize(c);
  }
}

std::optional<std::vector<EngineEvent>> ResponseCache::lookup_similar(const std::string& context,
                                                                      const std::string& question,
                                                                      std::string* matched) {
  std::string best_key, best_question;
  {
    std::lock_guard<std::mutex> db(db_mu_);
    if (!disk_ok_ || db_ == nullptr) return std::nullopt;
    // FTS5 finds the candidates sharing a word; the similarity rule decides.
    std::string query;
    for (const std::string& w : question_words(question))
      query += (query.empty() ? "\"" : " OR \"") + w + "\"";
    if (query.empty()) return std::nullopt;
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(
        db_,
        "SELECT key, question FROM questions WHERE questions MATCH ?1 AND context = ?2 LIMIT 64",
        -1, &st, nullptr);
    double best = 0;
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(st, 1, query.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, context.c_str(), -1, SQLITE_TRANSIENT);
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const std::string k = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
        const std::string q = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
        const QuestionSimilarity sim = compare_questions(question, q);
        if (sim.accepted() && sim.jaccard > best) {
          best = sim.jaccard;
          best_key = k;
          best_question = q;
        }
      }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) disk_failed("a similar-question search", rc);
  }
  if (best_key.empty()) return std::nullopt;
  auto events = lookup(best_key);
  if (events) *matched = best_question;
  return events;
}

ResponseCacheStats ResponseCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ResponseCacheStats s = stats_;
  s.disk_enabled = redis_ ? redis_->up() : disk_ok_.load();
  s.backend = redis_ ? "redis" : !config_.dir.empty() ? "sqlite" : "memory";
  return s;
}

}  // namespace ponder::server
