// ponder: one binary, one subcommand per job (see `ponder --help`).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/command.h"

namespace ponder::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "ponder %s: error: %s\n", command, message.c_str());
  return 1;
}

namespace {

void print_usage() {
  auto commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  std::printf("ponder: a local reasoning engine for DeepSeek-R1-Distill-Qwen (GGUF, CPU)\n\n");
  std::printf("usage: ponder <command> [options]    (ponder <command> --help for its options)\n\n");
  for (const Command& c : commands) std::printf("  %-10s %s\n", c.name, c.summary);
}

}  // namespace
}  // namespace ponder::cli

int main(int argc, char** argv) {
  using namespace ponder::cli;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : command_registry()) {
    if (std::strcmp(c.name, argv[1]) == 0) {
      std::string name = std::string("ponder ") + c.name;
      argv[1] = name.data();
      return c.run(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "ponder: unknown command '%s' (see ponder --help)\n", argv[1]);
  return 2;
}
