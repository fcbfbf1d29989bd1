// Internal interface between the run clock (client.cpp, no Beast) and the transport TUs that compile the
// Beast connection code (transport_plain.cpp always; transport_tls.cpp when built with OpenSSL).
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client.hpp"

namespace boost::asio { class io_context; }

namespace lat::detail {

inline int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Shared between all connection coroutines of a run.
struct RunCtx {
  const Config* cfg = nullptr;
  Url url;
  std::string target;                 // path + query actually requested (audit=1 appended with --audit)
  std::shared_ptr<void> tls;          // ssl::context when url.tls
  std::atomic<bool> stopping{false};
  std::atomic<bool> done{false};      // stop_after_samples reached
  std::atomic<uint64_t> samples{0};
};

struct ProbeResult {
  std::string error;  // empty = ok
  bool accepted = false;
  std::string extensions;
  std::vector<std::string> coins;
  bool finished = false;
};

void probe_plain(RunCtx& ctx, ProbeResult& out);
void spawn_plain(boost::asio::io_context& ioc, RunCtx& ctx, Shard& shard);
#ifdef LATENCY_WITH_TLS
// Creates ctx.tls; returns false with err set when the TLS context cannot be set up.
bool init_tls(RunCtx& ctx, std::string& err);
void probe_tls(RunCtx& ctx, ProbeResult& out);
void spawn_tls(boost::asio::io_context& ioc, RunCtx& ctx, Shard& shard);
#endif

}  // namespace lat::detail
