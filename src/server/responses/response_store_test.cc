// ResponseStore: its count and age bounds (a fake clock), deletion, and conversations as chains
// that outlive the eviction of their earlier turns.
#include "server/responses/response_store.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

namespace ponder::server {
namespace {

using nlohmann::json;

std::shared_ptr<StoredResponse> turn(json items,
                                     std::shared_ptr<const StoredResponse> previous = nullptr) {
  auto r = std::make_shared<StoredResponse>();
  r->response = {{"id", "x"}};
  r->items = std::move(items);
  r->previous = std::move(previous);
  return r;
}

TEST(ResponsesStoreTest, KeepsGetsAndDeletes) {
  ResponseStore store;
  EXPECT_EQ(store.get("resp_a"), nullptr);
  store.put("resp_a", turn(json::array({1, 2})));
  ASSERT_NE(store.get("resp_a"), nullptr);
  EXPECT_EQ(store.get("resp_a")->items, json::array({1, 2}));
  EXPECT_TRUE(store.erase("resp_a"));
  EXPECT_FALSE(store.erase("resp_a"));
  EXPECT_EQ(store.get("resp_a"), nullptr);
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResponsesStoreTest, TheOldestGoFirstPastTheCount) {
  ResponseStore store({.max_responses = 3, .max_age = std::chrono::seconds(3600)});
  for (int i = 0; i < 5; ++i) store.put(fmt::format("r{}", i), turn(json::array({i})));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.get("r0"), nullptr);
  EXPECT_EQ(store.get("r1"), nullptr);
  EXPECT_NE(store.get("r2"), nullptr);
  EXPECT_NE(store.get("r4"), nullptr);
  store.put("r2", turn(json::array({22})));  // a replaced id counts as new
  store.put("r5", turn(json::array({5})));
  EXPECT_EQ(store.get("r3"), nullptr);
  EXPECT_EQ(store.get("r2")->items, json::array({22}));
}

TEST(ResponsesStoreTest, ResponsesExpireAfterTheirAge) {
  auto now = std::chrono::steady_clock::time_point{};
  ResponseStore store({.max_responses = 100, .max_age = std::chrono::seconds(60)},
                      [&now] { return now; });
  store.put("old", turn(json::array()));
  now += std::chrono::seconds(30);
  store.put("new", turn(json::array()));
  now += std::chrono::seconds(29);
  EXPECT_NE(store.get("old"), nullptr);
  now += std::chrono::seconds(1);  // old is 60 s old
  EXPECT_EQ(store.get("old"), nullptr);
  EXPECT_NE(store.get("new"), nullptr);
  now += std::chrono::seconds(30);
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResponsesStoreTest, ItemsAreFoundByIdNewestFirst) {
  ResponseStore store;
  store.put("t1", turn(json::parse(R"([{"id": "fc_1", "n": 1}, {"id": "msg_1"}])")));
  store.put("t2", turn(json::parse(R"([{"id": "fc_1", "n": 2}])")));
  ASSERT_TRUE(store.find_item("fc_1"));
  EXPECT_EQ((*store.find_item("fc_1"))["n"], 2);
  EXPECT_TRUE(store.find_item("msg_1"));
  EXPECT_FALSE(store.find_item("msg_2"));
  store.erase("t1");
  EXPECT_FALSE(store.find_item("msg_1"));
}

TEST(ResponsesStoreTest, AConversationIsTheChainOfItsTurns) {
  ResponseStore store({.max_responses = 2, .max_age = std::chrono::seconds(3600)});
  store.put("t1", turn(json::array({"q1", "a1"})));
  store.put("t2", turn(json::array({"q2", "a2"}), store.get("t1")));
  store.put("t3", turn(json::array({"q3", "a3"}), store.get("t2")));
  EXPECT_EQ(store.get("t1"), nullptr);  // evicted, but its turn lives on in t3's chain
  EXPECT_EQ(store.get("t3")->conversation(), json::array({"q1", "a1", "q2", "a2", "q3", "a3"}));
}

}  // namespace
}  // namespace ponder::server
