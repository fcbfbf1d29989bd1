// Boost.Beast WebSocket client for latency_stats (the only library TU that includes Beast; see client.hpp).
//
// Threads: min(conns, hardware threads) io_contexts, each running its share of connection coroutines and owning
// one Shard. Per connection: connect (TCP_NODELAY), handshake (optional permessage-deflate with our own offer
// string), subscribe every coin x channel, then a read loop whose hot path is: read (Beast inflates), take the
// wall clock, parse 2-3 fields in place (simdjson needs padding: flat_buffer::prepare provides it), record.
// A sibling coroutine sends {"method":"ping"} every 30 s. On any read/write error the connection is counted as
// a disconnect, waits an exponential back-off (100 ms .. 5 s) and reconnects + resubscribes (counted).
#include "client.hpp"

#include <simdjson.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

namespace lat {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using WsStream = websocket::stream<beast::tcp_stream>;
using beast::error_code;

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

namespace {

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

auto ec_token(error_code& ec) { return net::redirect_error(net::use_awaitable, ec); }

std::string subscribe_msg(int ch, const std::string& coin) {
  return std::string(R"({"method":"subscribe","subscription":{"type":")") + channel_name(ch) +
         R"(","coin":")" + coin + "\"}}";
}

void configure(WsStream& s, const Config& cfg) {
  if (cfg.compress) {
    websocket::permessage_deflate pmd;
    pmd.client_enable = true;
    pmd.client_max_window_bits = 15;
    pmd.server_max_window_bits = 15;
    s.set_option(pmd);
  }
  // Beast would offer "permessage-deflate; server_max_window_bits=15; client_max_window_bits=15", which strict
  // servers refuse; the decorator runs after Beast writes its offer, so this replaces it with the plain form.
  bool compress = cfg.compress;
  s.set_option(websocket::stream_base::decorator([compress](websocket::request_type& req) {
    req.set(http::field::user_agent, "latency_stats");
    if (compress) req.set(http::field::sec_websocket_extensions, kDeflateOffer);
  }));
  websocket::stream_base::timeout t{};
  t.handshake_timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.connect_timeout_s * 1000));
  // Nothing received for 2.5 ping periods (the server answers every ping) means the connection is dead.
  t.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.ping_s * 2500));
  t.keep_alive_pings = false;
  s.set_option(t);
  s.read_message_max(64u << 20);
  s.text(true);
}

// Resolve, connect with TCP_NODELAY, WebSocket handshake. Fills res with the upgrade response.
net::awaitable<error_code> connect_ws(WsStream& s, const Url& u, const std::string& target, const Config& cfg,
                                      websocket::response_type& res) {
  error_code ec;
  auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  auto results = co_await resolver.async_resolve(u.host, u.port, ec_token(ec));
  if (ec) co_return ec;
  auto& tcp_layer = beast::get_lowest_layer(s);
  tcp_layer.expires_after(std::chrono::milliseconds(static_cast<int64_t>(cfg.connect_timeout_s * 1000)));
  co_await tcp_layer.async_connect(results, ec_token(ec));
  if (ec) co_return ec;
  tcp_layer.socket().set_option(tcp::no_delay(true), ec);
  tcp_layer.expires_never();  // the websocket stream's own timeouts take over
  configure(s, cfg);
  co_await s.async_handshake(res, u.host + ":" + u.port, target, ec_token(ec));
  co_return ec;
}

bool deflate_accepted(const websocket::response_type& res) {
  auto it = res.find(http::field::sec_websocket_extensions);
  return it != res.end() && it->value().find("permessage-deflate") != beast::string_view::npos;
}

std::string extensions_of(const websocket::response_type& res) {
  auto it = res.find(http::field::sec_websocket_extensions);
  return it == res.end() ? std::string() : std::string(it->value());
}

// Shared between all connection coroutines of a run.
struct RunCtx {
  const Config* cfg = nullptr;
  Url url;
  std::string target;
  std::atomic<bool> stopping{false};
  std::atomic<bool> done{false};  // stop_after_samples reached
  std::atomic<uint64_t> samples{0};
};

