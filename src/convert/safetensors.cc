#include "convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "convert/json_file.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Tensors larger than this (in elements) are surely a corrupt header.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// dtypes the format defines that Ponder does not convert: named in the error instead of "unknown".
const char* const kOtherDtypes[] = {"F64",     "I64", "I32",     "I16",     "I8",      "U64",
                                    "U32",     "U16", "U8",      "BOOL",    "F8_E4M3", "F8_E5M2",
                                    "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

Expected<StDtype> parse_dtype(const std::string& s, const std::string& file,
                              const std::string& tensor) {
  if (s == "F32") return StDtype::kF32;
  if (s == "F16") return StDtype::kF16;
  if (s == "BF16") return StDtype::kBF16;
  for (const char* other : kOtherDtypes) {
    if (s == other) {
      return Status::errorf("{}: tensor {}: dtype {} is not supported (expected F32, F16 or BF16)",
                            file, tensor, s);
    }
  }
  return Status::errorf("{}: tensor {}: unknown dtype \"{}\"", file, tensor, s);
}

// A non-negative integer that fits int64 (JSON numbers may be negative, floats or huge).
bool as_count(const json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

Expected<StTensor> parse_entry(const std::string& file, const std::string& name, const json& e,
                               const uint8_t* data, uint64_t data_size) {
  if (!e.is_object()) {
    return Status::errorf("{}: tensor {}: header entry is a {}, expected an object", file, name,
                          json_kind(e));
  }
  StTensor t;
  t.name = name;
  t.file = file;
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) {
    return Status::errorf("{}: tensor {}: missing or non-string dtype", file, name);
  }
  PONDER_ASSIGN_OR_RETURN(t.dtype, parse_dtype(dt->get<std::string>(), file, name));
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array() || sh->size() > 8) {
    return Status::errorf("{}: tensor {}: shape must be an array of at most 8 sizes", file, name);
  }
  t.n_elements = 1;
  for (const json& d : *sh) {
    int64_t v = 0;
    if (!as_count(d, &v)) {
      return Status::errorf("{}: tensor {}: shape entry {} is not a non-negative integer", file,
                            name, d.dump());
    }
    if (v != 0 && t.n_elements > kMaxElements / v) {
      return Status::errorf("{}: tensor {}: shape {} is too large", file, name, sh->dump());
    }
    t.n_elements *= v;
    t.shape.push_back(v);
  }
  auto off = e.find("data_offsets");
  int64_t begin = 0, end = 0;
  if (off == e.end() || !off->is_array() || off->size() != 2 || !as_count((*off)[0], &begin) ||
      !as_count((*off)[1], &end)) {
    return Status::errorf("{}: tensor {}: data_offsets must be two non-negative integers", file,
                          name);
  }
  if (begin > end) {
    return Status::errorf("{}: tensor {}: data_offsets [{}, {}] end before they begin", file, name,
                          begin, end);
  }
  if (static_cast<uint64_t>(end) > data_size) {
    return Status::errorf(
        "{}: tensor {}: data_offsets [{}, {}] run past the end of the data ({} bytes; the file is "
        "truncated or the header is wrong)",
        file, name, begin, end, data_size);
  }
  t.n_bytes = end - begin;
  const int64_t expected = t.n_elements * st_dtype_size(t.dtype);
  if (t.n_bytes != expected) {
    return Status::errorf("{}: tensor {}: {} of shape {} needs {} bytes, data_offsets give {}",
                          file, name, st_dtype_name(t.dtype), sh->dump(), expected, t.n_bytes);
  }
  t.data = data + begin;
  return t;
}

}  // namespace

const char* st_dtype_name(StDtype dtype) {
  switch (dtype) {
    case StDtype::kF32:
      return "F32";
    case StDtype::kF16:
      return "F16";
    case StDtype::kBF16:
      return "BF16";
  }
  return "?";
}

int64_t st_dtype_size(StDtype dtype) { return dtype == StDtype::kF32 ? 4 : 2; }

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  PONDER_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  PONDER_ASSIGN_OR_RETURN(SafetensorsFile file, parse(map.data(), map.size(), path));
  file.map_ = std::move(map);
  return file;
}

