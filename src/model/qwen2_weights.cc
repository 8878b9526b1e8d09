#include "model/qwen2_weights.h"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>

#include "base/hash128.h"
#include "base/log.h"
#include "base/mapped_file.h"
#include "cpu/numa_memory.h"
#include "cpu/topology.h"
#include "kernels/interleave.h"
#include "kernels/kernel_table.h"

namespace ponder {
namespace {

class Binder {
 public:
  explicit Binder(const GgufFile& f) : f_(f) {}

  Expected<const TensorInfo*> find(const std::string& name, std::vector<int64_t> shape) {
    const TensorInfo* t = f_.find_tensor(name);
    if (t == nullptr) return Status::errorf("missing tensor {}", name);
    if (t->shape != shape) {
      TensorInfo want;
      want.shape = shape;
      return Status::errorf("tensor {}: expected shape {}, found {}", name, want.shape_string(),
                            t->shape_string());
    }
    return t;
  }

  // 1-D f32 vectors: norms and biases.
  Expected<const float*> vector(const std::string& name, int64_t n) {
    PONDER_ASSIGN_OR_RETURN(const TensorInfo* t, find(name, {n}));
    if (t->type != GgmlType::F32) {
      return Status::errorf("tensor {}: expected type F32, found {}", name,
                            ggml_type_name(t->type));
    }
    if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0) {
      return Status::errorf("tensor {}: data is not 4-byte aligned", name);
    }
    return reinterpret_cast<const float*>(t->data);
  }

  Expected<WeightView> matrix(const std::string& name, int64_t n_out, int64_t n_in) {
    PONDER_ASSIGN_OR_RETURN(const TensorInfo* t, find(name, {n_in, n_out}));
    switch (t->type) {
      case GgmlType::Q8_1:
      case GgmlType::Q8_K:
        return Status::errorf("tensor {}: type {} is for activations, not weights", name,
                              ggml_type_name(t->type));
      default:
        break;
    }
    return WeightView{t->type, t->data, n_in, n_out};
  }

 private:
  const GgufFile& f_;
};

}  // namespace

