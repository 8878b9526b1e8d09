// ponder tokenize -m M.gguf (--text "..." | --file F) [--ids] [--no-special] [--bos]
// ponder tokenize -m M.gguf --bench [--file cases.jsonl]
// Shows how the model's tokenizer splits a text: one "id 'piece'" line per token, or with --ids a
// JSON array of the ids. Added tokens written in the text (<think>, <｜User｜>) are recognised
// unless --no-special; no BOS unless --bos. --bench reports the encoding speed in MB/s on the
// Chinese and the English texts of the tokenizer test cases.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/timer.h"
#include "cli/command.h"
#include "gguf/gguf_file.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace ponder::cli {
namespace {

using text::Tokenizer;

// A piece as a quoted, printable string: valid UTF-8 as it is, control characters and stray
// bytes (a piece may hold part of a character) escaped.
std::string quote_piece(std::string_view bytes) {
  std::string out = "'";
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    size_t len = 1;
    const uint32_t cp = text::decode_utf8(bytes.data() + i, bytes.size() - i, &len);
    if (cp == text::kInvalidCodepoint) {
      out += fmt::format("\\x{:02X}", b);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\\' || cp == '\'') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02X}", b);
    } else {
      out.append(bytes.substr(i, len));
    }
    i += len;
  }
  return out + "'";
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// The share of a text's characters that are CJK ideographs.
double cjk_share(std::string_view s) {
  size_t n = 0, cjk = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    const uint32_t cp = text::decode_utf8(s.data() + i, s.size() - i, &len);
    ++n;
    if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF)) ++cjk;
    i += len;
  }
  return n ? static_cast<double>(cjk) / static_cast<double>(n) : 0.0;
}

double ascii_letter_share(std::string_view s) {
  size_t letters = 0;
  for (char c : s) letters += (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return s.empty() ? 0.0 : static_cast<double>(letters) / static_cast<double>(s.size());
}

// Encodes the corpus (the texts of one kind, joined, no repeats) again and again for about half a
// second and reports the best pass: one encode call per pass, so nothing is remembered between
// passes.
void bench_one(const Tokenizer& tok, const char* name, const std::string& corpus) {
  if (corpus.empty()) {
    fmt::print("{:<8} no text\n", name);
    return;
  }
  size_t n_tokens = tok.encode(corpus, true).size();  // warm-up
  double best = 1e30;
  Timer total;
  int passes = 0;
  while (passes < 5 || total.seconds() < 0.5) {
    Timer t;
    n_tokens = tok.encode(corpus, true).size();
    best = std::min(best, t.seconds());
    ++passes;
  }
  fmt::print("{:<8} {:>7.2f} MB/s  {:>10.0f} tokens/s  ({} bytes -> {} tokens, best of {})\n", name,
             static_cast<double>(corpus.size()) / best / 1e6, static_cast<double>(n_tokens) / best,
             corpus.size(), n_tokens, passes);
}

int run_bench(const Tokenizer& tok, const std::string& cases_path) {
  std::ifstream f(cases_path);
  if (!f) return fail("tokenize", "cannot open " + cases_path);
  std::string chinese, english;
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("text") || !j["text"].is_string()) {
      return fail("tokenize", cases_path + ": expected one {\"text\": ...} object a line");
    }
    const std::string t = j["text"].get<std::string>();
    if (cjk_share(t) > 0.3) {
      chinese += t + "\n";
    } else if (ascii_letter_share(t) > 0.5) {
      english += t + "\n";
    }
  }
  bench_one(tok, "chinese", chinese);
  bench_one(tok, "english", english);
  return 0;
}

int run_tokenize(int argc, char** argv) {
  CLI::App app{"Tokenize text with a model's tokenizer"};
  std::string model_path, text_arg, file_path;
  bool ids_only = false, no_special = false, add_bos = false, bench = false;
  app.add_option("-m,--model", model_path, "GGUF file (a model, or a vocabulary-only GGUF)")
      ->required();
  auto* text_opt = app.add_option("-t,--text", text_arg, "Text to tokenize");
  auto* file_opt = app.add_option("-f,--file", file_path,
                                  "Read the text from a file (with --bench: a cases.jsonl file)");
  text_opt->excludes(file_opt);
  app.add_flag("--ids", ids_only, "Print only a JSON array of the ids");
  app.add_flag("--no-special", no_special,
               "Treat added tokens written in the text (<think>, <｜User｜>) as plain text");
  app.add_flag("--bos", add_bos, "Start with the BOS token");
  app.add_flag("--bench", bench, "Report the encoding speed on the tokenizer test texts");
  CLI11_PARSE(app, argc, argv);

  auto file = GgufFile::open(model_path);
  if (!file.has_value()) return fail("tokenize", file.status().message());
  Timer load_timer;
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok.has_value()) return fail("tokenize", model_path + ": " + tok.status().message());

  if (bench) {
    fmt::print("tokenizer loaded in {:.1f} ms ({} tokens)\n", load_timer.ms(), tok->n_vocab());
    return run_bench(*tok, file_path.empty()
                               ? std::string(PONDER_SHARED_DIR) + "/tokenizer/cases.jsonl"
                               : file_path);
  }

  std::string input;
  if (!file_path.empty()) {
    if (!read_file(file_path, &input)) return fail("tokenize", "cannot read " + file_path);
  } else if (*text_opt) {
    input = text_arg;
  } else {
    return fail("tokenize", "give the text with --text or --file (or use --bench)");
  }

  std::vector<int32_t> ids;
  if (add_bos && tok->bos() >= 0) ids.push_back(tok->bos());
  tok->encode_append(input, !no_special, &ids);

  if (ids_only) {
    fmt::print("{}\n", nlohmann::json(ids).dump());
    return 0;
  }
  for (int32_t id : ids) fmt::print("{:>7} {}\n", id, quote_piece(tok->token_to_bytes(id)));
  return 0;
}

}  // namespace

PONDER_COMMAND("tokenize", "tokenize text with a model's tokenizer (ids and pieces, or --bench)",
               run_tokenize);

}  // namespace ponder::cli
