// Run configuration shared by the CLI parser, the WebSocket client and the report writers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lat {

struct Config {
  std::string url;                  // ws://HOST:PORT/PATH[?QUERY]
  std::vector<std::string> coins;   // empty with all_coins until discovery fills it
  bool all_coins = false;
  std::vector<int> channels;        // Channel values (kL2Book, kTrades, kBbo)
  int conns = 1;
  double duration_s = 10;
  double warmup_s = 0;
  bool per_coin = false;
  std::string json_path, csv_path, svg_path;
  double interval_s = 0;            // CSV window length; 0 = no windows
  bool compress = false;
  bool audit = false;
  bool resume = false;              // resubscribe ordered channels with `since` after a reconnect (needs audit)
  bool insecure = false;            // wss://: skip certificate verification
  double gap_s = 2.0;               // expected block interval; larger exchange-time jumps count as gaps
  double max_silence_s = 5.0;       // a channel with no data frame for longer is "silent" (verdict)
  double idle_s = 60.0;             // no data frame (pongs and acks do not count) this long: reconnect
  bool allow_loss = false;          // exit 0 even when the verdict is silent / lost
  std::string hlog_path;            // HdrHistogram interval log (windows of interval_s, default 5 s)
  double ping_s = 30.0;             // application ping period
  double connect_timeout_s = 5.0;
  double stall_at_s = -1, stall_s = 0;  // --stall: stop reading once, for stall_s, stall_at_s after subscribing
  bool quiet = false;               // no progress lines on stderr (tests)
  // Library-only (tests): stop as soon as this many latency samples were recorded (0 = run for duration).
  uint64_t stop_after_samples = 0;
  // Library-only (tests): keep each audited frame's stage values (see Stats::trace).
  bool keep_trace = false;
};

}  // namespace lat
