// Report writers: fixed-width table, JSON document, CSV window rows and the SVG latency CDF.
// All latency values are printed in milliseconds with 3 decimals; histograms hold microseconds.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "clock.hpp"
#include "config.hpp"
#include "stats.hpp"

namespace lat {

inline constexpr const char* kPercentileRule =
    "nearest-rank: pN is the smallest recorded value v such that at least N% of samples are <= v, "
    "reported at histogram resolution (log-linear buckets, <0.1% relative error)";

inline constexpr double kPercentiles[] = {25, 50, 75, 90, 99, 99.9};

struct RunInfo {
  std::string url;                     // URL actually connected to (with ?audit=1 when --audit)
  std::vector<std::string> coins;      // resolved coin list (index = coin index)
  bool compression_requested = false;
  bool compression_accepted = false;
  std::string extensions_response;     // server's Sec-WebSocket-Extensions
  double measured_s = 0;               // wall time after warmup
  int64_t start_unix_ms = 0;
  ClockState clock;                    // kernel sync state at start
  bool interrupted = false;            // stopped by SIGINT/SIGTERM before the duration ended
};

std::string format_table(const Stats& s, const Config& cfg, const RunInfo& info);
std::string format_json(const Stats& s, const Config& cfg, const RunInfo& info);
void write_csv_header(std::ostream& os);
// One row per channel (that had samples in the window or is requested) for the window [t0, t1] (Unix seconds).
void write_csv_window(std::ostream& os, double t0, double t1, const Stats& s, const Config& cfg);
// SVG charts (charts.cpp): (a) percentile plot on the HDR log axis, per channel, receive - exchange time;
// (b) stacked median / p99 bars per audit stage, per channel; (c) added latency (node write -> client) CDF,
// 0-10 ms. (b) and (c) need --audit. svg_paths: the files written for cfg.svg_path.
std::string format_svg_percentiles(const Stats& s, const Config& cfg);
std::string format_svg_stages(const Stats& s, const Config& cfg);
std::string format_svg_added(const Stats& s, const Config& cfg);
std::vector<std::string> svg_paths(const Config& cfg);

// Formats microseconds as milliseconds with 3 decimals.
std::string ms3(uint64_t us);

}  // namespace lat
