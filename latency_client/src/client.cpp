// latency_stats run orchestration: URL handling, the start-up probe (reachability, compression, `all`
// discovery), connection threads, and the run clock (warmup, CSV windows, duration) on the calling thread.
// The Beast connection code lives in transport_plain.cpp / transport_tls.cpp (see session.hpp); this TU only
// needs Asio's io_context, which keeps the heavy templates out of it.
#include "client.hpp"

#include <boost/asio/io_context.hpp>
#include <fstream>
#include <memory>
#include <thread>

#include "clock.hpp"
#include "hlog.hpp"
#include "transport.hpp"

namespace lat {

namespace {
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "request_stop must be async-signal-safe");
}  // namespace

void request_stop() { g_stop.store(true); }

namespace net = boost::asio;
using detail::now_unix_ns;

bool parse_url(const std::string& url, Url& out, std::string& err) {
  std::string rest;
  if (url.rfind("ws://", 0) == 0) {
    out.tls = false;
    rest = url.substr(5);
  } else if (url.rfind("wss://", 0) == 0) {
    out.tls = true;
    rest = url.substr(6);
  } else {
    err = "URL must start with ws:// or wss://: " + url;
    return false;
  }
  auto slash = rest.find_first_of("/?");
  std::string hostport = rest.substr(0, slash);
  out.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (!out.target.empty() && out.target[0] == '?') out.target = "/" + out.target;
  if (hostport.empty()) {
    err = "URL has no host: " + url;
    return false;
  }
  if (hostport[0] == '[') {  // [v6]:port
    auto close = hostport.find(']');
    if (close == std::string::npos) {
      err = "bad IPv6 host in URL: " + url;
      return false;
    }
    out.host = hostport.substr(1, close - 1);
    out.port = close + 1 < hostport.size() && hostport[close + 1] == ':' ? hostport.substr(close + 2) : "";
  } else {
    auto colon = hostport.rfind(':');
    out.host = hostport.substr(0, colon);
    out.port = colon == std::string::npos ? "" : hostport.substr(colon + 1);
  }
  if (out.port.empty()) out.port = out.tls ? "443" : "80";
  if (out.host.empty() || out.port.find_first_not_of("0123456789") != std::string::npos) {
    err = "bad host or port in URL: " + url;
    return false;
  }
  return true;
}

std::string with_audit(const std::string& target) {
  return target + (target.find('?') == std::string::npos ? "?audit=1" : "&audit=1");
}

