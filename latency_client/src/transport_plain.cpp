// Plain-TCP (ws://) instantiation of the connection templates in session.hpp.
#include "session.hpp"

namespace lat::detail {

namespace {
struct Plain {
  using Ws = websocket::stream<beast::tcp_stream>;
  static std::shared_ptr<Conn<Ws>> make_conn(net::any_io_executor ex, RunCtx&) {
    return std::make_shared<Conn<Ws>>(ex);
  }
  static net::awaitable<error_code> secure(Ws&, const RunCtx&) { co_return error_code{}; }
};
}  // namespace

void probe_plain(RunCtx& ctx, ProbeResult& out) { run_probe<Plain>(ctx, out); }

void spawn_plain(net::io_context& ioc, RunCtx& ctx, Shard& shard) {
  net::co_spawn(ioc, run_connection<Plain>(ctx, shard), net::detached);
}

}  // namespace lat::detail
