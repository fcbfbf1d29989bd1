// Internal: the per-connection WebSocket logic as templates over the transport (plain TCP or TLS), included only
// by transport_plain.cpp and transport_tls.cpp, so Beast's templates are compiled in those two TUs alone.
//
// Per connection: connect (TCP_NODELAY), [TLS handshake], WebSocket handshake (optional permessage-deflate with
// our own offer string), subscribe every coin x channel, then the read loop whose hot path is: read (Beast
// inflates), take the wall clock, parse 2-3 fields in place (simdjson needs padding: flat_buffer::prepare
// provides it), record into the thread's Shard. A sibling coroutine sends {"method":"ping"} every ping period.
// A watchdog closes a connection without data frames for --idle S. Any read/write error counts one disconnect, waits an exponential back-off (100 ms .. 5 s) and reconnects +
// resubscribes (counted), with --resume asking ordered channels for what it missed (resume.hpp).
#pragma once
#include <simdjson.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <algorithm>
#include <chrono>
#include <memory>

#include "transport.hpp"

namespace lat::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using beast::error_code;

inline auto ec_token(error_code& ec) { return net::redirect_error(net::use_awaitable, ec); }

// `since` > 0: resume from after that height (resume.hpp).
inline std::string subscribe_msg(int ch, const std::string& coin, int64_t since = 0) {
  return std::string(R"({"method":"subscribe","subscription":{"type":")") + channel_name(ch) + R"(","coin":")" +
         coin + (since > 0 ? "\",\"since\":" + std::to_string(since) + "}}" : "\"}}");
}

template <class Ws>
void configure(Ws& s, const Config& cfg) {
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
  // No Beast idle timeout: any frame resets it, including the pongs to our own pings, so a server that is up but
  // sends no data would never trip it. watchdog() below counts data frames only.
  t.idle_timeout = websocket::stream_base::none();
  t.keep_alive_pings = false;
  s.set_option(t);
  s.read_message_max(64u << 20);
  s.text(true);
}

// Transport policy: T::Ws is the websocket stream type, T::make builds one, T::secure runs the TLS handshake
// (no-op for plain TCP). Resolve, connect with TCP_NODELAY, [TLS], WebSocket handshake; fills res.
template <class T>
net::awaitable<error_code> connect_ws(typename T::Ws& s, const RunCtx& ctx, websocket::response_type& res) {
  const Config& cfg = *ctx.cfg;
  error_code ec;
  auto ex = co_await net::this_coro::executor;
  tcp::resolver resolver(ex);
  auto results = co_await resolver.async_resolve(ctx.url.host, ctx.url.port, ec_token(ec));
  if (ec) co_return ec;
  auto& tcp_layer = beast::get_lowest_layer(s);
  tcp_layer.expires_after(std::chrono::milliseconds(static_cast<int64_t>(cfg.connect_timeout_s * 1000)));
  co_await tcp_layer.async_connect(results, ec_token(ec));
  if (ec) co_return ec;
  tcp_layer.socket().set_option(tcp::no_delay(true), ec);
  ec = co_await T::secure(s, ctx);
  if (ec) co_return ec;
  tcp_layer.expires_never();  // the websocket stream's own timeouts take over
  configure(s, cfg);
  co_await s.async_handshake(res, ctx.url.host + ":" + ctx.url.port, ctx.target, ec_token(ec));
  co_return ec;
}

inline std::string extensions_of(const websocket::response_type& res) {
  auto it = res.find(http::field::sec_websocket_extensions);
  return it == res.end() ? std::string() : std::string(it->value());
}

template <class Ws>
struct Conn {
  template <class... A>
  explicit Conn(net::any_io_executor ex, A&... a) : ws(ex, a...), ping_timer(ex), watch_timer(ex) {}
  Ws ws;
  net::steady_timer ping_timer;
  net::steady_timer watch_timer;
  bool alive = true;
  bool idle_closed = false;
  int64_t last_data_ns = 0;  // receive time of the last data frame (or of the subscription)
};

