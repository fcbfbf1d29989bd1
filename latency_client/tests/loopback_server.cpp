// Beast implementation of the test loopback server; see loopback_server.hpp. One thread per accepted connection
// (the client's start-up probe, its data connections, reconnects); data frames come from one shared budget.
// (the client's start-up probe, then its data connection, then any reconnect), which is all the tests need.
#include "loopback_server.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdlib>
#ifdef LATENCY_WITH_TLS
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/websocket/ssl.hpp>
namespace ssl = boost::asio::ssl;
#endif

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

struct LoopbackServer::Impl {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
#ifdef LATENCY_WITH_TLS
  ssl::context tls{ssl::context::tls_server};
  // A throw-away self-signed certificate for 127.0.0.1, made in memory (no files, no openssl CLI).
  void make_self_signed() {
    EVP_PKEY* key = EVP_EC_gen("prime256v1");
    X509* cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, cert, cert, nullptr, nullptr, 0);
    if (X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, "IP:127.0.0.1")) {
      X509_add_ext(cert, ext, -1);
      X509_EXTENSION_free(ext);
    }
    X509_sign(cert, key, EVP_sha256());
    SSL_CTX_use_certificate(tls.native_handle(), cert);
    SSL_CTX_use_PrivateKey(tls.native_handle(), key);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
#endif
};

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

