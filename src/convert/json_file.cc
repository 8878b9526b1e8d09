#include "convert/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ponder {

Expected<nlohmann::json> read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf("cannot open {}: {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    return Status::errorf("{}: not valid JSON: {}", path, e.what());
  }
}

Status write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::errorf("cannot create {}: {}", path, std::strerror(errno));
  try {
    out << j.dump(2) << "\n";
  } catch (const nlohmann::json::exception& e) {
    return Status::errorf("cannot write {}: {}", path, e.what());
  }
  out.close();
  if (!out) return Status::errorf("cannot write {}", path);
  return Status::ok();
}

}  // namespace ponder
