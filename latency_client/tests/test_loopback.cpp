// End-to-end against the in-process loopback server: injected latency distributions come back as the reported
// percentiles (with and without permessage-deflate), `all` discovery, audit split, reconnect counting, and one
// run of the built latency_stats binary checking its table/JSON/CSV/SVG outputs and exit codes.
//
// Bounds: a sample's measured latency is >= its injected delay (the server stamps floor(now_ms) - delay before
// sending; the client stamps after receiving, same clock), and exceeds it by < 1 ms (the grain of `time`) plus
// loopback transit and scheduling. The delays are backdated stamps, so they cost the run no time: they are seconds
// long, and the upper bound is half the injected value (a fraction of the delay, never a fixed number of ms that a
// busy machine could exceed). The lower bound is exact.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client.hpp"
#include "loopback_server.hpp"
#include "test_util.hpp"
#include "xml_check.hpp"

using namespace lat;

namespace {

uint64_t nearest_rank_ms(std::vector<int> v, double p) {
  std::sort(v.begin(), v.end());
  double want = std::ceil(p / 100.0 * v.size() - 1e-9);
  size_t rank = want < 1 ? 1 : static_cast<size_t>(want);
  return static_cast<uint64_t>(v[std::min(rank, v.size()) - 1]);
}

void expect_matches(const Histogram& h, const std::vector<int>& injected, const char* what) {
  ASSERT_EQ(h.count(), injected.size()) << what;
  for (double p : {25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0}) {
    const uint64_t exact_us = nearest_rank_ms(injected, p) * 1000;
    const uint64_t got = p == 100.0 ? h.max() : h.percentile(p);
    EXPECT_GE(got, exact_us) << what << " p" << p;
    EXPECT_LE(got, exact_us + exact_us / 2) << what << " p" << p;
  }
}

// 1 to 4 s in 50 ms steps, spread evenly.
int uniform_1_4s(int i) { return 1000 + (i * 37) % 61 * 50; }

}  // namespace

TEST(Loopback, UniformDelaysPlain) {
  ServerOptions o;
  o.frames = 600;
  o.delay_ms = uniform_1_4s;
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.stop_after_samples = 600;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_FALSE(rr.info.compression_accepted);
  EXPECT_EQ(srv.last_extensions(), "");
  expect_matches(rr.total.ch[kL2Book].lat, srv.delays("l2Book"), "l2Book");
  EXPECT_EQ(rr.total.ch[kL2Book].negatives, 0u);
  EXPECT_EQ(rr.total.c.bad, 0u);
  EXPECT_EQ(rr.total.c.acks, 2u);
  EXPECT_EQ(rr.total.c.pongs, 1u);
  EXPECT_EQ(rr.total.c.disconnects, 0u);
  EXPECT_EQ(rr.total.c.reconnects, 0u);
}

TEST(Loopback, AllChannelsWithDeflate) {
  ServerOptions o;
  o.deflate = true;
  o.frames = 900;
  o.channels = {"l2Book", "trades", "bbo"};
  o.expected_subs = 6;
  o.delay_ms = [](int i) { return (i % 5 == 0) ? 3500 : 1500 + i % 7 * 50; };  // fixed set: 1500..1800 and 3500
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.channels = {kL2Book, kTrades, kBbo};
  c.compress = true;
  c.stop_after_samples = 300 + 300 * 2 + 300;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(srv.last_extensions(), "permessage-deflate; client_max_window_bits");
  EXPECT_TRUE(rr.info.compression_accepted) << rr.info.extensions_response;
  expect_matches(rr.total.ch[kL2Book].lat, srv.delays("l2Book"), "l2Book");
  expect_matches(rr.total.ch[kTrades].lat, srv.delays("trades"), "trades");
  expect_matches(rr.total.ch[kBbo].lat, srv.delays("bbo"), "bbo");
  EXPECT_EQ(rr.total.ch[kTrades].frames, 300u);
  EXPECT_EQ(rr.total.c.bad, 0u);
}

