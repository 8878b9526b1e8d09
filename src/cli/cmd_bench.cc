// ponder bench: prompt-processing and generation speed like llama-bench (pp512 / tg128, mean and
// standard deviation over repetitions, a thread sweep naming the best count), batched decode
// throughput, the machine's measured read bandwidth and each tg result as a fraction of it, and
// peak RSS. `-o json` uses llama-bench's field names so the two tools compare directly.
// --concurrent 1,4,8 is the serving mode: N requests through the Engine at once (continuous
// batching, as `ponder serve` runs them), like llama-batched-bench. --spec-replay / --spec ngram
// is the speculative mode (cli/bench_spec.h).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "cli/bench_spec.h"
#include "cli/command.h"
#include "cli/generation_flags.h"
#include "cli/model_session.h"
#include "cpu/cpu_features.h"
#include "cpu/memory_bandwidth.h"
#include "cpu/topology.h"
#include "grammar/json_schema.h"
#include "runtime/bench.h"
#include "runtime/constrained.h"
#include "runtime/serving_bench.h"

namespace ponder::cli {
namespace {

// --json-schema FILE: the schema's grammar compiled and walked (mask time per token), then each
// serving row run free and constrained, alternated, so the two tg figures share a sitting.
std::shared_ptr<grammar::Grammar> bench_grammar(ModelSession& s, const std::string& schema_path,
                                                const std::string& output, Status* error) {
  if (schema_path.empty()) return nullptr;
  std::ifstream in(schema_path);
  const nlohmann::json schema = nlohmann::json::parse(in, nullptr, false);
  if (!in || schema.is_discarded()) {
    *error = Status::errorf("--json-schema {}: not a readable JSON file", schema_path);
    return nullptr;
  }
  Timer to_gbnf;
  auto gbnf = grammar::json_schema_to_gbnf(schema);
  if (!gbnf.has_value()) {
    *error = Status::errorf("--json-schema {}: {}", schema_path, gbnf.status().message());
    return nullptr;
  }
  const double to_gbnf_ms = to_gbnf.ms();
  auto vocab = grammar_vocabulary(s.tokenizer, static_cast<int32_t>(s.model->config().n_vocab));
  auto walk = run_grammar_bench(*gbnf, vocab, 512, 1);
  if (!walk.has_value()) {
    *error = walk.status();
    return nullptr;
  }
  if (output == "md") {
    fmt::print(
        "grammar of {}: schema -> GBNF {:.2f} ms, GBNF -> automaton {:.2f} ms; {} steps walked "
        "through it (fresh memo): "
        "mask per token p50 {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms, mean {:.3f} ms; {} states\n\n",
        schema_path, to_gbnf_ms, walk->compile_ms, walk->n_steps, walk->mask_p50_ms,
        walk->mask_p99_ms, walk->mask_max_ms, walk->mask_mean_ms, walk->n_states);
  }
  auto g = grammar::Grammar::compile(*gbnf);
  return g.has_value() ? *g : nullptr;
}

int run_serving(ModelSession& s, const std::vector<int32_t>& concurrent, int32_t prompt,
                int32_t gen, int32_t late, int threads, int32_t n_ctx, int32_t batch,
                const std::string& output, const std::string& schema_path) {
  Status grammar_error;
  std::shared_ptr<grammar::Grammar> constraint =
      bench_grammar(s, schema_path, output, &grammar_error);
  if (!grammar_error.is_ok()) return fail("bench", grammar_error.message());
  EngineConfig config;
  // The late prompt runs beside the streams (a slot of its own), not after one of them ends.
  config.max_running = *std::max_element(concurrent.begin(), concurrent.end()) + (late > 0 ? 1 : 0);
  config.kv_positions =
      n_ctx > 0 ? n_ctx : std::max(4096, config.max_running * (prompt + gen) + late + 64);
  config.max_batch = batch;
  config.threads.n_threads = threads;
  Engine engine(*s.model, s.tokenizer, config);
  nlohmann::json out = nlohmann::json::array();
  if (output == "md") {
    fmt::print("model: {}, CPU: {} [{}], {} threads, KV pool {} positions\n\n", s.file.path(),
               cpu_features().brand, isa_name(active_isa()), threads, config.kv_positions);
    fmt::print(
        "| requests | prompt | gen |{} T (s) | S_TG (t/s) | all t/s | TTFT p50 / p95 (s) | latency "
        "p50 / p95 (s) | longest gap (s) | CPU |{}\n",
        constraint ? " output |" : "", late > 0 ? " late prompt TTFT (s) |" : "");
    fmt::print("|---|---|---|{}---|---|---|---|---|---|---|{}\n", constraint ? "---|" : "",
               late > 0 ? "---|" : "");
  }
  std::vector<std::pair<int32_t, std::shared_ptr<grammar::Grammar>>> runs;
  for (int32_t n : concurrent) {
    runs.push_back({n, nullptr});
    if (constraint) runs.push_back({n, constraint});
  }
  for (const auto& [n, g] : runs) {
    auto r = run_serving_bench(engine, static_cast<int32_t>(s.model->config().n_vocab), n, prompt,
                               gen, late, 1, g);
    if (!r.has_value()) return fail("bench", r.status().message());
    const std::string kind = !constraint ? "" : g ? " constrained |" : " free |";
    if (output == "json") {
      out.push_back({{"n_concurrent", n},
                     {"n_prompt", prompt},
                     {"n_gen", gen},
                     {"n_threads", threads},
                     {"constrained", g != nullptr},
                     {"total_s", r->total_s},
                     {"gen_tps", r->gen_tps},
                     {"total_tps", r->total_tps},
                     {"ttft_p50_s", r->ttft_p50_s},
                     {"ttft_p95_s", r->ttft_p95_s},
                     {"latency_p50_s", r->latency_p50_s},
                     {"latency_p95_s", r->latency_p95_s},
                     {"max_gap_s", r->max_gap_s},
                     {"late_prompt", r->late_prompt},
                     {"late_ttft_s", r->late_ttft_s},
                     {"preemptions", r->preemptions},
                     {"cpu_util", r->cpu_util}});
    } else {
      fmt::print(
          "| {} | {} | {} |{} {:.2f} | {:.1f} | {:.1f} | {:.3f} / {:.3f} | {:.2f} / {:.2f} | "
          "{:.3f} | {:.0f}% |{}\n",
          n, prompt, gen, kind, r->total_s, r->gen_tps, r->total_tps, r->ttft_p50_s, r->ttft_p95_s,
          r->latency_p50_s, r->latency_p95_s, r->max_gap_s, 100 * r->cpu_util,
          late > 0 ? fmt::format(" {:.2f} |", r->late_ttft_s) : "");
    }
  }
  if (output == "json") fmt::print("{}\n", out.dump(2));
  return 0;
}

struct Row {
  std::string test;
  BenchResult r;
  std::vector<double>
      paired_ratios;  // --paired, the row at depth: t/s over depth 0's, per repetition
};

// --sweep: one table of pp and tg at each depth, tg beside its share of depth 0 and the roofline.
int run_sweep_cmd(ModelSession& s, int32_t max_depth, int32_t n_pp, int32_t n_tg, int threads,
                  const std::string& output) {
  ThreadPool pool(threads);
  auto points = run_sweep(*s.model, max_depth, n_pp, n_tg, pool);
  if (!points.has_value()) return fail("bench", points.status().message());
  nlohmann::json out = nlohmann::json::array();
  if (output == "md") {
    fmt::print("attention: {}\n\n", s.model->numerics());
    fmt::print(
        "| depth | pp{} (t/s) | tg{} (t/s) | tg / tg at depth 0 | roofline "
        "|\n|---|---|---|---|---|\n",
        n_pp, n_tg);
  }
  const double tg0 = n_tg / points->front().tg_s;
  for (const SweepPoint& p : *points) {
    const double pp = n_pp / p.pp_s, tg = n_tg / p.tg_s;
    const double roof = tg_roofline_fraction(*s.model, p.depth + n_tg / 2.0);
    if (output == "md") {
      fmt::print("| {} | {:.2f} | {:.2f} | {:.0f}% | {:.0f}% |\n", p.depth, pp, tg, 100 * tg / tg0,
                 100 * roof);
    } else {
      out.push_back({{"n_depth", p.depth},
                     {"n_threads", threads},
                     {"pp_ts", pp},
                     {"tg_ts", tg},
                     {"tg_of_depth0", tg / tg0},
                     {"tg_roofline", roof}});
    }
  }
  if (output == "json") fmt::print("{}\n", out.dump(2));
  return 0;
}

int run_bench_cmd(int argc, char** argv) {
  CLI::App app{"Measure prompt processing and generation speed"};
  std::string model_path, output = "md", json_schema;
  std::vector<int32_t> n_prompt = {512}, n_gen = {128}, batches, depths = {0};
  std::vector<int> flash = {1};
  KvTypeFlags kv_types;
  std::vector<int> threads;
  int reps = 5;
  bool no_bandwidth = false, pin = false, paired = false;
  std::vector<int32_t> concurrent;
  int32_t sweep = 0, sweep_pp = 512, sweep_tg = 128;
  int32_t serve_prompt = 128, serve_gen = 64, late_prompt = 0, serve_ctx = 0, serve_batch = 512;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-p,--n-prompt", n_prompt, "prompt lengths for pp tests (0 to skip)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-n,--n-gen", n_gen, "generated tokens for tg tests (0 to skip)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-d,--n-depth", depths,
                 "tokens already in the context before each test (e.g. 0,4096)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--flash-attn", flash,
                 "attention order: 1 the block order (default), 0 llama.cpp's; a list sweeps")
      ->delimiter(',')
      ->check(CLI::IsMember({0, 1}));
  kv_types.add_to(app);
  app.add_option("-t,--threads", threads, "thread counts to sweep (default: 1..physical cores)")
      ->delimiter(',');
  app.add_option("-r,--repetitions", reps, "repetitions per test")->capture_default_str();
  app.add_option("--batch", batches, "also decode this many sequences together (e.g. 2,4,8)")
      ->delimiter(',');
  app.add_option("-o,--output", output, "md or json")->check(CLI::IsMember({"md", "json"}));
  app.add_flag("--no-bandwidth", no_bandwidth, "skip the memory bandwidth measurement");
  app.add_flag("--pin", pin, "pin threads to physical cores");
  app.add_flag("--paired", paired,
               "pp and tg at each depth > 0 in alternation with the same at depth 0 (two contexts "
               "side by side): the "
               "share of depth 0 is the median of the repetitions' ratios, which a machine whose "
               "speed drifts moves less");
  app.add_option("--sweep", sweep,
                 "sweep mode (ik_llama.cpp's sweep-bench): pp and tg at growing depth up to this "
                 "many positions");
  app.add_option("--sweep-pp", sweep_pp,
                 "sweep mode: prompt tokens per step (the depth grows by this)")
      ->capture_default_str();
  app.add_option("--sweep-tg", sweep_tg, "sweep mode: decode steps measured at each depth")
      ->capture_default_str();
  app.add_option("--concurrent", concurrent,
                 "serving mode: this many requests at once through the engine (e.g. 1,4,8)")
      ->delimiter(',');
  app.add_option("--prompt", serve_prompt, "serving mode: prompt tokens per request")
      ->capture_default_str();
  app.add_option("--gen", serve_gen, "serving mode: generated tokens per request")
      ->capture_default_str();
  app.add_option("--json-schema", json_schema,
                 "serving mode: also run each row with output constrained by this JSON Schema "
                 "(file), and time its masks");
  app.add_option("--late-prompt", late_prompt,
                 "serving mode: a prompt this long arrives once the streams decode");
  app.add_option("-c,--ctx", serve_ctx,
                 "serving mode: KV pool positions (default: enough for all)");
  app.add_option("-b,--batch-size", serve_batch, "serving mode: most rows per forward pass")
      ->capture_default_str();
  SpecBenchFlags spec;
  app.add_option("--spec-replay", spec.replay,
                 "speculative mode: replay the target's own greedy output as guesses, this share "
                 "of them right (e.g. 0.5,0.7,0.9), against plain decoding (--prompt, --gen)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--draft-lengths", spec.lengths,
                 "speculative mode: fixed draft lengths measured beside the adaptive one")
      ->delimiter(',')
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  app.add_option("--draft", spec.draft_path,
                 "speculative mode: also this draft model (same tokenizer) against plain");
  app.add_option("--spec", spec.spec, "speculative mode: also ngram (prompt lookup)")
      ->check(CLI::IsMember({"off", "ngram"}));
  app.add_option("--spec-temperature", spec.temperature,
                 "speculative mode: 0 (default) greedy; above 0 seeded sampling at this "
                 "temperature from the whole vocabulary (no top-k/top-p/min-p), the same seed in "
                 "every run: drafted runs must still give the plain run's tokens. On random "
                 "weights, text that seldom repeats (what --spec ngram costs when it finds little)")
      ->check(CLI::Range(0.0, 10.0));
  CLI11_PARSE(app, argc, argv);
  if (reps < 1) return fail("bench", "-r must be at least 1");
  if (threads.empty()) {
    for (int t = 1; t <= cpu_topology().default_threads(); ++t) threads.push_back(t);
  }
  for (int32_t d : depths) {
    if (d < 0) return fail("bench", fmt::format("depth {} is negative", d));
  }
  for (int t : threads) {
    if (t < 1) return fail("bench", fmt::format("thread count {} is not positive", t));
  }