LoopbackServer::LoopbackServer(ServerOptions opt) : impl_(std::make_unique<Impl>()), opt_(std::move(opt)) {
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(net::socket_base::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
#ifdef LATENCY_WITH_TLS
  if (opt_.tls) impl_->make_self_signed();
#endif
  port_ = impl_->acceptor.local_endpoint().port();
  thread_ = std::thread([this] { serve(); });
}

LoopbackServer::~LoopbackServer() {
  {
    std::lock_guard lk(m_);
    stop_ = true;
    cv_.notify_all();
  }
  beast::error_code ec;
  tcp::socket wake(impl_->ioc);  // unblock accept()
  wake.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
  thread_.join();
  for (auto& t : handlers_) t.join();
}

std::vector<int> LoopbackServer::delays(const std::string& channel) {
  std::lock_guard lk(m_);
  std::vector<int> out;
  for (auto& [c, d] : delays_)
    if (c == channel) out.push_back(d);
  return out;
}
std::string LoopbackServer::last_extensions() {
  std::lock_guard lk(m_);
  return last_ext_;
}
std::string LoopbackServer::last_target() {
  std::lock_guard lk(m_);
  return last_target_;
}
int LoopbackServer::data_connections() {
  std::lock_guard lk(m_);
  return data_conns_;
}

int64_t LoopbackServer::dropped_height() {
  std::lock_guard lk(m_);
  return dropped_height_;
}
std::pair<int64_t, int64_t> LoopbackServer::lost_range() {
  std::lock_guard lk(m_);
  return lost_range_;
}
std::vector<std::string> LoopbackServer::subscribes() {
  std::lock_guard lk(m_);
  return subscribes_;
}

namespace {

// The value of "key":"..." in a subscribe message ("" when absent).
std::string field_of(const std::string& msg, const std::string& key) {
  const std::string k = "\"" + key + "\":\"";
  auto p = msg.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  return msg.substr(p, msg.find('"', p) - p);
}

// The value of "key":<integer> (0 when absent).
int64_t int_field_of(const std::string& msg, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  auto p = msg.find(k);
  return p == std::string::npos ? 0 : std::strtoll(msg.c_str() + p + k.size(), nullptr, 10);
}

// A data frame's channel and data for `coin` stamped `t` ms, without the closing brace (audit may follow).
std::string data_frame(const std::string& ch, const std::string& coin, int64_t t, int samples, int tid) {
  std::string frame;
  if (ch == "trades") {
    frame = R"({"channel":"trades","data":[)";
    for (int k = 0; k < samples; ++k)
      frame += (k ? "," : "") + std::string(R"({"coin":")") + coin + R"(","side":"A","px":"84143.0","sz":"0.1","time":)" +
               std::to_string(t) + R"(,"hash":"0xab","tid":)" + std::to_string(tid * 10 + k) + R"(,"users":["0xa","0xb"]})";
    return frame + "]";
  }
  if (ch == "bbo")
    return R"({"channel":"bbo","data":{"coin":")" + coin + R"(","time":)" + std::to_string(t) +
           R"(,"bbo":[{"px":"1.0","sz":"2.0","n":1},null]})";
  return R"({"channel":"l2Book","data":{"coin":")" + coin + R"(","time":)" + std::to_string(t) +
         R"(,"levels":[[{"px":"84143.0","sz":"10.25923","n":36}],[{"px":"84144.0","sz":"1.5","n":2}]]})";
}

}  // namespace

void LoopbackServer::serve() {
  while (!stop_) {
    auto sock = std::make_unique<tcp::socket>(impl_->ioc);
    beast::error_code ec;
    impl_->acceptor.accept(*sock, ec);
    if (ec || stop_) return;
    handlers_.emplace_back([this, s = sock.release()] { handle(s); });
  }
}

void LoopbackServer::handle(void* raw) {
  std::unique_ptr<tcp::socket> owned(static_cast<tcp::socket*>(raw));
  try {
    beast::flat_buffer buf;
    http::request<http::string_body> req;
#ifdef LATENCY_WITH_TLS
    if (opt_.tls) {
      websocket::stream<ssl::stream<tcp::socket>> ws(std::move(*owned), impl_->tls);
      ws.next_layer().handshake(ssl::stream_base::server);
      http::read(ws.next_layer(), buf, req);
      session(ws, req);
      return;
    }
#endif
    http::read(*owned, buf, req);
    websocket::stream<tcp::socket> ws(std::move(*owned));
    session(ws, req);
  } catch (const std::exception&) {
    // client went away (or the TLS handshake failed); other connections carry on
  }
}

template <class Ws, class Req>
void LoopbackServer::session(Ws& ws, const Req& req) {
  if (opt_.deflate) {
    websocket::permessage_deflate pmd;
    pmd.server_enable = true;
    ws.set_option(pmd);
  }
  ws.accept(req);
  ws.text(true);
  int subs = 0;
  bool data_conn = false;
  std::vector<std::pair<std::string, std::string>> sub_keys;  // (channel, coin) in subscription order: sub = index + 1
  std::vector<int64_t> since;                                 // per sub: its "since" (0: none)
  while (subs < opt_.expected_subs) {
    beast::flat_buffer in;
    ws.read(in);  // throws when the probe connection closes
    std::string msg = beast::buffers_to_string(in.data());
    if (msg.find("\"allMids\"") != std::string::npos) {
      std::string mids = R"({"channel":"allMids","data":{"mids":{)";
      for (size_t i = 0; i < opt_.coins.size(); ++i)
        mids += (i ? ",\"" : "\"") + opt_.coins[i] + "\":\"1.5\"";
      ws.write(net::buffer(std::string(R"({"channel":"subscriptionResponse","data":{}})")));
      ws.write(net::buffer(mids + "}}}"));
      continue;
    }
    if (msg.find("\"subscribe\"") == std::string::npos) continue;  // pings
    ++subs;
    data_conn = true;
    sub_keys.emplace_back(field_of(msg, "type"), field_of(msg, "coin"));
    since.push_back(int_field_of(msg, "since"));
    {
      std::lock_guard lk(m_);
      subscribes_.push_back(msg);
    }
    if (subs <= opt_.unacked) continue;
    ws.write(net::buffer(R"({"channel":"subscriptionResponse","data":{"method":"subscribe","subscription":)" +
                         msg.substr(msg.find("\"subscription\":") + 15)));
  }
  if (!data_conn) return;
  int conn_index;
  {
    std::lock_guard lk(m_);
    conn_index = data_conns_;
    ++data_conns_;
    auto it = req.find(http::field::sec_websocket_extensions);
    last_ext_ = it == req.end() ? "" : std::string(it->value());
    last_target_ = std::string(req.target());
    cv_.notify_all();
  }
  {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return data_conns_ >= opt_.wait_conns || stop_; });
  }
  ws.write(net::buffer(std::string(R"({"channel":"pong"})")));
  if (!opt_.error_after_acks.empty()) {
    std::string esc;
    for (char ch : opt_.error_after_acks) esc += ch == '"' ? std::string("\\\"") : std::string(1, ch);
    ws.write(net::buffer(R"({"channel":"error","data":")" + esc + "\"}"));
  }
  if (opt_.noise) {  // an error frame, a text frame that is not JSON, and a binary frame
    ws.write(net::buffer(std::string(R"({"channel":"error","data":"Already subscribed: {\"type\":\"l2Book\"}"})")));
    ws.write(net::buffer(std::string("{\"channel\":\"l2Book\",\"data\":{\"coin\":\"BTC\",\"ti")));
    ws.binary(true);
    ws.write(net::buffer(std::string("\x01\x02garbage", 9)));
    ws.text(true);
  }
  // Per subscription: frames counted in its chain and the last one's height (a resumed one's starts at since).
  std::vector<std::pair<int64_t, int64_t>> chains(sub_keys.size(), {0, 0});
  std::vector<bool> resumed(sub_keys.size(), false);
  auto audit_of = [&](size_t sub, int64_t height, std::array<int64_t, 6> st, int i, bool replayed = false) {
    static const char* names[] = {"block_ns", "node_ns", "read_ns", "applied_ns", "published_ns", "sent_ns"};
    std::string a = std::string(replayed ? R"(,"replayed":true)" : "") + R"(,"audit":{"height":)" + std::to_string(height);
    for (int k = 0; k < 6; ++k)
      if (st[k] >= 0) a += ",\"" + std::string(names[k]) + "\":" + std::to_string(st[k]);
    if (opt_.chain && sub < chains.size()) {
      auto& [n, prev] = chains[sub];
      a += ",\"sub\":" + std::to_string(sub + 1) + ",\"n\":" + std::to_string(++n);
      // As hlbook: trades' first frame is no snapshot (audit connections get no recent trades), and has no prev.
      if (n == 1 && !resumed[sub]) a += sub_keys[sub].first == "trades" ? "" : ",\"snapshot\":true";
      else a += ",\"prev\":" + std::to_string(prev);
      if (i >= 0 && opt_.conflated && opt_.conflated(i) > 0) a += ",\"conflated\":" + std::to_string(opt_.conflated(i));
      if (i >= 0 && i == opt_.lost_at && n > 1 && prev + 1 <= height - 1) {
        a += ",\"lost\":[" + std::to_string(prev + 1) + "," + std::to_string(height - 1) + "]";
        std::lock_guard lk(m_);
        lost_range_ = {prev + 1, height - 1};
      }
      prev = height;
    }
    return a + "}";
  };
  auto sub_of = [&](const std::string& ch, const std::string& coin) {
    for (size_t k = 0; k < sub_keys.size(); ++k)
      if (sub_keys[k].first == ch && sub_keys[k].second == coin) return k;
    return sub_keys.size();
  };
  const int64_t height_base = opt_.restart_lower && conn_index > 0 ? 100 : 1000;
  if (opt_.replay) {
    for (size_t k = 0; k < sub_keys.size(); ++k) {
      if (since[k] <= 0) continue;
      if (since[k] + 1 < opt_.oldest_replay) {
        const std::string echo = R"({\"type\":\")" + sub_keys[k].first + R"(\",\"coin\":\")" + sub_keys[k].second + R"(\"})";
        ws.write(net::buffer(R"({"channel":"hlbookNotice","data":"hlbook: cannot resume )" + echo + " from height " +
                             std::to_string(since[k]) + ": the oldest height it can replay is " +
                             std::to_string(opt_.oldest_replay) + "; subscribed afresh\"}"));
        continue;
      }
      resumed[k] = true;
      chains[k].second = since[k];
      std::vector<Kept> mine;
      {
        std::lock_guard lk(m_);
        for (const Kept& f : kept_)
          if (f.ch == sub_keys[k].first && f.coin == sub_keys[k].second && f.height > since[k]) mine.push_back(f);
      }
      for (Kept& f : mine) {
        f.stamps[5] = now_ns();
        ws.write(net::buffer(f.body + audit_of(k, f.height, f.stamps, -1, true) + "}"));
      }
    }
  }
  if (opt_.snapshots) {
    // What a subscriber gets first: the slot's current frame (here 5 s old) or recent trades. Not in the budget.
    // Neither for a resumed subscription nor, as hlbook, trades on an audit connection.
    for (size_t k = 0; k < sub_keys.size(); ++k) {
      if (resumed[k] || (opt_.audit && sub_keys[k].first == "trades")) continue;
      const int64_t ns = now_ns(), t = ns / 1000000 - 5000, block = t * 1000000;
      std::string frame = data_frame(sub_keys[k].first, sub_keys[k].second, t, 1, 0);
      if (opt_.audit)
        frame += audit_of(k, height_base - 1, {block, block + 2000000, block + 3000000, block + 3100000, block + 3200000, ns}, -1);
      ws.write(net::buffer(frame + "}"));
    }
  }
  int on_this_conn = 0;
  for (;;) {
    const int i = sent_.fetch_add(1);
    if (stop_ || i >= opt_.frames) break;
    const std::string& ch = opt_.channels[i % opt_.channels.size()];
    const std::string& coin = opt_.coins[(i / opt_.channels.size()) % opt_.coins.size()];
    const int d = opt_.delay_ms(i);
    const int64_t ns = now_ns();
    const int64_t t = ns / 1000000 - d;
    const int samples = ch == "trades" ? opt_.trades_per_frame : 1;
    std::string frame = data_frame(ch, coin, t, samples, i);
    const int64_t height = height_base + i / std::max(1, opt_.heights_every);
    if (opt_.audit) {
      const int64_t block = t * 1000000;
      std::array<int64_t, 6> st{block, block + 2000000, block + 3000000, block + 3100000, block + 3200000, now_ns()};
      if (opt_.tamper) opt_.tamper(i, st);
      if (opt_.replay) {
        std::lock_guard lk(m_);
        kept_.push_back({ch, coin, frame, height, st});
      }
      frame += audit_of(sub_of(ch, coin), height, st, i);
    }
    frame += "}";
    if (i == opt_.drop_at) {  // counted in its chain above, never sent
      std::lock_guard lk(m_);
      dropped_height_ = height;
      continue;
    }
    {
      std::lock_guard lk(m_);
      for (int k = 0; k < samples; ++k) delays_.emplace_back(ch, d);
    }
    ws.write(net::buffer(frame));
    ++on_this_conn;
    bool close_now = false;
    {
      std::lock_guard lk(m_);
      if (opt_.close_after >= 0 && !closed_once_ && on_this_conn == opt_.close_after) close_now = closed_once_ = true;
    }
    if (close_now && opt_.unsent_at_close > 0) {
      // Frames made for this connection that it never delivers: kept (for a resume) and counted in the chains.
      for (int u = 0; u < opt_.unsent_at_close; ++u) {
        const int j = sent_.fetch_add(1);
        if (j >= opt_.frames) break;
        const std::string& uch = opt_.channels[j % opt_.channels.size()];
        const std::string& ucoin = opt_.coins[(j / opt_.channels.size()) % opt_.coins.size()];
        const int64_t ut = now_ns() / 1000000 - opt_.delay_ms(j), block = ut * 1000000;
        const int64_t uh = height_base + j / std::max(1, opt_.heights_every);
        std::array<int64_t, 6> st{block, block + 2000000, block + 3000000, block + 3100000, block + 3200000, now_ns()};
        const std::string body = data_frame(uch, ucoin, ut, uch == "trades" ? opt_.trades_per_frame : 1, j);
        if (opt_.replay) {
          std::lock_guard lk(m_);
          kept_.push_back({uch, ucoin, body, uh, st});
        }
        if (opt_.audit) audit_of(sub_of(uch, ucoin), uh, st, j);
      }
      beast::error_code ignore;
      beast::get_lowest_layer(ws).close(ignore);  // dropped: no close frame
      return;
    }
    if (close_now) {
      ws.close(websocket::close_code::going_away);
      break;
    }
    if (opt_.spacing_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opt_.spacing_us));
  }
  if (ws.is_open()) {
    // Idle until the client goes away (its reads end the run), answering application pings.
    beast::flat_buffer in;
    for (;;) {
      in.clear();
      ws.read(in);
      if (beast::buffers_to_string(in.data()).find("\"ping\"") != std::string::npos) {
        pings_++;
        ws.write(net::buffer(std::string(R"({"channel":"pong"})")));
      }
    }
  }
}