TEST(Loopback, AllCoinsDiscoveryAndAudit) {
  ServerOptions o;
  o.frames = 300;
  o.coins = {"BTC", "ETH", "SOL"};
  o.expected_subs = 3;
  o.audit = true;
  o.delay_ms = [](int) { return 2000; };
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.coins.clear();
  c.all_coins = true;
  c.audit = true;
  c.per_coin = true;
  c.stop_after_samples = 300;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(rr.info.coins, (std::vector<std::string>{"BTC", "ETH", "SOL"}));
  EXPECT_EQ(srv.last_target(), "/ws?audit=1");
  const ChannelStats& cs = rr.total.ch[kL2Book];
  expect_matches(cs.lat, srv.delays("l2Book"), "l2Book");
  EXPECT_EQ(cs.audited_frames, 300u);
  // The server stamps node = block + 2 ms, read = block + 3 ms; sent is its real clock.
  EXPECT_EQ(cs.stage[kExchToNode].percentile(50), 2000u);
  EXPECT_EQ(cs.stage[kNodeToRead].percentile(50), 1000u);
  EXPECT_EQ(cs.stage[kInServer].count(), 300u);
  EXPECT_EQ(cs.stage[kSendToRecv].count(), 300u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rr.total.coin[i][kL2Book].count(), 100u);
}

TEST(Loopback, ReconnectsAfterServerClose) {
  ServerOptions o;
  o.frames = 400;
  o.close_after = 150;
  o.delay_ms = uniform_1_4s;
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.stop_after_samples = 400;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(rr.total.c.disconnects, 1u);
  EXPECT_EQ(rr.total.c.reconnects, 1u);
  EXPECT_EQ(srv.data_connections(), 2);
  EXPECT_EQ(rr.total.c.acks, 4u);  // resubscribed after the reconnect
  expect_matches(rr.total.ch[kL2Book].lat, srv.delays("l2Book"), "l2Book");
}

TEST(Loopback, SeveralConnectionsShardedOverThreads) {
  ServerOptions o;
  o.frames = 900;
  o.delay_ms = uniform_1_4s;
  o.wait_conns = 3;  // all three subscribed before the budget starts, so each one is counted deterministically
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.conns = 3;
  c.per_coin = true;
  c.stop_after_samples = 900;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(srv.data_connections(), 3);
  EXPECT_EQ(rr.total.c.acks, 6u);  // every connection subscribes every coin x channel
  expect_matches(rr.total.ch[kL2Book].lat, srv.delays("l2Book"), "l2Book merged over connections");
  EXPECT_EQ(rr.total.coin[0][kL2Book].count() + rr.total.coin[1][kL2Book].count(), 900u);
}

TEST(Loopback, ErrorAndBadFramesCountedPingsSent) {
  ServerOptions o;
  o.frames = 50;
  o.noise = true;
  o.delay_ms = uniform_1_4s;
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.duration_s = 1.5;  // timed run: pings every 0.2 s while the server idles after its 50 frames
  c.ping_s = 0.2;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(rr.total.c.errors, 1u);
  EXPECT_EQ(rr.total.c.bad, 2u);  // the truncated JSON text frame and the binary frame
  EXPECT_EQ(rr.total.ch[kL2Book].samples, 50u);
  EXPECT_GE(srv.pings(), 1);
  // 1 pong after the acks + one per ping answered; the last answer may still be in flight when the run ends.
  const uint64_t pings = static_cast<uint64_t>(srv.pings());
  EXPECT_GE(rr.total.c.pongs, pings);
  EXPECT_LE(rr.total.c.pongs, pings + 1);
  EXPECT_EQ(rr.total.c.disconnects, 0u);
}

TEST(Loopback, CompressionRefusedIsReported) {
  ServerOptions o;
  o.frames = 100;
  LoopbackServer srv(o);  // no server-side deflate
  Config c = loopback_config(srv);
  c.compress = true;
  c.stop_after_samples = 100;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(srv.last_extensions(), "permessage-deflate; client_max_window_bits");
  EXPECT_FALSE(rr.info.compression_accepted);
  EXPECT_EQ(rr.total.ch[kL2Book].samples, 100u);
}

TEST(Loopback, UnreachableServerFailsAtStart) {
  unsigned short port;
  {
    LoopbackServer srv(ServerOptions{});
    port = srv.port();
  }  // closed now
  Config c;
  c.url = "ws://127.0.0.1:" + std::to_string(port) + "/ws";
  c.coins = {"BTC"};
  c.channels = {kBbo};
  c.connect_timeout_s = 2;
  auto rr = run_latency(c, nullptr);
  EXPECT_EQ(rr.exit_code, 2);
  EXPECT_NE(rr.error.find("cannot reach"), std::string::npos) << rr.error;
}