  // The roofline first, in a child process: on memory no model has fragmented yet, and its
  // buffer outside this process's peak RSS.
  double bandwidth = 0;
  if (!no_bandwidth && sweep == 0 && !spec.any() && concurrent.empty()) {
    bandwidth = measure_read_bandwidth_gbs_apart(*std::max_element(threads.begin(), threads.end()));
  }

  auto session = ModelSession::open(model_path);
  if (!session.has_value()) return fail("bench", session.status().message());
  ModelSession& s = **session;
  s.model->wait_x16_cache_write();  // a first start writes the x16 cache: not while measuring
  if (sweep > 0) {
    if (Status st = kv_types.apply(*s.model, flash.back() != 0); !st.is_ok())
      return fail("bench", st.message());
    return run_sweep_cmd(s, sweep, sweep_pp, sweep_tg, threads.back(), output);
  }
  if (spec.any()) {
    if (Status st = kv_types.apply(*s.model, flash.back() != 0); !st.is_ok())
      return fail("bench", st.message());
    return run_spec_cmd(s, spec, serve_prompt, serve_gen,
                        *std::max_element(threads.begin(), threads.end()), reps, output);
  }
  if (!concurrent.empty()) {
    for (int32_t n : concurrent) {
      if (n < 1) return fail("bench", fmt::format("--concurrent {} must be at least 1", n));
    }
    if (Status st = kv_types.apply(*s.model, flash.back() != 0); !st.is_ok())
      return fail("bench", st.message());
    return run_serving(s, concurrent, serve_prompt, serve_gen, late_prompt,
                       *std::max_element(threads.begin(), threads.end()), serve_ctx, serve_batch,
                       output, json_schema);
  }
  const int64_t bytes_per_token = weight_bytes_per_token(*s.model);
  const size_t model_size = s.file.file_size();
  int64_t n_params = 0;
  for (const TensorInfo& t : s.file.tensors()) n_params += t.n_elements;

