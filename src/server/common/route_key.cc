#include "server/common/route_key.h"

#include <fmt/core.h>

namespace ponder::server {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string route_key(const GenerationRequest& g) {
  if (!g.conversation_id.empty()) return g.conversation_id;
  if (!g.prompt_cache_key.empty()) return g.prompt_cache_key;
  if (!g.user.empty()) return g.user;
  std::string system, first_user;
  bool have_system = false, have_user = false;
  for (const text::ChatMessage& m : g.messages) {
    if (m.role == "system" && !have_system) {
      system = m.content;
      have_system = true;
    } else if (m.role == "user" && !have_user) {
      first_user = m.content;
      have_user = true;
    }
  }
  const std::string text = g.chat ? system + '\x1f' + first_user : g.prompt.substr(0, 1024);
  return fmt::format("h-{:016x}", fnv1a64(text));
}

}  // namespace ponder::server
