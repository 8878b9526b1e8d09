// Tests only: what the Engine's tests share: a tiny model loaded, a sink that collects what one
// request streams, engine configs and requests of a fixed shape, prompts of a given length.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/tiny_model_for_test.h"

namespace ponder {

inline std::unique_ptr<TinyModel> load(const std::string& type) { return load_tiny_model(type); }

// What one request (all its choices) streamed, collected from the engine thread.
struct Stream {
  struct Choice {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::string reasoning, content;
    GenerateStats stats;
    std::string error;
    bool done = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::map<int32_t, Choice> choices;
  int32_t n_done = 0;
  int32_t first_tokens = 0;       // events seen, for "cancel after k tokens"
  std::vector<int32_t> progress;  // kProgress: prompt positions done

  EventSink sink() {
    return [this](EngineEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.kind == EngineEvent::Kind::kProgress) {
        progress.push_back(ev.prompt_done);
        return;
      }
      Choice& c = choices[ev.choice];
      c.reasoning += ev.reasoning;
      c.content += ev.content;
      if (ev.kind == EngineEvent::Kind::kToken) {
        c.tokens.push_back(ev.token);
        c.logprobs.push_back(ev.logprob);
        first_tokens++;
      } else {
        c.stats = ev.stats;
        c.error = ev.error;
        c.done = true;
        n_done++;
      }
      cv.notify_all();
    };
  }
  void wait(int32_t n_choices = 1) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return n_done >= n_choices; });
  }
  void wait_tokens(int32_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return first_tokens >= n || n_done > 0; });
  }
};

inline EngineConfig config(int32_t kv_positions, int32_t max_running = 8, int32_t max_batch = 512) {
  EngineConfig c;
  c.kv_positions = kv_positions;
  c.max_running = max_running;
  c.max_batch = max_batch;
  c.threads.n_threads = 2;
  return c;
}

inline EngineRequest request(const std::vector<int32_t>& prompt, int32_t max_tokens, float temp,
                             uint64_t seed) {
  EngineRequest r;
  r.prompt = prompt;
  r.options.max_tokens = max_tokens;
  r.options.sampling.temperature = temp;
  r.options.sampling.seed = seed;
  r.options.stop_at_eog = false;
  r.n_logprobs = 2;
  return r;
}

inline std::vector<int32_t> prompt_tokens(const text::Tokenizer& tok, int i) {
  std::string text = "Question " + std::to_string(i) + ": what follows from";
  for (int k = 0; k < 3 + (i * 7) % 23; ++k) text += " the premise number " + std::to_string(k * i);
  return tok.encode(text, false);
}

// n tokens of prompts strung together: with 2-row batches, a prefill of n / 2 steps.
inline std::vector<int32_t> long_prompt_of(const text::Tokenizer& tok, size_t n) {
  std::vector<int32_t> p;
  for (int i = 0; p.size() < n; ++i) {
    auto more = prompt_tokens(tok, i);
    p.insert(p.end(), more.begin(), more.end());
  }
  p.resize(n);
  return p;
}

inline Stream::Choice run_one(Engine& engine, EngineRequest r) {
  Stream s;
  r.sink = s.sink();
  auto id = engine.submit(std::move(r));
  EXPECT_TRUE(id.has_value()) << id.status().message();
  s.wait();
  return s.choices[0];
}

inline void expect_clean(Engine& engine) {
  engine.wait_idle();
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.sequences_running, 0);
}

}  // namespace ponder