struct Conn {
  explicit Conn(net::any_io_executor ex) : ws(ex), ping_timer(ex) {}
  WsStream ws;
  net::steady_timer ping_timer;
  bool alive = true;
};

net::awaitable<void> ping_loop(std::shared_ptr<Conn> c, double period_s) {
  static const std::string ping = R"({"method":"ping"})";
  for (;;) {
    error_code ec;
    c->ping_timer.expires_after(std::chrono::milliseconds(static_cast<int64_t>(period_s * 1000)));
    co_await c->ping_timer.async_wait(ec_token(ec));
    if (ec || !c->alive) co_return;
    co_await c->ws.async_write(net::buffer(ping), ec_token(ec));
    if (ec) co_return;
  }
}

net::awaitable<void> run_connection(RunCtx& ctx, Shard& shard) {
  const Config& cfg = *ctx.cfg;
  auto ex = co_await net::this_coro::executor;
  const int slot = shard.add_connection();
  Extractor extractor;
  Frame frame;
  beast::flat_buffer buf;
  bool first = true;
  auto backoff = std::chrono::milliseconds(100);
  while (!ctx.stopping.load()) {
    auto c = std::make_shared<Conn>(ex);
    websocket::response_type res;
    error_code ec = co_await connect_ws(c->ws, ctx.url, ctx.target, cfg, res);
    if (!ec) {
      // Connected: from here on any error is a disconnect, including one while (re)subscribing.
      if (!first) shard.on_reconnect();
      first = false;
      backoff = std::chrono::milliseconds(100);
      for (int ch : cfg.channels) {
        for (const auto& coin : cfg.coins) {
          co_await c->ws.async_write(net::buffer(subscribe_msg(ch, coin)), ec_token(ec));
          if (ec) break;
        }
        if (ec) break;
      }
      if (!ec) {
        net::co_spawn(ex, ping_loop(c, cfg.ping_s), net::detached);
        const bool count_stop = cfg.stop_after_samples > 0;
        for (;;) {
          buf.clear();
          co_await c->ws.async_read(buf, ec_token(ec));
          if (ec) break;
          const int64_t recv_ns = now_unix_ns();  // after inflate, before parsing
          const size_t len = buf.size();
          if (!c->ws.got_text()) {
            shard.on_bad_frame(len);
            continue;
          }
          buf.prepare(simdjson::SIMDJSON_PADDING);  // keeps the readable bytes, guarantees padding after them
          const char* p = static_cast<const char*>(buf.data().data());
          extractor.parse(p, len, len + simdjson::SIMDJSON_PADDING, frame);
          shard.on_frame(slot, frame, recv_ns, len);
          if (count_stop && ctx.samples.load(std::memory_order_relaxed) >= cfg.stop_after_samples) ctx.done = true;
        }
      }
      c->alive = false;
      c->ping_timer.cancel();
      if (ctx.stopping.load()) break;
      shard.on_disconnect();
      error_code ignore;
      beast::get_lowest_layer(c->ws).socket().close(ignore);
    }
    // A slot whose very first connect fails keeps retrying with back-off too: the start-up probe already
    // proved the server reachable, so this is a transient failure, not a bad URL.
    if (ctx.stopping.load()) break;
    net::steady_timer t(ex);
    t.expires_after(backoff);
    co_await t.async_wait(ec_token(ec));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

// Start-up probe: proves the server reachable, reports compression, and for `all` takes the allMids keys.
struct ProbeResult {
  error_code ec;
  std::string error;
  bool accepted = false;
  std::string extensions;
  std::vector<std::string> coins;
  bool finished = false;
};

net::awaitable<void> probe(const Config& cfg, const Url& url, const std::string& target, ProbeResult& out) {
  auto ex = co_await net::this_coro::executor;
  WsStream ws(ex);
  websocket::response_type res;
  out.ec = co_await connect_ws(ws, url, target, cfg, res);
  if (out.ec) {
    out.error = "cannot reach " + cfg.url + ": " + out.ec.message();
    out.finished = true;
    co_return;
  }
  out.accepted = deflate_accepted(res);
  out.extensions = extensions_of(res);
  if (cfg.all_coins) {
    error_code ec;
    static const std::string sub = R"({"method":"subscribe","subscription":{"type":"allMids"}})";
    co_await ws.async_write(net::buffer(sub), ec_token(ec));
    Extractor extractor;
    Frame f;
    beast::flat_buffer buf;
    while (!ec) {
      buf.clear();
      co_await ws.async_read(buf, ec_token(ec));
      if (ec) break;
      auto b = beast::buffers_to_string(buf.data());
      if (extractor.parse(b, f, true) == Kind::AllMids) {
        out.coins = f.mids;
        break;
      }
    }
    if (ec) out.error = "coin discovery (allMids) failed: " + ec.message();
    else if (out.coins.empty()) out.error = "coin discovery: first allMids frame had no mids";
  }
  error_code ignore;
  co_await ws.async_close(websocket::close_code::normal, ec_token(ignore));
  out.finished = true;
}

}  // namespace

RunResult run_latency(Config cfg, std::ostream* log) {
  RunResult rr;
  RunCtx ctx;
  ctx.cfg = &cfg;
  std::string err;
  if (!parse_url(cfg.url, ctx.url, err)) {
    rr.exit_code = 1;
    rr.error = err;
    return rr;
  }
  if (ctx.url.tls) {
    rr.exit_code = 1;
    rr.error = "wss:// is not supported by this build yet; use ws://";
    return rr;
  }
  ctx.target = cfg.audit ? with_audit(ctx.url.target) : ctx.url.target;
  rr.info.url = "ws://" + ctx.url.host + ":" + ctx.url.port + ctx.target;
  rr.info.compression_requested = cfg.compress;

  {  // start-up probe (and discovery for `all`)
    net::io_context ioc;
    ProbeResult pr;
    net::co_spawn(ioc, probe(cfg, ctx.url, ctx.target, pr), net::detached);
    ioc.run_for(std::chrono::milliseconds(static_cast<int64_t>(cfg.connect_timeout_s * 2000 + 1000)));
    if (!pr.finished && pr.error.empty()) pr.error = "timed out talking to " + cfg.url;
    if (!pr.error.empty()) {
      rr.exit_code = 2;
      rr.error = pr.error;
      return rr;
    }
    rr.info.compression_accepted = pr.accepted;
    rr.info.extensions_response = pr.extensions;
    if (cfg.all_coins) cfg.coins = pr.coins;
  }
  if (log) {
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
  for (int i = 0; i < cfg.conns; ++i)
    net::co_spawn(*iocs[i % nthreads], run_connection(ctx, *shards[i % nthreads]), net::detached);
  std::vector<std::thread> threads;
  for (int i = 0; i < nthreads; ++i) threads.emplace_back([&ioc = *iocs[i]] { ioc.run(); });

  // The clock: warmup, CSV windows, duration. Runs here, off the connection threads.
  std::ofstream csv;
  if (!cfg.csv_path.empty()) {
    csv.open(cfg.csv_path);
    write_csv_header(csv);
  }
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
  bool warmed = cfg.warmup_s <= 0;
  auto win_start = warmed ? start : warm_end;
  while (!ctx.done.load()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    if (!warmed && now >= warm_end) {
      take_all();  // drop the warmup window
      warmed = true;
      win_start = now;
    }
    if (warmed && csv.is_open() && now - win_start >= secs(cfg.interval_s)) {
      Stats w = take_all();
      write_csv_window(csv, unix_s(win_start), unix_s(now), w, cfg);
      win_start = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ctx.stopping = true;
  for (auto& ioc : iocs) ioc->stop();
  for (auto& t : threads) t.join();
  const auto stop = std::chrono::steady_clock::now();
  if (csv.is_open() && warmed && stop > win_start) {
    Stats w = take_all();
    write_csv_window(csv, unix_s(win_start), unix_s(stop), w, cfg);
  }
  for (auto& s : shards) rr.total.merge(s->total_copy());
  rr.info.measured_s = std::max(0.0, std::chrono::duration<double>(stop - std::max(start, warm_end)).count());
  iocs.clear();  // frees pending coroutine frames while the shards still exist
  return rr;
}

}  // namespace lat
