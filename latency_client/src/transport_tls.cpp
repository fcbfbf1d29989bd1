// TLS (wss://) instantiation of the connection templates in session.hpp; compiled only when OpenSSL is found.
// The server certificate is verified against the system trust store and the URL host name, unless --insecure.
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>

#include "session.hpp"

namespace lat::detail {

namespace ssl = net::ssl;

namespace {
struct Tls {
  using Ws = websocket::stream<beast::ssl_stream<beast::tcp_stream>>;
  static std::shared_ptr<Conn<Ws>> make_conn(net::any_io_executor ex, RunCtx& ctx) {
    auto& sctx = *static_cast<ssl::context*>(ctx.tls.get());
    return std::make_shared<Conn<Ws>>(ex, sctx);
  }
  static net::awaitable<error_code> secure(Ws& ws, const RunCtx& ctx) {
    error_code ec;
    auto& stream = ws.next_layer();
    if (!SSL_set_tlsext_host_name(stream.native_handle(), ctx.url.host.c_str()))
      co_return error_code(static_cast<int>(::ERR_get_error()), net::error::get_ssl_category());
    if (!ctx.cfg->insecure) stream.set_verify_callback(ssl::host_name_verification(ctx.url.host));
    co_await stream.async_handshake(ssl::stream_base::client, ec_token(ec));
    co_return ec;
  }
};
}  // namespace

bool init_tls(RunCtx& ctx, std::string& err) {
  auto sctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  error_code ec;
  sctx->set_default_verify_paths(ec);
  if (ec) {
    err = "TLS: cannot load the system trust store: " + ec.message();
    return false;
  }
  sctx->set_verify_mode(ctx.cfg->insecure ? ssl::verify_none : ssl::verify_peer);
  ctx.tls = sctx;
  return true;
}

void probe_tls(RunCtx& ctx, ProbeResult& out) { run_probe<Tls>(ctx, out); }

void spawn_tls(net::io_context& ioc, RunCtx& ctx, Shard& shard) {
  net::co_spawn(ioc, run_connection<Tls>(ctx, shard), net::detached);
}

}  // namespace lat::detail
