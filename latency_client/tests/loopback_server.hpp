// Test-only loopback WebSocket server (Beast, 127.0.0.1:0, own thread) that plays a Hyperliquid-shaped feed
// with injected latency: each data frame's exchange time is now_ms - delay(i) for a delay sequence the test
// chooses, so the client's percentiles can be checked against the exact injected distribution.
// Beast is confined to loopback_server.cpp; tests only see this header.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config.hpp"
#include "extract.hpp"

struct ServerOptions {
  bool deflate = false;                         // server-side permessage-deflate
  int frames = 600;                             // data frames to push in total (a budget shared by connections)
  std::function<int(int)> delay_ms = [](int) { return 50; };
  int close_after = -1;                         // close the first data connection once after this many frames
  int spacing_us = 1000;                        // pause between frames
  std::vector<std::string> channels{"l2Book"};  // frame i uses channels[i % size]
  std::vector<std::string> coins{"BTC", "ETH"}; // frame i uses coins[(i / channels) % size]; also allMids keys
  int trades_per_frame = 2;                     // samples per trades frame (same delay)
  bool audit = false;                           // add the audit object to data frames
  bool chain = true;                            // with audit: the chain fields (sub, n, prev, snapshot, ...)
  bool snapshots = true;                        // each subscription's first frame, an old one (as hlbook sends)
  int expected_subs = 2;                        // subscribe frames to read before pushing data
  bool noise = false;                           // after the acks: error frame, non-JSON text frame, binary frame
  bool tls = false;                             // wss:// with a fresh self-signed certificate (CN/IP 127.0.0.1)
  int wait_conns = 1;                           // data connections to wait for before any data is pushed
  // Audit heights are 1000 + i for data frame i (snapshots carry 999); on the connections after the first,
  // with restart_lower, 100 + i (a restarted server's lower heights).
  bool restart_lower = false;
  int drop_at = -1;                             // data frame i is counted in its chain but not sent
  int lost_at = -1;                             // data frame i says the server dropped the heights since prev
  std::function<int(int)> conflated;            // data frame i replaced this many frames (absent when 0)
  // Audit stamps of frame i: block, node, read, applied, published, sent (ns). Set one to 0 to send 0, to -1 to
  // leave the key out.
  std::function<void(int, std::array<int64_t, 6>&)> tamper;
  std::string error_after_acks;                 // an error frame's data text sent after the acks
  int unacked = 0;                              // the first N subscriptions get no subscriptionResponse
  // Resume (docs/api.md): with `replay`, every data frame made is kept, and a subscription with "since": H gets
  // the kept frames of its channel x coin above H, marked "replayed", its chain's prev seeded with H, then the
  // live ones. A since below oldest_replay - 1 gets the "cannot resume" notice and a fresh subscription.
  bool replay = false;
  int64_t oldest_replay = 0;
  int heights_every = 1;                        // frames per height (streaming mode: several share one)
  // With close_after: made (kept for replay, numbered in their chains) but not sent before the close, as frames
  // a dying connection never delivered. The close is a dropped socket (no WebSocket close frame).
  int unsent_at_close = 0;
};

class LoopbackServer {
 public:
  explicit LoopbackServer(ServerOptions opt);
  ~LoopbackServer();
  unsigned short port() const { return port_; }
  std::string url() const { return (opt_.tls ? "wss://127.0.0.1:" : "ws://127.0.0.1:") + std::to_string(port_) + "/ws"; }

  // Injected delays (ms) of every sample sent, per channel name, in send order.
  std::vector<int> delays(const std::string& channel);
  std::string last_extensions();  // Sec-WebSocket-Extensions of the last data connection's upgrade request
  std::string last_target();
  int data_connections();
  int pings() const { return pings_; }  // application pings received after the data was pushed
  bool finished() const { return sent_ >= opt_.frames; }
  int64_t dropped_height();               // height of the frame drop_at left out (0: none)
  std::pair<int64_t, int64_t> lost_range();  // the `lost` range frame lost_at carried
  std::vector<std::string> subscribes();     // every subscribe request received, in order

 private:
  void serve();
  void handle(void* socket);  // one connection, on its own thread
  template <class Ws, class Req>
  void session(Ws& ws, const Req& req);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ServerOptions opt_;
  unsigned short port_ = 0;
  std::thread thread_;
  std::vector<std::thread> handlers_;  // only touched by the accept thread and the destructor after join
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::atomic<int> pings_{0};
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, int>> delays_;
  std::string last_ext_, last_target_;
  int data_conns_ = 0;
  bool closed_once_ = false;
  int64_t dropped_height_ = 0;
  std::pair<int64_t, int64_t> lost_range_{0, 0};
  std::vector<std::string> subscribes_;
  struct Kept {
    std::string ch, coin, body;  // body: the frame up to its audit object
    int64_t height;
    std::array<int64_t, 6> stamps;
  };
  std::vector<Kept> kept_;  // every data frame made, for replay
};

// A run against `srv`: BTC and ETH l2Book, quiet, ending when the injected samples arrived (60 s at most).
inline lat::Config loopback_config(const LoopbackServer& srv) {
  lat::Config c;
  c.url = srv.url();
  c.coins = {"BTC", "ETH"};
  c.channels = {lat::kL2Book};
  c.duration_s = 60;  // upper bound; the run ends when every injected sample arrived
  c.quiet = true;
  return c;
}
