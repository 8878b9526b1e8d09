// ResponseStore: the responses of POST /v1/responses kept in memory for GET / DELETE
// /v1/responses/{id} and for `previous_response_id`, bounded in count and age (default 1,000
// responses, one hour from creation; the oldest go first). A stored response holds its own turn's
// items (the input it was given and the output it made) and a pointer to the response it
// continued, so a conversation is a chain whose turns are shared, never copied: memory grows with
// the conversation, not with its square. An evicted response can no longer be named, but the
// later responses that continue it keep its items alive.
// Depends on nlohmann-json only.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace ponder::server {

struct StoredResponse {
  nlohmann::json response;  // the response object, as answered
  nlohmann::json items;     // this turn: input items, then output items
  size_t n_input = 0;       // items[0, n_input) are the input (GET .../input_items)
  std::shared_ptr<const StoredResponse> previous;  // the response it continued, or null
  // Every item of the conversation up to and with this turn, oldest first.
  nlohmann::json conversation() const;
};

struct ResponseStoreLimits {
  size_t max_responses = 1000;
  std::chrono::seconds max_age{3600};  // from creation
};

class ResponseStore {
 public:
  using Limits = ResponseStoreLimits;
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit ResponseStore(Limits limits = {}, Clock now = std::chrono::steady_clock::now)
      : limits_(limits), now_(std::move(now)) {}

  // Keeps a response under its id (replacing one of the same id), evicting the oldest past the
  // bounds.
  void put(const std::string& id, std::shared_ptr<const StoredResponse> r);
  // The response, or null when it was never stored, was deleted or has expired.
  std::shared_ptr<const StoredResponse> get(const std::string& id);
  // An item of a stored response's own turn (input or output) by its id, newest response first;
  // nullopt when none has it. A walk over the store: it is bounded.
  std::optional<nlohmann::json> find_item(const std::string& item_id);
  // False when there was nothing to remove.
  bool erase(const std::string& id);
  size_t size();

 private:
  struct Entry {
    std::string id;
    std::chrono::steady_clock::time_point created;
    std::shared_ptr<const StoredResponse> response;
  };
  void evict_locked();

  Limits limits_;
  Clock now_;
  std::mutex mu_;
  std::list<Entry> order_;  // oldest first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
};

}  // namespace ponder::server
