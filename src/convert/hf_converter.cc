#include "convert/hf_converter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "quant/quantize.h"

namespace ponder {
namespace {

// The tensor name table: Hugging Face Qwen2 names <-> GGUF names. "{}" is the layer index.
struct NamePair {
  const char* hf;
  const char* gguf;
};
const NamePair kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
// In the order a layer's tensors are written (llama.cpp's order for this model).
const NamePair kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

// Splits "<prefix><N>.<rest>" into N and rest.
bool split_layer(const std::string& name, const std::string& prefix, int64_t* layer,
                 std::string* rest) {
  if (name.rfind(prefix, 0) != 0) return false;
  size_t i = prefix.size(), start = i;
  while (i < name.size() && i - start < 9 && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == start || i >= name.size() || name[i] != '.') return false;
  if (name[start] == '0' && i - start > 1) return false;  // no leading zeros: one spelling only
  *layer = std::stoll(name.substr(start, i - start));
  *rest = name.substr(i + 1);
  return true;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

uint32_t llama_file_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return 0;
    case GgmlType::F16:
      return 1;
    case GgmlType::Q8_0:
      return 7;
    case GgmlType::BF16:
      return 32;
    default:
      return 0;
  }
}

std::string gguf_tensor_name(const std::string& hf_name) {
  for (const NamePair& p : kGlobalNames) {
    if (hf_name == p.hf) return p.gguf;
  }
  int64_t layer = 0;
  std::string rest;
  if (!split_layer(hf_name, "model.layers.", &layer, &rest)) return "";
  for (const NamePair& p : kLayerNames) {
    if (rest == p.hf) return "blk." + std::to_string(layer) + "." + p.gguf;
  }
  return "";
}

std::string hf_tensor_name(const std::string& gguf_name) {
  for (const NamePair& p : kGlobalNames) {
    if (gguf_name == p.gguf) return p.hf;
  }
  int64_t layer = 0;
  std::string rest;
  if (!split_layer(gguf_name, "blk.", &layer, &rest)) return "";
  for (const NamePair& p : kLayerNames) {
    if (rest == p.gguf) return "model.layers." + std::to_string(layer) + "." + p.hf;
  }
  return "";
}

HfConverter::HfConverter(ConvertOptions options)
    : options_(std::move(options)),
      pool_(options_.n_threads > 0 ? options_.n_threads : default_thread_count()) {}

Status HfConverter::open(const std::string& dir) {
  dir_ = dir;
  if (!std::filesystem::is_directory(dir)) return Status::errorf("{} is not a directory", dir);
  switch (options_.type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
      break;
    default:
      return Status::errorf("output type {} is not supported (expected F32, F16, BF16 or Q8_0)",
                            ggml_type_name(options_.type));
  }
  PONDER_ASSIGN_OR_RETURN(config_, read_hf_config(dir));
  PONDER_ASSIGN_OR_RETURN(vocab_, read_hf_vocab(dir, config_));
  if (options_.vocab_only) return Status::ok();
  PONDER_ASSIGN_OR_RETURN(tensors_, SafetensorsSet::open_dir(dir));
  return make_plan();
}

Status HfConverter::make_plan() {
  const int64_t n_embd = config_.n_embd;
  const int64_t n_vocab = static_cast<int64_t>(vocab_.tokens.size());
  const int64_t n_embd_kv = config_.n_head_kv * config_.head_dim();
  const int64_t n_ff = config_.n_ff;

  // Every source tensor must be one we know (rotary caches are derived data and skipped).
  std::set<std::string> wanted;
  for (const StTensor* t : tensors_.tensors()) {
    if (t->name.find("rotary_emb.inv_freq") != std::string::npos) continue;
    const std::string g = gguf_tensor_name(t->name);
    if (g.empty()) {
      return Status::errorf("{}: tensor {} is not part of a Qwen2 model", t->file, t->name);
    }
    int64_t layer = 0;
    std::string rest;
    if (split_layer(t->name, "model.layers.", &layer, &rest) && layer >= config_.n_layer) {
      return Status::errorf("{}: tensor {} is past num_hidden_layers {}", t->file, t->name,
                            config_.n_layer);
    }
    wanted.insert(t->name);
  }

  plan_.clear();
  auto add = [&](const std::string& hf, std::vector<int64_t> shape, bool required) -> Status {
    const StTensor* src = tensors_.find(hf);
    if (src == nullptr) {
      if (!required) return Status::ok();
      return Status::errorf("{}: tensor {} is missing", dir_, hf);
    }
    // HF shapes are [out, in]; ggml's are [in, out] over the same row-major bytes.
    std::vector<int64_t> hf_shape(shape.rbegin(), shape.rend());
    if (src->shape != hf_shape) {
      return Status::errorf("{}: tensor {} has shape {}, expected {} from config.json", src->file,
                            hf, shape_str(src->shape), shape_str(hf_shape));
    }
    ConvertPlan p;
    p.hf_name = hf;
    p.name = gguf_tensor_name(hf);
    p.shape = std::move(shape);
    p.src = src;
    p.type = GgmlType::F32;
    if (p.shape.size() >= 2) {
      p.type = options_.type;
      // Rows that do not fill Q8_0 blocks fall back to F16, as llama.cpp does.
      if (p.shape[0] % ggml_type_info(p.type).block_size != 0) p.type = GgmlType::F16;
    }
    plan_.push_back(std::move(p));
    return Status::ok();
  };
  PONDER_RETURN_IF_ERROR(add("model.embed_tokens.weight", {n_embd, n_vocab}, true));
  PONDER_RETURN_IF_ERROR(add("model.norm.weight", {n_embd}, true));
  PONDER_RETURN_IF_ERROR(add("lm_head.weight", {n_embd, n_vocab}, !config_.tie_word_embeddings));
  for (int64_t il = 0; il < config_.n_layer; ++il) {
    const std::string l = "model.layers." + std::to_string(il) + ".";
    PONDER_RETURN_IF_ERROR(add(l + "input_layernorm.weight", {n_embd}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.q_proj.weight", {n_embd, n_embd}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.q_proj.bias", {n_embd}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.k_proj.weight", {n_embd, n_embd_kv}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.k_proj.bias", {n_embd_kv}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.v_proj.weight", {n_embd, n_embd_kv}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.v_proj.bias", {n_embd_kv}, true));
    PONDER_RETURN_IF_ERROR(add(l + "self_attn.o_proj.weight", {n_embd, n_embd}, true));
    PONDER_RETURN_IF_ERROR(add(l + "post_attention_layernorm.weight", {n_embd}, true));
    PONDER_RETURN_IF_ERROR(add(l + "mlp.gate_proj.weight", {n_embd, n_ff}, true));
    PONDER_RETURN_IF_ERROR(add(l + "mlp.up_proj.weight", {n_embd, n_ff}, true));
    PONDER_RETURN_IF_ERROR(add(l + "mlp.down_proj.weight", {n_ff, n_embd}, true));
  }
  return Status::ok();
}

int64_t HfConverter::output_bytes() const {
  int64_t total = 0;
  for (const ConvertPlan& p : plan_) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    total += ggml_row_bytes(p.type, n);
  }
  return total;
}