Expected<Qwen2Weights> Qwen2Weights::bind(const GgufFile& file, const Qwen2Config& c) {
  Binder b(file);
  Qwen2Weights w;
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  PONDER_ASSIGN_OR_RETURN(w.token_embd, b.matrix("token_embd.weight", c.n_vocab, c.n_embd));
  PONDER_ASSIGN_OR_RETURN(w.output_norm, b.vector("output_norm.weight", c.n_embd));
  if (file.find_tensor("output.weight") != nullptr) {
    PONDER_ASSIGN_OR_RETURN(w.output, b.matrix("output.weight", c.n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  // Each layer is 12 tensors: a block count beyond what the file holds is refused before the
  // layer table is sized by it (a 4-byte field must not make the loader allocate gigabytes).
  constexpr int64_t kTensorsPerLayer = 12;
  if (c.n_layer > static_cast<int64_t>(file.tensors().size()) / kTensorsPerLayer) {
    return Status::errorf(
        "qwen2.block_count is {} but the file holds only {} tensors ({} per layer)", c.n_layer,
        file.tensors().size(), kTensorsPerLayer);
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    Qwen2Layer& l = w.layers[static_cast<size_t>(i)];
    auto name = [i](const char* suffix) { return fmt::format("blk.{}.{}", i, suffix); };
    PONDER_ASSIGN_OR_RETURN(l.attn_norm, b.vector(name("attn_norm.weight"), c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.wq, b.matrix(name("attn_q.weight"), q_dim, c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.wk, b.matrix(name("attn_k.weight"), kv_dim, c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.wv, b.matrix(name("attn_v.weight"), kv_dim, c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.bq, b.vector(name("attn_q.bias"), q_dim));
    PONDER_ASSIGN_OR_RETURN(l.bk, b.vector(name("attn_k.bias"), kv_dim));
    PONDER_ASSIGN_OR_RETURN(l.bv, b.vector(name("attn_v.bias"), kv_dim));
    PONDER_ASSIGN_OR_RETURN(l.wo, b.matrix(name("attn_output.weight"), c.n_embd, q_dim));
    PONDER_ASSIGN_OR_RETURN(l.ffn_norm, b.vector(name("ffn_norm.weight"), c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.w_gate, b.matrix(name("ffn_gate.weight"), c.n_ff, c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.w_up, b.matrix(name("ffn_up.weight"), c.n_ff, c.n_embd));
    PONDER_ASSIGN_OR_RETURN(l.w_down, b.matrix(name("ffn_down.weight"), c.n_embd, c.n_ff));
  }
  return w;
}

}  // namespace ponder

namespace ponder {

Qwen2Weights::X16Result Qwen2Weights::make_x16_copies(ThreadPool& pool, bool release_file_pages,
                                                      const X16CacheOptions& cache,
                                                      const std::string& fingerprint) {
  std::vector<WeightView*> views;
  std::vector<int64_t> offsets;  // of each copy in one region, 64-byte aligned
  int64_t total = 0;
  auto consider = [&](WeightView* v) {
    if (v->x16 != nullptr || !x16_supported(v->type, v->n_out, v->n_in) ||
        !x16_kernel_available(v->type))
      return;
    views.push_back(v);
    offsets.push_back(total);
    total += x16_bytes(*v);
  };
  consider(&output);
  for (Qwen2Layer& l : layers) {
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) consider(v);
  }
  X16Result result;
  if (total == 0) return result;
  Hash128 layout;
  layout.add("x16 layout 1");
  for (size_t i = 0; i < views.size(); ++i) {
    for (int64_t x :
         {static_cast<int64_t>(views[i]->type), views[i]->n_out, views[i]->n_in, offsets[i]}) {
      layout.add_u64(static_cast<uint64_t>(x));
    }
  }
  result.layout = layout.hex();
  // One region in 2 MiB pages where the kernel gives them: fewer page faults while copying and
  // fewer TLB misses while streaming the weights every token.
  const int64_t region_bytes = (total + kHugePage - 1) / kHugePage * kHugePage;
  HugePages pages = alloc_huge_pages(static_cast<size_t>(region_bytes));
  if (pages == nullptr) return result;  // out of memory: the ggml-layout kernels it is
  uint8_t* region = pages.get();
  // With several NUMA nodes, the pages are spread over all of them before the copy touches them
  // (cpu/numa_memory.h): decode streams every weight each token, from every node's controller.
  const CpuTopology& topo = cpu_topology();
  if (topo.n_numa_nodes > 1 &&
      !interleave_pages(region, static_cast<size_t>(region_bytes), topo.numa_node_ids)) {
    log_warn("could not interleave the x16 weights over {} NUMA nodes", topo.n_numa_nodes);
  }
  x16_storage_.push_back(std::move(pages));
  result.bytes = total;
  result.region = region;
  const bool use_cache = !cache.dir.empty() && !fingerprint.empty() && total >= cache.min_bytes;
  const std::string path = use_cache ? x16_cache_path(cache, fingerprint, result.layout) : "";
  // With the layout in the cache, the file's pages of these matrices are not needed: dropped
  // before the copy is read in, not after, so that a load that read the whole file in (ponder
  // serve does, for its progress) does not peak at the weights twice over (session 23: the 14B
  // at 15.6 GB for an 8.99 GB file; a 32B would not fit 24 GB). If the read fails, the
  // interleave reads them again.
  // The output matrix may be the embedding too (tied), whose rows are still looked up.
  auto release_file = [&](WeightView* v) {
    if (release_file_pages && !(tied_output && v == &output))
      release_pages(v->data, static_cast<size_t>(v->row_bytes() * v->n_out));
  };
  const bool released_first = use_cache && std::filesystem::exists(path);
  if (released_first) {
    for (WeightView* v : views) release_file(v);
  }
  result.from_cache =
      use_cache && x16_cache_read(path, fingerprint, result.layout, region, total, pool);
  if (!result.from_cache) result.write_path = path;
  // Matrix by matrix, each in parallel, its file pages dropped once copied: the peak resident
  // memory stays near the copies' size instead of twice it.
  for (size_t i = 0; i < views.size(); ++i) {
    WeightView* v = views[i];
    uint8_t* dst = region + offsets[i];
    if (!result.from_cache) {
      pool.parallel_for(v->n_out / kX16Rows, 1, [&](int64_t g_begin, int64_t g_end) {
        x16_interleave(*v, g_begin, g_end, dst);
      });
    }
    v->x16 = dst;
    if (!(released_first && result.from_cache)) release_file(v);
  }
  return result;
}

}  // namespace ponder
