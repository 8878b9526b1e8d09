// A model file's identity for caches (the server's response cache, the x16 layout cache): equal
// for every copy of the same file on any replica, and free at start. A hash of everything before
// the tensor data (header, metadata, tensor table), the file size, and 16 sampled 4 KiB blocks
// of the tensor data: never a hash of gigabytes, nor a path, an inode or a time.
// Depends on gguf/gguf_file.h.
#pragma once

#include <string>

#include "gguf/gguf_file.h"

namespace ponder {

std::string model_fingerprint(const GgufFile& file);  // 32 hex digits

}  // namespace ponder
