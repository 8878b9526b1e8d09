#include "server/responses/response_store.h"

#include <vector>

namespace ponder::server {

nlohmann::json StoredResponse::conversation() const {
  std::vector<const StoredResponse*> chain;
  for (const StoredResponse* r = this; r != nullptr; r = r->previous.get()) chain.push_back(r);
  nlohmann::json out = nlohmann::json::array();
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const auto& item : (*it)->items) out.push_back(item);
  }
  return out;
}

void ResponseStore::put(const std::string& id, std::shared_ptr<const StoredResponse> r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    order_.erase(it->second);
    by_id_.erase(it);
  }
  order_.push_back(Entry{id, now_(), std::move(r)});
  by_id_[id] = std::prev(order_.end());
  evict_locked();
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  evict_locked();
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second->response;
}

std::optional<nlohmann::json> ResponseStore::find_item(const std::string& item_id) {
  std::lock_guard<std::mutex> lock(mu_);
  evict_locked();
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    for (const auto& item : it->response->items) {
      auto id = item.find("id");
      if (id != item.end() && *id == item_id) return item;
    }
  }
  return std::nullopt;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  order_.erase(it->second);
  by_id_.erase(it);
  return true;
}

size_t ResponseStore::size() {
  std::lock_guard<std::mutex> lock(mu_);
  evict_locked();
  return order_.size();
}

void ResponseStore::evict_locked() {
  const auto now = now_();
  while (!order_.empty() && (order_.size() > limits_.max_responses ||
                             now - order_.front().created >= limits_.max_age)) {
    by_id_.erase(order_.front().id);
    order_.pop_front();
  }
}

}  // namespace ponder::server