TEST(Loopback, SecureWebSocketWithDeflate) {
#ifndef LATENCY_WITH_TLS
  LATENCY_SKIP("latency_client built with -DLATENCY_TLS=OFF: wss:// is not tested");
#endif
  ServerOptions o;
  o.tls = true;
  o.deflate = true;
  o.frames = 300;
  o.delay_ms = uniform_1_4s;
  LoopbackServer srv(o);
  Config c = loopback_config(srv);
  c.compress = true;
  c.insecure = true;  // the loopback certificate is self-signed
  c.stop_after_samples = 300;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_TRUE(rr.info.compression_accepted);
  EXPECT_EQ(rr.info.url.rfind("wss://", 0), 0u);
  expect_matches(rr.total.ch[kL2Book].lat, srv.delays("l2Book"), "l2Book over TLS");

  // Without --insecure the self-signed certificate must be refused at start.
  Config strict = loopback_config(srv);
  strict.connect_timeout_s = 3;
  auto bad = run_latency(strict, nullptr);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.error.find("cannot reach"), std::string::npos) << bad.error;
}


TEST(Binary, WritesAllOutputs) {
  ServerOptions o;
  o.frames = 1000000;  // keeps pushing until the binary's duration ends
  o.spacing_us = 2000;
  o.channels = {"l2Book", "bbo"};
  o.expected_subs = 4;
  o.deflate = true;
  o.delay_ms = [](int i) { return 20 + (i * 37) % 61; };  // 20..80 ms: the windows below are by receive time
  LoopbackServer srv(o);
  TempDir tmp;
  auto out = tmp.p / "stdout.txt";
  std::string args = "--url " + srv.url() + " --coins BTC,ETH --channels l2Book,bbo --duration 2 --warmup 0.2" +
                     " --compress --per-coin --json " + (tmp.p / "r.json").string() + " --csv " +
                     (tmp.p / "r.csv").string() + " --interval 0.5 --svg " + (tmp.p / "r.svg").string();
  ASSERT_EQ(run_binary(args, out), 0) << slurp(out);
  std::string text = slurp(out);
  if (std::getenv("LATENCY_TEST_SHOW")) {
    std::cout << text << slurp(tmp.p / "r.json") << slurp(tmp.p / "r.csv");
    // LATENCY_TEST_SHOW=DIR also keeps the SVG there for a look in a browser.
    std::filesystem::copy_file(tmp.p / "r.svg", std::filesystem::path(std::getenv("LATENCY_TEST_SHOW")) / "latency.svg",
                               std::filesystem::copy_options::overwrite_existing);
  }
  EXPECT_NE(text.find("compression: offered 'permessage-deflate; client_max_window_bits', server accepted"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("p99.9"), std::string::npos) << text;
  EXPECT_NE(text.find("(ms)"), std::string::npos);

  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.load((tmp.p / "r.json").string()).get(doc), simdjson::SUCCESS);
  EXPECT_TRUE(bool(doc["compression"]["accepted"]));
  EXPECT_GT(uint64_t(doc["channels"].at(0)["count"]), 0u);
  EXPECT_GE(double(doc["channels"].at(0)["p50"]), 20.0);  // the smallest delay injected

  std::string csv = slurp(tmp.p / "r.csv");
  EXPECT_EQ(csv.rfind("window_start_unix_s,", 0), 0u);
  EXPECT_GE(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 3) << csv;  // >= 3 windows x 2 channels
  EXPECT_NE(csv.find(",l2Book,"), std::string::npos);
  EXPECT_NE(csv.find(",bbo,"), std::string::npos);

  std::string svg = slurp(tmp.p / "r.svg");
  std::string why;
  EXPECT_TRUE(xml_well_formed(svg, why)) << why;
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
}

TEST(Binary, ExitCodes) {
  TempDir tmp;
  auto out = tmp.p / "out.txt";
  EXPECT_EQ(run_binary("--help", out), 0);
  EXPECT_NE(slurp(out).find("--per-coin"), std::string::npos);
  EXPECT_EQ(run_binary("--url ws://127.0.0.1:1/ws --coins BTC --channels nope", out), 1);
  std::string err = slurp(out);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  unsigned short port;
  {
    LoopbackServer srv(ServerOptions{});
    port = srv.port();
  }
  EXPECT_EQ(run_binary("--url ws://127.0.0.1:" + std::to_string(port) + "/ws --coins BTC --channels bbo", out), 2);
  err = slurp(out);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}