// Drops the pages of a converted source tensor from this process's map, so that resident memory
// stays near one tensor rather than growing to the whole model (the data stays in the page cache).
static void release_pages(const uint8_t* data, int64_t n_bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(n_bytes)) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void HfConverter::convert(const ConvertPlan& p, uint8_t* out) {
  convert_rows(p, out);
  release_pages(p.src->data, p.src->n_bytes);
}

void HfConverter::convert_rows(const ConvertPlan& p, uint8_t* out) {
  const StTensor& src = *p.src;
  const int64_t n_cols = p.shape[0];
  const int64_t n_rows = src.n_elements / n_cols;
  const GgmlType src_type = src.dtype == StDtype::kF32   ? GgmlType::F32
                            : src.dtype == StDtype::kF16 ? GgmlType::F16
                                                         : GgmlType::BF16;
  if (src_type == p.type) {  // same dtype: the same bits
    std::memcpy(out, src.data, static_cast<size_t>(src.n_bytes));
    return;
  }
  const int64_t src_row = n_cols * st_dtype_size(src.dtype);
  const int64_t dst_row = ggml_row_bytes(p.type, n_cols);
  pool_.parallel_for(n_rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(n_cols));    // [n_cols] one row in f32
    std::vector<uint8_t> in(static_cast<size_t>(src_row));  // the row, aligned
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(in.data(), src.data + r * src_row, static_cast<size_t>(src_row));
      dequantize_row(src_type, in.data(), row.data(), n_cols);
      quantize_row(p.type, row.data(), out + r * dst_row, n_cols);
    }
  });
}

