// ponder info M.gguf [--json]: what a GGUF file holds, for people and for scripts.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "gguf/gguf_file.h"
#include "gguf/model_fingerprint.h"
#include "model/x16_cache.h"
#include "server/common/model_facts.h"

namespace ponder::cli {
namespace {

using nlohmann::json;

// What the x16 layout cache holds, for this file (by its fingerprint) and in all.
json x16_cache_json(const GgufFile& f) {
  const X16CacheOptions o = x16_cache_default();
  json j = {{"dir", o.dir}, {"max_bytes", o.max_bytes}};
  const X16CacheUsage u = x16_cache_usage(o.dir, o.dir.empty() ? "" : model_fingerprint(f));
  j["files"] = u.files;
  j["bytes"] = u.bytes;
  j["model_files"] = u.model_files;
  j["model_bytes"] = u.model_bytes;
  return j;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", b);
}

std::string template_family(const GgufFile& f) {
  auto t = f.get_string("tokenizer.chat_template");
  if (!t.has_value()) return "none";
  if (t->find("<｜Assistant｜>") != std::string::npos) return "deepseek-r1";
  if (t->find("<|im_start|>") != std::string::npos) return "chatml";
  return "other";
}

struct TypeTotal {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t elements = 0;
};

int run_info(int argc, char** argv) {
  CLI::App app{"Show what a GGUF file holds: metadata, tokenizer, chat template, tensors"};
  std::string path;
  bool as_json = false;
  app.add_option("model", path, "GGUF file")->required();
  app.add_flag("--json", as_json, "Print JSON instead of text");
  CLI11_PARSE(app, argc, argv);

  auto file = GgufFile::open(path);
  if (!file.has_value()) return fail("info", file.status().message());
  const GgufFile& f = *file;

  std::map<std::string, TypeTotal> mix;
  int64_t params = 0, tensor_bytes = 0;
  for (const TensorInfo& t : f.tensors()) {
    TypeTotal& tt = mix[std::string(ggml_type_name(t.type))];
    tt.count++;
    tt.bytes += t.n_bytes;
    tt.elements += t.n_elements;
    params += t.n_elements;
    tensor_bytes += t.n_bytes;
  }
  const std::string arch = f.get_string("general.architecture").has_value()
                               ? f.get_string("general.architecture").value()
                               : "";
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  auto merges = f.get_string_array("tokenizer.ggml.merges");

  if (as_json) {
    json j;
    j["path"] = path;
    j["version"] = f.version();
    j["file_size"] = f.file_size();
    j["architecture"] = arch;
    j["parameters"] = params;
    j["tensor_bytes"] = tensor_bytes;
    j["x16_cache"] = x16_cache_json(f);
    j["chat_template"] = template_family(f);
    json meta = json::object();
    for (const auto& [k, v] : f.metadata()) meta[k] = server::gguf_value_json(v);
    j["metadata"] = meta;
    json types = json::object();
    for (const auto& [name, tt] : mix) {
      types[name] = {{"tensors", tt.count}, {"bytes", tt.bytes}, {"elements", tt.elements}};
    }
    j["type_mix"] = types;
    json tensors = json::array();
    for (const TensorInfo& t : f.tensors()) {
      tensors.push_back({{"name", t.name},
                         {"type", ggml_type_name(t.type)},
                         {"shape", t.shape},
                         {"bytes", t.n_bytes},
                         {"offset", f.data_offset() + t.offset}});
    }
    j["tensors"] = tensors;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }

  fmt::print("file:          {} ({}, GGUF v{})\n", path, human_bytes(f.file_size()), f.version());
  fmt::print("architecture:  {}\n", arch.empty() ? "(none)" : arch);
  if (auto name = f.get_string("general.name"); name.has_value())
    fmt::print("name:          {}\n", *name);
  fmt::print("parameters:    {} ({:.3f} B)\n", params, params / 1e9);
  const json x16 = x16_cache_json(f);
  if (x16["dir"].get<std::string>().empty()) {
    fmt::print("x16 cache:     off\n");
  } else {
    fmt::print("x16 cache:     {}: this model {} file(s) {}, all {} file(s) {} (at most {})\n",
               x16["dir"].get<std::string>(), x16["model_files"].get<int64_t>(),
               human_bytes(x16["model_bytes"].get<double>()), x16["files"].get<int64_t>(),
               human_bytes(x16["bytes"].get<double>()),
               human_bytes(x16["max_bytes"].get<double>()));
  }
  fmt::print("\nhyperparameters:\n");
  for (const auto& [k, v] : f.metadata()) {
    if (!arch.empty() && k.rfind(arch + ".", 0) == 0) fmt::print("  {:<40} {}\n", k, v.describe());
  }
  fmt::print("\ntokenizer:\n");
  if (tokens.has_value()) {
    fmt::print(
        "  model {}, pre {}, {} tokens, {} merges\n",
        f.get_string("tokenizer.ggml.model").has_value() ? *f.get_string("tokenizer.ggml.model")
                                                         : "?",
        f.get_string("tokenizer.ggml.pre").has_value() ? *f.get_string("tokenizer.ggml.pre") : "?",
        (*tokens)->size(), merges.has_value() ? (*merges)->size() : 0);
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.padding_token_id"}) {
      auto id = f.get_u32(key);
      if (id.has_value() && *id < (*tokens)->size()) {
        fmt::print("  {:<32} {} {}\n", key, *id, (**tokens)[*id]);
      }
    }
  } else {
    fmt::print("  (none)\n");
  }
  fmt::print("chat template: {}\n", template_family(f));
  fmt::print("\nother metadata:\n");
  for (const auto& [k, v] : f.metadata()) {
    if ((!arch.empty() && k.rfind(arch + ".", 0) == 0) || k == "tokenizer.chat_template") continue;
    fmt::print("  {:<40} {}\n", k, v.describe());
  }
  fmt::print("\ntensors ({}):\n", f.tensors().size());
  for (const TensorInfo& t : f.tensors()) {
    fmt::print("  {:<32} {:<6} {:<18} {:>12}\n", t.name, ggml_type_name(t.type), t.shape_string(),
               human_bytes(static_cast<double>(t.n_bytes)));
  }
  fmt::print("\ntype mix:\n");
  for (const auto& [name, tt] : mix) {
    fmt::print("  {:<6} {:>4} tensors {:>12}  {:5.1f}% of bytes, {:.2f} bits/weight\n", name,
               tt.count, human_bytes(static_cast<double>(tt.bytes)),
               100.0 * tt.bytes / std::max<int64_t>(1, tensor_bytes), 8.0 * tt.bytes / tt.elements);
  }
  fmt::print("total: {} in tensors, {:.2f} bits/weight\n",
             human_bytes(static_cast<double>(tensor_bytes)),
             8.0 * tensor_bytes / std::max<int64_t>(1, params));
  return 0;
}

}  // namespace

PONDER_COMMAND("info", "show a GGUF file's metadata, tokenizer, template and tensors", run_info);

}  // namespace ponder::cli