template <class Ws>
net::awaitable<void> ping_loop(std::shared_ptr<Conn<Ws>> c, double period_s) {
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

// Closes the connection when no data frame arrived for cfg.idle_s (pongs and acks do not count); the read loop
// then sees the error and reconnects, which counts a disconnect and an idle timeout.
template <class Ws>
net::awaitable<void> watchdog(std::shared_ptr<Conn<Ws>> c, double idle_s) {
  const auto idle_ns = static_cast<int64_t>(idle_s * 1e9);
  const auto tick = std::chrono::milliseconds(std::clamp<int64_t>(static_cast<int64_t>(idle_s * 250), 10, 1000));
  for (;;) {
    error_code ec;
    c->watch_timer.expires_after(tick);
    co_await c->watch_timer.async_wait(ec_token(ec));
    if (ec || !c->alive) co_return;
    if (now_unix_ns() - c->last_data_ns > idle_ns) {
      c->idle_closed = true;
      error_code ignore;
      beast::get_lowest_layer(c->ws).socket().shutdown(tcp::socket::shutdown_both, ignore);
      beast::get_lowest_layer(c->ws).socket().close(ignore);
      co_return;
    }
  }
}

inline bool is_data(Kind k) { return k == Kind::L2Book || k == Kind::Trades || k == Kind::Bbo; }

template <class T>
net::awaitable<void> run_connection(RunCtx& ctx, Shard& shard) {
  using Ws = typename T::Ws;
  const Config& cfg = *ctx.cfg;
  auto ex = co_await net::this_coro::executor;
  const int slot = shard.add_connection(now_unix_ns());
  Extractor extractor;
  Frame frame;
  beast::flat_buffer buf;
  bool first = true;
  bool stalled = false;  // --stall happens once per connection slot
  auto backoff = std::chrono::milliseconds(100);
  while (!ctx.stopping.load()) {
    auto c = T::make_conn(ex, ctx);
    websocket::response_type res;
    error_code ec = co_await connect_ws<T>(c->ws, ctx, res);
    if (!ec) {
      // Connected: from here on any error is a disconnect, including one while (re)subscribing.
      if (!first) shard.on_reconnect();
      first = false;
      backoff = std::chrono::milliseconds(100);
      const std::vector<int64_t> since = shard.begin_session(slot);
      const size_t ncoins = since.size() / kNumChannels;  // the shard's coin index (a repeated coin counts once)
      for (int ch : cfg.channels) {
        for (size_t i = 0; i < cfg.coins.size(); ++i) {
          const int64_t from = i < ncoins ? since[static_cast<size_t>(ch) * ncoins + i] : 0;
          co_await c->ws.async_write(net::buffer(subscribe_msg(ch, cfg.coins[i], from)), ec_token(ec));
          if (ec) break;
        }
        if (ec) break;
      }
      if (!ec) {
        shard.on_subscribed(slot, now_unix_ns());
        c->last_data_ns = now_unix_ns();
        net::co_spawn(ex, ping_loop<Ws>(c, cfg.ping_s), net::detached);
        net::co_spawn(ex, watchdog<Ws>(c, cfg.idle_s), net::detached);
        const bool count_stop = cfg.stop_after_samples > 0;
        // --stall: once per run, stop reading (the server's writes back up in the socket buffers).
        int64_t stall_at = cfg.stall_at_s >= 0 && !stalled
                               ? now_unix_ns() + static_cast<int64_t>(cfg.stall_at_s * 1e9)
                               : INT64_MAX;
        for (;;) {
          if (now_unix_ns() >= stall_at) {
            stall_at = INT64_MAX;
            stalled = true;
            net::steady_timer t(ex, std::chrono::microseconds(static_cast<int64_t>(cfg.stall_s * 1e6)));
            co_await t.async_wait(ec_token(ec));
            c->last_data_ns = now_unix_ns();  // the watchdog must not take our own pause for a dead server
          }
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
          if (is_data(frame.kind)) c->last_data_ns = recv_ns;
          if (count_stop && ctx.samples.load(std::memory_order_relaxed) >= cfg.stop_after_samples) ctx.done = true;
        }
      }
      c->alive = false;
      c->ping_timer.cancel();
      c->watch_timer.cancel();
      if (ctx.stopping.load()) break;
      shard.on_disconnect(slot, now_unix_ns(), c->idle_closed);
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
template <class T>
net::awaitable<void> probe(RunCtx& ctx, ProbeResult& out) {
  const Config& cfg = *ctx.cfg;
  auto ex = co_await net::this_coro::executor;
  auto c = T::make_conn(ex, ctx);
  websocket::response_type res;
  error_code ec = co_await connect_ws<T>(c->ws, ctx, res);
  if (ec) {
    out.error = "cannot reach " + cfg.url + ": " + ec.message();
    out.finished = true;
    co_return;
  }
  out.extensions = extensions_of(res);
  out.accepted = out.extensions.find("permessage-deflate") != std::string::npos;
  if (cfg.all_coins) {
    static const std::string sub = R"({"method":"subscribe","subscription":{"type":"allMids"}})";
    co_await c->ws.async_write(net::buffer(sub), ec_token(ec));
    Extractor extractor;
    Frame f;
    beast::flat_buffer buf;
    while (!ec) {
      buf.clear();
      co_await c->ws.async_read(buf, ec_token(ec));
      if (ec) break;
      if (extractor.parse(beast::buffers_to_string(buf.data()), f, true) == Kind::AllMids) {
        out.coins = f.mids;
        break;
      }
    }
    if (ec) out.error = "coin discovery (allMids) failed: " + ec.message();
    else if (out.coins.empty()) out.error = "coin discovery: first allMids frame had no mids";
  }
  error_code ignore;
  co_await c->ws.async_close(websocket::close_code::normal, ec_token(ignore));
  out.finished = true;
}

// Runs the probe on its own io_context, bounded in time.
template <class T>
void run_probe(RunCtx& ctx, ProbeResult& out) {
  net::io_context ioc;
  net::co_spawn(ioc, probe<T>(ctx, out), net::detached);
  ioc.run_for(std::chrono::milliseconds(static_cast<int64_t>(ctx.cfg->connect_timeout_s * 2000 + 1000)));
  if (!out.finished && out.error.empty()) out.error = "timed out talking to " + ctx.cfg->url;
}

}  // namespace lat::detail