Status HfConverter::write(const std::string& out_path) {
  GgufWriter w;
  std::string name = options_.name;
  if (name.empty() && !config_.name_or_path.empty()) {
    name = std::filesystem::path(config_.name_or_path).filename().string();
  }
  if (name.empty()) {
    name = std::filesystem::absolute(dir_).lexically_normal().filename().string();
    if (name.empty()) name = std::filesystem::absolute(dir_).parent_path().filename().string();
  }
  w.set("general.architecture", GgufValue::string("qwen2"));
  w.set("general.name", GgufValue::string(name));
  w.set("general.file_type", GgufValue::u32(llama_file_type(options_.type)));
  // As in the shared reference files (and llama.cpp's quantizer): every type but F32 names the
  // block format version.
  if (options_.type != GgmlType::F32) {
    w.set("general.quantization_version", GgufValue::u32(2));
  }
  const HfConfig& c = config_;
  w.set("qwen2.block_count", GgufValue::u32(static_cast<uint32_t>(c.n_layer)));
  if (c.n_ctx) w.set("qwen2.context_length", GgufValue::u32(static_cast<uint32_t>(*c.n_ctx)));
  w.set("qwen2.embedding_length", GgufValue::u32(static_cast<uint32_t>(c.n_embd)));
  w.set("qwen2.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(c.n_ff)));
  w.set("qwen2.attention.head_count", GgufValue::u32(static_cast<uint32_t>(c.n_head)));
  w.set("qwen2.attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(c.n_head_kv)));
  if (c.rope_theta)
    w.set("qwen2.rope.freq_base", GgufValue::f32(static_cast<float>(*c.rope_theta)));
  if (c.rms_norm_eps) {
    w.set("qwen2.attention.layer_norm_rms_epsilon",
          GgufValue::f32(static_cast<float>(*c.rms_norm_eps)));
  }
  if (c.yarn_factor) {
    w.set("qwen2.rope.scaling.type", GgufValue::string("yarn"));
    w.set("qwen2.rope.scaling.factor", GgufValue::f32(static_cast<float>(*c.yarn_factor)));
    if (c.yarn_orig_ctx) {
      w.set("qwen2.rope.scaling.original_context_length",
            GgufValue::u32(static_cast<uint32_t>(*c.yarn_orig_ctx)));
    }
  }
  vocab_.add_to(w);

  if (!options_.vocab_only) {
    for (size_t i = 0; i < plan_.size(); ++i) {
      const ConvertPlan* p = &plan_[i];
      PONDER_RETURN_IF_ERROR(
          w.add_tensor(p->name, p->type, p->shape, [this, p](uint8_t* out, int64_t) {
            convert(*p, out);
            return Status::ok();
          }));
    }
    if (progress_) {
      w.set_progress(
          [this](size_t i, size_t n, const std::string&) { progress_(i, n, plan_[i - 1]); });
    }
  }
  return w.write(out_path);
}

}  // namespace ponder
