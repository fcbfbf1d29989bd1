// Command-line parsing and --help text for latency_stats. Pure (no I/O), so tests can drive it.
#pragma once
#include <string>
#include <vector>

#include "config.hpp"

namespace lat {

enum class CliAction { Run, Help, Error };

struct CliResult {
  CliAction action = CliAction::Error;
  std::string error;  // one line, set with CliAction::Error
};

CliResult parse_cli(const std::vector<std::string>& args, Config& cfg);  // args exclude argv[0]
std::string help_text();

}  // namespace lat