Expected<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                 std::string name) {
  if (size < 8) {
    return Status::errorf("{}: {} bytes, too short for the 8-byte header length", name, size);
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);  // little-endian, as is every machine Ponder runs on
  if (header_len > size - 8) {
    return Status::errorf("{}: header length {} runs past the end of the file ({} bytes)", name,
                          header_len, size);
  }
  json header;
  try {
    header = json::parse(data + 8, data + 8 + header_len);
  } catch (const json::exception& e) {
    return Status::errorf("{}: header is not valid JSON: {}", name, e.what());
  }
  if (!header.is_object()) {
    return Status::errorf("{}: header is a JSON {}, expected an object", name, json_kind(header));
  }
  const uint8_t* body = data + 8 + header_len;
  const uint64_t body_size = size - 8 - header_len;

  SafetensorsFile file;
  file.path_ = name;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    PONDER_ASSIGN_OR_RETURN(StTensor t, parse_entry(name, it.key(), it.value(), body, body_size));
    file.tensors_.push_back(std::move(t));
  }
  // No two tensors may share bytes: a header that aliases data is corrupt (or an attack).
  std::vector<const StTensor*> by_offset;
  for (const StTensor& t : file.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const StTensor* a, const StTensor* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const StTensor* a = by_offset[i - 1];
    const StTensor* b = by_offset[i];
    if (a->data + a->n_bytes > b->data && b->n_bytes > 0 && a->n_bytes > 0) {
      return Status::errorf("{}: tensors {} and {} overlap (bytes [{}, {}) and [{}, {}))", name,
                            a->name, b->name, a->data - body, a->data - body + a->n_bytes,
                            b->data - body, b->data - body + b->n_bytes);
    }
  }
  return file;
}

Status SafetensorsSet::add_file(std::unique_ptr<SafetensorsFile> file) {
  for (const StTensor& t : file->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted) {
      return Status::errorf("tensor {} is in both {} and {}", t.name, it->second->file, t.file);
    }
    order_.push_back(&t);
  }
  files_.push_back(std::move(file));
  return Status::ok();
}

Expected<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  SafetensorsSet set;
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Status::errorf("{} is not a directory", dir);
  const fs::path index_path = root / "model.safetensors.index.json";
  if (fs::exists(index_path, ec)) {
    PONDER_ASSIGN_OR_RETURN(json index, read_json_file(index_path.string()));
    auto wm = index.is_object() ? index.find("weight_map") : index.end();
    if (wm == index.end() || !wm->is_object()) {
      return Status::errorf("{}: no \"weight_map\" object", index_path.string());
    }
    std::set<std::string> shard_names;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) {
        return Status::errorf("{}: tensor {} maps to a {}, expected a file name",
                              index_path.string(), it.key(), json_kind(*it));
      }
      const std::string shard = it->get<std::string>();
      // Shards are plain names beside the index: nothing may point elsewhere on the disk.
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        return Status::errorf("{}: tensor {}: shard name \"{}\" is not a file name in the folder",
                              index_path.string(), it.key(), shard);
      }
      shard_names.insert(shard);
    }
    for (const std::string& shard : shard_names) {
      PONDER_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open((root / shard).string()));
      PONDER_RETURN_IF_ERROR(set.add_file(std::make_unique<SafetensorsFile>(std::move(f))));
    }
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const StTensor* t = set.find(it.key());
      const std::string shard_path = (root / it->get<std::string>()).string();
      if (t == nullptr || t->file != shard_path) {
        return Status::errorf("{}: tensor {} should be in {}, which does not hold it",
                              index_path.string(), it.key(), shard_path);
      }
    }
    return set;
  }
  std::vector<std::string> files;
  if (fs::exists(root / "model.safetensors", ec)) {
    files.push_back((root / "model.safetensors").string());
  } else {
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) {
    return Status::errorf(
        "{}: no model.safetensors, model.safetensors.index.json or *.safetensors file", dir);
  }
  for (const std::string& path : files) {
    PONDER_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
    PONDER_RETURN_IF_ERROR(set.add_file(std::make_unique<SafetensorsFile>(std::move(f))));
  }
  return set;
}

const StTensor* SafetensorsSet::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Status write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const StWriteTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const uint64_t bytes = static_cast<uint64_t>(n * st_dtype_size(t.dtype));
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');

  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return Status::errorf("cannot create {}", tmp);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const StWriteTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    out.write(static_cast<const char*>(t.data), n * st_dtype_size(t.dtype));
  }
  out.close();
  std::error_code ec;
  if (!out) {
    fs::remove(tmp, ec);
    return Status::errorf("cannot write {}", tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::errorf("cannot rename {} to {}: {}", tmp, path, ec.message());
  return Status::ok();
}

}  // namespace ponder