  std::vector<Row> rows;
  const std::string kv_suffix =
      kv_types.k == "auto" && kv_types.v == "auto" ? "" : " kv " + kv_types.k + "/" + kv_types.v;
  for (int t : threads) {
    ThreadPool pool(t, pin ? cpu_topology().one_cpu_per_core : std::vector<int>{});
    for (int fa : flash) {
      if (Status st = kv_types.apply(*s.model, fa != 0); !st.is_ok())
        return fail("bench", st.message());
      for (int32_t d : depths) {
        // llama-bench's names: "pp512", "tg128 @ d4096"; " ggml" marks llama.cpp's attention order.
        auto add = [&](const std::string& base, int32_t p, int32_t g, int32_t seqs) -> bool {
          const std::string name =
              base + (d > 0 ? fmt::format(" @ d{}", d) : "") + (fa ? "" : " ggml") + kv_suffix;
          auto r = run_bench(*s.model, p, g, seqs, reps, pool, 512, d);
          if (!r.has_value()) {
            fail("bench", r.status().message());
            return false;
          }
          rows.push_back({name, *r, {}});
          if (output == "md") {
            fmt::print(stderr, "  {} t={}: {:.2f} t/s\n", name, t, r->mean_ts());
          }
          return true;
        };
        // --paired: the test at depth d in alternation with it at depth 0 ("pp512 @ d4096 (paired)"
        // and "pp512 (paired with d4096)").
        auto add_paired = [&](const std::string& base, int32_t p, int32_t g) -> bool {
          const std::string name =
              base + fmt::format(" @ d{}", d) + (fa ? "" : " ggml") + kv_suffix;
          auto r = run_bench_paired(*s.model, p, g, d, reps, pool);
          if (!r.has_value()) {
            fail("bench", r.status().message());
            return false;
          }
          rows.push_back({name + " (paired)", r->at_depth, r->ratios});
          rows.push_back(
              {base + fmt::format(" (paired with d{})", d) + (fa ? "" : " ggml") + kv_suffix,
               r->at_zero,
               {}});
          if (output == "md") {
            fmt::print(
                stderr,
                "  {} t={}: {:.2f} t/s, {:.0f}% of depth 0 (median of {} paired repetitions)\n",
                name, t, r->at_depth.mean_ts(), 100 * median(r->ratios), r->ratios.size());
          }
          return true;
        };
        for (int32_t p : n_prompt) {
          if (p > 0 && paired && d > 0) {
            if (!add_paired(fmt::format("pp{}", p), p, 0)) return 1;
            continue;
          }
          if (p > 0 && !add(fmt::format("pp{}", p), p, 0, 1)) return 1;
        }
        for (int32_t g : n_gen) {
          if (g > 0 && paired && d > 0) {
            if (!add_paired(fmt::format("tg{}", g), 0, g)) return 1;
            continue;
          }
          if (g > 0 && !add(fmt::format("tg{}", g), 0, g, 1)) return 1;
          for (int32_t b : batches) {
            if (g > 0 && b > 1 && !add(fmt::format("tg{} x{}", g, b), 0, g, b)) return 1;
          }
        }
      }
    }
  }

