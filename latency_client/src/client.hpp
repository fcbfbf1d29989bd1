// The WebSocket client: URL handling, coin discovery (`all`), the start-up reachability probe, and the sharded
// connection threads that feed Shards; the main thread runs the clock (warmup, duration, CSV windows).
// Boost.Beast is confined to transport_plain.cpp / transport_tls.cpp (session.hpp); callers see none of it.
#pragma once
#include <ostream>
#include <string>

#include "config.hpp"
#include "report.hpp"
#include "stats.hpp"

namespace lat {

struct Url {
  bool tls = false;
  std::string host, port, target;  // target = path + query
};
// Parses ws://host[:port][/path][?query]; returns false with a message on error.
bool parse_url(const std::string& url, Url& out, std::string& err);
// Appends audit=1 to the query of a target ("/ws" -> "/ws?audit=1", "/ws?a=b" -> "/ws?a=b&audit=1").
std::string with_audit(const std::string& target);

// The exact Sec-WebSocket-Extensions offer sent with --compress.
inline constexpr const char* kDeflateOffer = "permessage-deflate; client_max_window_bits";

struct RunResult {
  int exit_code = 0;    // 0 ok, 1 bad URL / output file, 2 server unreachable at start
  std::string error;    // one line when exit_code != 0
  Stats total;
  RunInfo info;
  bool interrupted = false;  // ended early by request_stop() (SIGINT/SIGTERM)
};

// Ends a running run_latency early (its reports are still produced). Async-signal-safe: only stores an atomic.
void request_stop();

// Runs a whole measurement: discovery/probe, connections, warmup, duration, CSV windows and HdrHistogram log
// intervals (written live to cfg.csv_path / cfg.hlog_path). Progress and the compression line go to `log` (may be null). Table/JSON/SVG are left to the
// caller (see report.hpp).
RunResult run_latency(Config cfg, std::ostream* log);

}  // namespace lat
