#include "quant/model_quantizer.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "gguf/gguf_writer.h"
#include "quant/quantize.h"

namespace ponder {

namespace {

bool is_float_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

}  // namespace

ModelQuantizer::ModelQuantizer(QuantMix mix, int n_threads) : mix_(mix), pool_(n_threads) {}

Expected<MixModelInfo> ModelQuantizer::model_info(const GgufFile& in) {
  PONDER_ASSIGN_OR_RETURN(const std::string arch, in.get_string("general.architecture"));
  PONDER_ASSIGN_OR_RETURN(const uint32_t n_layer, in.get_u32(arch + ".block_count"));
  PONDER_ASSIGN_OR_RETURN(const uint32_t n_head, in.get_u32_or(arch + ".attention.head_count", 1));
  PONDER_ASSIGN_OR_RETURN(const uint32_t n_head_kv,
                          in.get_u32_or(arch + ".attention.head_count_kv", n_head));
  MixModelInfo info;
  info.n_layer = static_cast<int>(n_layer);
  info.n_gqa = n_head_kv > 0 ? static_cast<int>(n_head / n_head_kv) : 0;
  info.has_output = in.find_tensor("output.weight") != nullptr;
  return info;
}

Expected<std::vector<TensorPlan>> ModelQuantizer::plan(const GgufFile& in) const {
  PONDER_ASSIGN_OR_RETURN(const MixModelInfo model, model_info(in));
  std::vector<TensorPlan> plans;
  plans.reserve(in.tensors().size());
  for (const TensorInfo& t : in.tensors()) {
    const TensorTypeChoice choice = choose_tensor_type(mix_, model, t.name, t.shape, t.type);
    if (choice.type != t.type && !can_dequantize(t.type)) {
      return Status::errorf("tensor {}: cannot convert from {} (Ponder cannot read that type)",
                            t.name, ggml_type_name(t.type));
    }
    plans.push_back({t.name, t.shape, t.type, choice.type, choice.fallback});
  }
  return plans;
}

void ModelQuantizer::convert(const TensorPlan& plan, const uint8_t* src, uint8_t* out) {
  const int64_t row_length = plan.shape[0];
  int64_t n_rows = 1;
  for (size_t i = 1; i < plan.shape.size(); ++i) n_rows *= plan.shape[i];
  const int64_t in_row_bytes = ggml_row_bytes(plan.from, row_length);
  const int64_t out_row_bytes = ggml_row_bytes(plan.to, row_length);
  // Chunks of at least ~64K elements keep the per-chunk overhead negligible.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / row_length);
  pool_.parallel_for(n_rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> row(plan.from == GgmlType::F32 ? 0 : static_cast<size_t>(row_length));
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* in_row = src + r * in_row_bytes;
      const float* x = reinterpret_cast<const float*>(in_row);
      if (plan.from != GgmlType::F32) {
        dequantize_row(plan.from, in_row, row.data(), row_length);
        x = row.data();
      }
      quantize_row(plan.to, x, out + r * out_row_bytes, row_length);
    }
  });
}

Status ModelQuantizer::quantize(const GgufFile& in, const std::string& out_path) {
  PONDER_ASSIGN_OR_RETURN(std::vector<TensorPlan> plans, plan(in));

  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) writer.set(key, value);
  if (in.find("general.alignment") != nullptr) {
    writer.set_alignment(static_cast<uint32_t>(in.alignment()));
  }
  writer.set("general.quantization_version", GgufValue::u32(2));
  writer.set("general.file_type", GgufValue::u32(quant_mix_file_type(mix_)));
  for (const char* key : {"split.no", "split.count", "split.tensors.count"}) writer.remove(key);

  bool warned_requantize = false;
  for (size_t i = 0; i < plans.size(); ++i) {
    const TensorPlan& p = plans[i];
    const TensorInfo& t = in.tensors()[i];
    if (p.fallback) {
      log_warn("{}: row length {} does not fit the mix's type, using {}", p.name, p.shape[0],
               ggml_type_name(p.to));
    }
    if (p.from != p.to && !is_float_type(p.from) && !warned_requantize) {
      log_warn(
          "{} is already quantized ({}): requantizing from dequantized values loses quality "
          "twice; quantize from the F32/F16/BF16 model when you can",
          p.name, ggml_type_name(p.from));
      warned_requantize = true;
    }
    const uint8_t* src = t.data;
    Status st;
    if (p.from == p.to) {
      st = writer.add_tensor_bytes(p.name, p.to, p.shape, src);
    } else {
      st = writer.add_tensor(p.name, p.to, p.shape, [this, &p, src](uint8_t* out, int64_t) {
        convert(p, src, out);
        return Status::ok();
      });
    }
    PONDER_RETURN_IF_ERROR(st);
  }
  if (progress_) {
    writer.set_progress([this, &plans](size_t index, size_t count, const std::string&) {
      progress_(index, count, plans[index - 1]);
    });
  }
  return writer.write(out_path);
}

}  // namespace ponder
