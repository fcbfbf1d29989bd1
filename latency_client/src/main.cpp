// latency_stats entry point: parse flags, check that every output file can be written, run (SIGINT/SIGTERM end
// the run early), print the table, write the JSON/SVG files (CSV and hlog are written live), exit by the verdict.
#include <csignal>
#include <fstream>
#include <iostream>

#include "cli.hpp"
#include "client.hpp"
#include "report.hpp"

namespace {

void on_signal(int) { lat::request_stop(); }

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) {
    std::cerr << "latency_stats: cannot write " << path << "\n";
    return false;
  }
  return true;
}

// Opens each output for appending (creating it, keeping what is there) to refuse a run whose results could not
// be saved before spending its duration.
bool outputs_writable(const lat::Config& cfg) {
  std::vector<std::string> paths = lat::svg_paths(cfg);
  for (const std::string* p : {&cfg.json_path, &cfg.csv_path, &cfg.hlog_path})
    if (!p->empty()) paths.push_back(*p);
  for (const auto& p : paths) {
    std::ofstream f(p, std::ios::app);
    if (!f) {
      std::cerr << "latency_stats: cannot write " << p << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace

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
  if (!outputs_writable(cfg)) return 1;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto rr = lat::run_latency(cfg, &std::cout);
  if (rr.exit_code != 0) {
    std::cerr << "latency_stats: " << rr.error << "\n";
    return rr.exit_code;
  }
  if (cfg.all_coins) cfg.coins = rr.info.coins;
  std::cout << lat::format_table(rr.total, cfg, rr.info);
  std::cout.flush();
  bool ok = true;
  if (!cfg.json_path.empty()) ok &= write_file(cfg.json_path, lat::format_json(rr.total, cfg, rr.info));
  const auto svgs = lat::svg_paths(cfg);
  if (!svgs.empty()) ok &= write_file(svgs[0], lat::format_svg_percentiles(rr.total, cfg));
  if (svgs.size() == 3) {
    ok &= write_file(svgs[1], lat::format_svg_stages(rr.total, cfg));
    ok &= write_file(svgs[2], lat::format_svg_added(rr.total, cfg));
  }
  if (!ok) return 1;
  return lat::verdict(rr.total.health, cfg, rr.total.c.disconnects).exit_code;
}
