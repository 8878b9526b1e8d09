// GgmlType: the tensor element types a GGUF file may name, with their block geometry.
// The numeric values are the file format's (ggml's) and must never change. Enumerators keep the
// format's own names (Q4_K, not kQ4K) so that code reads like the spec.
// Depends on nothing but the standard library; the quant layer owns what the bytes mean.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ponder {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;    // "Q4_K"
  int64_t block_size;  // elements per block (1 for F32/F16/BF16)
  int64_t type_size;   // bytes per block
};

// The info for a type Ponder can store, or nullptr for an unknown or unsupported raw value.
const GgmlTypeInfo* ggml_type_info(uint32_t raw);
inline const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  return *ggml_type_info(static_cast<uint32_t>(type));
}

// "Q4_K"; for raw values Ponder cannot store, ggml's name if known ("IQ2_XXS") or "type 99".
std::string_view ggml_type_name(GgmlType type);
std::string ggml_type_name_raw(uint32_t raw);

// Parses a type name ("q4_k", "Q4_K", "f16"); nullopt if Ponder does not know it.
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of a row of n elements (n must be a multiple of the block size).
inline int64_t ggml_row_bytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  return n / info.block_size * info.type_size;
}

}  // namespace ponder
