// The `ponder` command registry. Each command lives in its own cmd_<name>.cc, parses its own
// arguments (CLI11) and registers itself with PONDER_COMMAND; main.cc only dispatches.
// Commands return the process exit code; they print errors as one clear line on stderr.
#pragma once

#include <string>
#include <vector>

namespace ponder::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is "ponder <name>"
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { command_registry().push_back(c); }
};

// Prints "ponder <cmd>: error: <message>" on stderr and returns the exit code 1.
int fail(const char* command, const std::string& message);

}  // namespace ponder::cli

#define PONDER_COMMAND(name, summary, fn) \
  static ::ponder::cli::CommandRegistrar ponder_command_##fn({name, summary, fn})