  const size_t peak_rss = peak_rss_bytes();

  const std::string model_name = std::filesystem::path(model_path).filename().string();
  if (output == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& row : rows) {
      nlohmann::json samples_ts = nlohmann::json::array(), samples_ns = nlohmann::json::array();
      for (double sec : row.r.seconds) {
        samples_ts.push_back(row.r.tokens() / sec);
        samples_ns.push_back(static_cast<int64_t>(sec * 1e9));
      }
      out.push_back({{"build_commit", "ponder"},
                     {"cpu_info", cpu_features().brand},
                     {"backend", fmt::format("CPU ({})", isa_name(active_isa()))},
                     {"model_filename", model_path},
                     {"model_type", model_name},
                     {"model_size", model_size},
                     {"model_n_params", n_params},
                     {"n_batch", 512},
                     {"n_ubatch", 512},
                     {"n_threads", row.r.n_threads},
                     {"n_prompt", row.r.n_prompt},
                     {"n_gen", row.r.n_gen},
                     {"n_seq", row.r.n_seq},
                     {"n_depth", row.r.n_depth},
                     {"flash_attn", row.r.flash_attn},
                     {"type_k", kv_type_name(s.model->kv_type_k())},
                     {"type_v", kv_type_name(s.model->kv_type_v())},
                     {"avg_ns", static_cast<int64_t>(row.r.mean_s() * 1e9)},
                     {"stddev_ns", static_cast<int64_t>(row.r.stddev_s() * 1e9)},
                     {"avg_ts", row.r.mean_ts()},
                     {"stddev_ts", row.r.stddev_ts()},
                     {"samples_ns", samples_ns},
                     {"samples_ts", samples_ts},
                     {"bytes_per_token", row.r.n_gen > 0 ? bytes_per_token : 0},
                     {"mem_bandwidth_gbs", bandwidth},
                     {"peak_rss_bytes", peak_rss},
                     {"load_s", s.load_s},
                     {"paired_ratios", row.paired_ratios}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }

  fmt::print("model: {} ({:.2f} GB, {:.2f} B params), CPU: {} [{}], {}\n", model_name,
             model_size / 1e9, n_params / 1e9, cpu_features().brand, isa_name(active_isa()),
             cpu_topology().summary());
  const int64_t x16 = s.model->x16_copy_bytes();
  fmt::print(
      "load: {:.2f} s (mapped file, tokenizer, weight binding{})\n", s.load_s,
      x16 > 0 ? fmt::format(", x16 {} of {:.1f} MB",
                            s.model->x16_from_cache() ? "layout read from the x16 cache" : "copy",
                            x16 / 1e6)
              : std::string(", weights in the file's layout"));
  if (bandwidth > 0) fmt::print("memory read bandwidth: {:.1f} GB/s (measured)\n", bandwidth);
  fmt::print("attention (last configuration): {}\n", s.model->numerics());
  const PrefetchCalibration& pf = s.model->weight_prefetch_choice();
  fmt::print("weight prefetch in decode: {}{}\n", pf.prefetch ? "on" : "off",
             pf.measured ? fmt::format(" (measured at load: {:.1f} ms a pass with, {:.1f} without)",
                                       pf.s_with * 1e3, pf.s_without * 1e3)
                         : std::string(" (not measured: PONDER_PREFETCH or small weights)"));
  const Bf16AttentionChoice ba = s.model->bf16_attention_choice();
  const Qwen2Config& mc = s.model->config();
  const Bf16AttentionTiming bt = time_bf16_attention(mc.head_dim, mc.n_head / mc.n_head_kv);
  fmt::print("bf16 attention by default: {} ({}){}\n", ba.bf16 ? "on" : "off", ba.why,
             bt.ns_f16 > 0 ? fmt::format("; timed here: {:.1f} us a 512-position chunk with a "
                                         "bf16 cache, {:.1f} with f16 and f32 scores",
                                         bt.ns_bf16 * 1e-3, bt.ns_f16 * 1e-3)
                           : std::string());
  fmt::print(
      "\n| test | threads | t/s | GB/s of weights | % of bandwidth |\n|---|---|---|---|---|\n");
  std::map<std::string, std::pair<int, double>> best;
  for (const Row& row : rows) {
    std::string gbs = "", frac = "";
    if (row.r.n_gen > 0) {
      const double eff = bytes_per_token * row.r.mean_ts() / row.r.n_seq / 1e9;
      gbs = fmt::format("{:.1f}", eff);
      if (bandwidth > 0) frac = fmt::format("{:.0f}%", 100 * eff / bandwidth);
    }
    fmt::print("| {} | {} | {:.2f} ± {:.2f} | {} | {} |\n", row.test, row.r.n_threads,
               row.r.mean_ts(), row.r.stddev_ts(), gbs, frac);
    auto& b = best[row.test];
    if (row.r.mean_ts() > b.second) b = {row.r.n_threads, row.r.mean_ts()};
  }
  if (threads.size() > 1) {
    for (const auto& [test, b] : best)
      fmt::print("best threads for {}: {} ({:.2f} t/s)\n", test, b.first, b.second);
  }
  // At depth: each test beside the same test at depth 0, and decode beside what memory allows.
  for (const Row& row : rows) {
    if (row.r.n_depth == 0) continue;
    if (!row.paired_ratios.empty()) {
      const std::vector<double>& ratios = row.paired_ratios;
      const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
      const std::string roof =
          row.r.n_gen > 0
              ? fmt::format("; the memory roofline: {:.0f}%",
                            100 * tg_roofline_fraction(*s.model, row.r.n_depth + row.r.n_gen / 2.0))
              : "";
      fmt::print(
          "{} t={}: {:.0f}% of depth 0, the median of {} paired repetitions ({:.0f}-{:.0f}%{})\n",
          row.test, row.r.n_threads, 100 * median(ratios), ratios.size(), 100 * *lo, 100 * *hi,
          roof);
      continue;
    }
    for (const Row& base : rows) {
      if (base.r.n_depth != 0 || base.r.n_threads != row.r.n_threads ||
          base.r.flash_attn != row.r.flash_attn || base.r.n_prompt != row.r.n_prompt ||
          base.r.n_gen != row.r.n_gen || base.r.n_seq != row.r.n_seq)
        continue;
      std::string roof;
      if (row.r.n_gen > 0)
        roof = fmt::format(" (the memory roofline: {:.0f}%)",
                           100 * tg_roofline_fraction(*s.model, row.r.n_depth + row.r.n_gen / 2.0));
      fmt::print("{} t={}: {:.0f}% of depth 0{}\n", row.test, row.r.n_threads,
                 100 * row.r.mean_ts() / base.r.mean_ts(), roof);
    }
  }
  fmt::print("peak RSS: {:.2f} GB\n", peak_rss / 1e9);
  return 0;
}

}  // namespace

PONDER_COMMAND("bench", "measure prompt and generation speed (like llama-bench)", run_bench_cmd);

}  // namespace ponder::cli
