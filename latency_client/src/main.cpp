// latency_stats entry point: parse flags, run, print the table, write the JSON/SVG files (CSV is written live).
#include <fstream>
#include <iostream>

#include "cli.hpp"
#include "client.hpp"
#include "report.hpp"

int main(int argc, char** argv) {
  lat::Config cfg;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto cli = lat::parse_cli(args, cfg);
  if (cli.action == lat::CliAction::Help) {
    std::cout << lat::help_text();
    return 0;
  }
  if (cli.action == lat::CliAction::Error) {
    std::cerr << "latency_stats: " << cli.error << "\n";
    return 1;
  }
  auto rr = lat::run_latency(cfg, &std::cout);
  if (rr.exit_code != 0) {
    std::cerr << "latency_stats: " << rr.error << "\n";
    return rr.exit_code;
  }
  if (cfg.all_coins) cfg.coins = rr.info.coins;
  std::cout << lat::format_table(rr.total, cfg, rr.info);
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    if (!f) {
      std::cerr << "latency_stats: cannot write " << path << "\n";
      return false;
    }
    return true;
  };
  bool ok = true;
  if (!cfg.json_path.empty()) ok &= write(cfg.json_path, lat::format_json(rr.total, cfg, rr.info));
  if (!cfg.svg_path.empty()) ok &= write(cfg.svg_path, lat::format_svg(rr.total, cfg));
  return ok ? 0 : 1;
}
