#include "gguf/ggml_type.h"

#include <cctype>
#include <string>

namespace ponder {
namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},       {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},   {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},   {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},   {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},  {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144}, {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210}, {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::BF16, "BF16", 1, 2},
};

// ggml types Ponder does not store, named so that errors can say what the file holds.
struct OtherName {
  uint32_t raw;
  const char* name;
};
constexpr OtherName kOtherNames[] = {
    {4, "Q4_2 (removed)"}, {5, "Q4_3 (removed)"}, {16, "IQ2_XXS"}, {17, "IQ2_XS"},
    {18, "IQ3_XXS"},       {19, "IQ1_S"},         {20, "IQ4_NL"},  {21, "IQ3_S"},
    {22, "IQ2_S"},         {23, "IQ4_XS"},        {24, "I8"},      {25, "I16"},
    {26, "I32"},           {27, "I64"},           {28, "F64"},     {29, "IQ1_M"},
    {34, "TQ1_0"},         {35, "TQ2_0"},         {39, "MXFP4"},
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t raw) {
  for (const auto& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  }
  return nullptr;
}

std::string_view ggml_type_name(GgmlType type) { return ggml_type_info(type).name; }

std::string ggml_type_name_raw(uint32_t raw) {
  if (const GgmlTypeInfo* info = ggml_type_info(raw)) return info->name;
  for (const auto& o : kOtherNames) {
    if (o.raw == raw) return o.name;
  }
  return "type " + std::to_string(raw);
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& t : kTypes) {
    if (upper == t.name) return t.type;
  }
  return std::nullopt;
}

}  // namespace ponder