RunResult run_latency(Config cfg, std::ostream* log) {
  RunResult rr;
  detail::RunCtx ctx;
  ctx.cfg = &cfg;
  std::string err;
  if (!parse_url(cfg.url, ctx.url, err)) {
    rr.exit_code = 1;
    rr.error = err;
    return rr;
  }
  if (ctx.url.tls) {
#ifdef LATENCY_WITH_TLS
    if (!detail::init_tls(ctx, err)) {
      rr.exit_code = 1;
      rr.error = err;
      return rr;
    }
#else
    rr.exit_code = 1;
    rr.error = "wss:// needs a build with OpenSSL (libssl-dev); use ws://";
    return rr;
#endif
  }
  ctx.target = cfg.audit ? with_audit(ctx.url.target) : ctx.url.target;
  rr.info.url = std::string(ctx.url.tls ? "wss://" : "ws://") + ctx.url.host + ":" + ctx.url.port + ctx.target;
  rr.info.compression_requested = cfg.compress;

  {  // start-up probe (and discovery for `all`)
    detail::ProbeResult pr;
#ifdef LATENCY_WITH_TLS
    if (ctx.url.tls) detail::probe_tls(ctx, pr);
    else
#endif
      detail::probe_plain(ctx, pr);
    if (!pr.error.empty()) {
      rr.exit_code = 2;
      rr.error = pr.error;
      return rr;
    }
    rr.info.compression_accepted = pr.accepted;
    rr.info.extensions_response = pr.extensions;
    if (cfg.all_coins) cfg.coins = pr.coins;
  }
  rr.info.clock = check_clock();
  if (log) {
    *log << rr.info.clock.line << "\n";
    if (cfg.compress)
      *log << "compression: offered '" << kDeflateOffer << "', server "
           << (rr.info.compression_accepted ? "accepted ('" + rr.info.extensions_response + "')" : "refused")
           << "\n";
    else
      *log << "compression: not requested\n";
    *log << "subscribing " << cfg.coins.size() << " coins x " << cfg.channels.size() << " channels on "
         << cfg.conns << " connection(s)\n";
    log->flush();
  }
  rr.info.coins = cfg.coins;
  CoinIndex coins;
  for (size_t i = 0; i < cfg.coins.size(); ++i) coins.emplace(cfg.coins[i], static_cast<int>(i));

  const auto start = std::chrono::steady_clock::now();
  rr.info.start_unix_ms = now_unix_ns() / 1000000;
  const int64_t warmup_end_ns = now_unix_ns() + static_cast<int64_t>(cfg.warmup_s * 1e9);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const int nthreads = static_cast<int>(std::min<unsigned>(static_cast<unsigned>(cfg.conns), hw));

  std::vector<std::unique_ptr<Shard>> shards;
  for (int i = 0; i < nthreads; ++i)
    shards.push_back(std::make_unique<Shard>(cfg, coins, warmup_end_ns,
                                             cfg.stop_after_samples ? &ctx.samples : nullptr));
  std::vector<std::unique_ptr<net::io_context>> iocs;  // declared after shards: destroyed first
  for (int i = 0; i < nthreads; ++i) iocs.push_back(std::make_unique<net::io_context>(1));
  for (int i = 0; i < cfg.conns; ++i) {
#ifdef LATENCY_WITH_TLS
    if (ctx.url.tls) {
      detail::spawn_tls(*iocs[i % nthreads], ctx, *shards[i % nthreads]);
      continue;
    }
#endif
    detail::spawn_plain(*iocs[i % nthreads], ctx, *shards[i % nthreads]);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < nthreads; ++i) threads.emplace_back([&ioc = *iocs[i]] { ioc.run(); });

  // The clock: warmup, CSV / hlog windows, duration, a stop request. Runs here, off the connection threads.
  std::ofstream csv;
  if (!cfg.csv_path.empty()) {
    csv.open(cfg.csv_path);
    write_csv_header(csv);
  }
  HlogWriter hlog;
  if (!cfg.hlog_path.empty()) hlog.open(cfg.hlog_path, rr.info.start_unix_ms / 1000.0);
  const bool windows = csv.is_open() || !cfg.hlog_path.empty();
  const double interval_s = cfg.interval_s > 0 ? cfg.interval_s : 5.0;
  auto secs = [](double s) { return std::chrono::microseconds(static_cast<int64_t>(s * 1e6)); };
  const auto warm_end = start + secs(cfg.warmup_s);
  const auto end = warm_end + secs(cfg.duration_s);
  auto take_all = [&] {
    Stats w;
    for (auto& s : shards) w.merge(s->take_window());
    return w;
  };
  auto unix_s = [&](std::chrono::steady_clock::time_point t) {
    return rr.info.start_unix_ms / 1000.0 + std::chrono::duration<double>(t - start).count();
  };
  auto write_window = [&](std::chrono::steady_clock::time_point t0, std::chrono::steady_clock::time_point t1) {
    Stats w = take_all();
    if (csv.is_open()) write_csv_window(csv, unix_s(t0), unix_s(t1), w, cfg);
    if (!cfg.hlog_path.empty()) write_hlog_window(hlog, unix_s(t0), unix_s(t1), w, cfg);
  };
  bool warmed = cfg.warmup_s <= 0;
  auto win_start = warmed ? start : warm_end;
  while (!ctx.done.load()) {
    if (g_stop.load()) {
      rr.interrupted = true;
      break;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    if (!warmed && now >= warm_end) {
      take_all();  // drop the warmup window
      warmed = true;
      win_start = now;
    }
    if (warmed && windows && now - win_start >= secs(interval_s)) {
      write_window(win_start, now);
      win_start = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ctx.stopping = true;
  for (auto& ioc : iocs) ioc->stop();
  for (auto& t : threads) t.join();
  const auto stop = std::chrono::steady_clock::now();
  if (windows && warmed && stop > win_start) write_window(win_start, stop);
  rr.info.interrupted = rr.interrupted;
  const int64_t stop_ns = now_unix_ns();
  for (auto& s : shards) s->finish(stop_ns);
  for (auto& s : shards) rr.total.merge(s->total_copy());
  rr.info.measured_s = std::max(0.0, std::chrono::duration<double>(stop - std::max(start, warm_end)).count());
  iocs.clear();  // frees pending coroutine frames while the shards still exist
  return rr;
}

}  // namespace lat
