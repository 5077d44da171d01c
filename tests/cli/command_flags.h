// A `podscope` subcommand's flags parsed from a command line, and its --help text, as the CLI's main sets them up.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

namespace podscope::cli::testing {

// Parses `args` (after the subcommand's name) into the flags `add_flags` declares; throws CLI11's errors.
template <typename Flags>
Flags parse_flags(const std::string& command, void (*add_flags)(CLI::App&, Flags&), std::vector<std::string> args) {
  CLI::App app{"podscope"};
  Flags flags;
  add_flags(*app.add_subcommand(command), flags);
  args.insert(args.begin(), command);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  app.parse(args);
  return flags;
}

template <typename Flags>
std::string help_of(const std::string& command, void (*add_flags)(CLI::App&, Flags&)) {
  CLI::App app{"podscope"};
  Flags flags;
  CLI::App* subcommand = app.add_subcommand(command);
  add_flags(*subcommand, flags);
  return subcommand->help();
}

}  // namespace podscope::cli::testing
