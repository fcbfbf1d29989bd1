// The audit chain end to end against the loopback server, in-process and through the built binary: a server
// with audit stamps but no chain is UNVERIFIED (exit 4, --allow-loss or not); one dropped chained frame is
// named by its height (exit 3); conflation alone is counted and healthy (exit 0); the server's `lost` range is
// named once although its notice came too; a quiet trades channel is "quiet", not a failure; a restarted
// server (lower heights) is one disconnect, one reconnect, one regression and no phantom loss.
// No durations are asserted: in-process runs end when the expected samples arrived.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdlib>
#include <iostream>

#include "client.hpp"
#include "loopback_server.hpp"
#include "test_util.hpp"

using namespace lat;

namespace {

Config audit_config(const LoopbackServer& srv, uint64_t samples) {
  Config c = loopback_config(srv);
  c.audit = true;
  c.stop_after_samples = samples;
  return c;
}

}  // namespace

TEST(ChainLoopback, NoChainWithAuditIsUnverifiedExit4) {
  ServerOptions o;
  o.frames = 1000000;
  o.spacing_us = 2000;
  o.audit = true;
  o.chain = false;  // stamps only, as a server without the chain sends them
  LoopbackServer srv(o);
  TempDir tmp;
  auto out = tmp.p / "out.txt";
  const std::string args = "--url " + srv.url() + " --coins BTC,ETH --channels l2Book --duration 1 --audit --json " +
                           (tmp.p / "r.json").string();
  const int rc = run_binary(args, out);
  const std::string text = slurp(out);
  EXPECT_EQ(rc, 4) << text;
  EXPECT_NE(text.find("verdict: l2Book=unverified"), std::string::npos) << text;
  EXPECT_NE(text.find("-> UNVERIFIED (loss could not be checked: l2Book)"), std::string::npos) << text;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.load((tmp.p / "r.json").string()).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(doc["result"]), "UNVERIFIED");
  EXPECT_EQ(int64_t(doc["exit_code"]), 4);
  EXPECT_FALSE(bool(doc["healthy"]));
  EXPECT_EQ(std::string_view(doc["channels"].at(0)["verdict"]), "unverified");
  EXPECT_EQ(run_binary(args + " --allow-loss", out), 4) << slurp(out);
}

TEST(ChainLoopback, DroppedFrameExits3NamingItsHeight) {
  ServerOptions o;
  o.frames = 300;
  o.audit = true;
  o.drop_at = 120;  // BTC's frame at height 1120 is counted in its chain, never sent
  LoopbackServer srv(o);
  Config c = audit_config(srv, 299);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  ASSERT_EQ(srv.dropped_height(), 1120);
  const ChainChannel& cc = rr.total.health.chain.ch[kL2Book];
  EXPECT_EQ(cc.lost_frames, 1u);
  EXPECT_EQ(cc.chained_frames, 2u + 299u);  // the two snapshots and every frame sent
  ASSERT_EQ(rr.total.health.chain.ranges.size(), 1u);
  EXPECT_EQ(rr.total.health.chain.ranges[0], (LostRange{kL2Book, 0, 1120, 1120, 1}));
  const Verdict v = verdict(rr.total.health, c, rr.total.c.disconnects);
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_EQ(v.channel[kL2Book], "lost");
  EXPECT_NE(v.line.find("l2Book=lost (lost 1 frame: BTC 1120)"), std::string::npos) << v.line;
  const std::string table = format_table(rr.total, c, rr.info);
  if (std::getenv("LATENCY_TEST_SHOW")) std::cout << table;
  EXPECT_NE(table.find("  l2Book lost: BTC 1120\n"), std::string::npos) << table;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  const std::string json = format_json(rr.total, c, rr.info);
  ASSERT_EQ(p.parse(json).get(doc), simdjson::SUCCESS) << json;
  auto ch = doc["channels"].at(0);
  EXPECT_EQ(uint64_t(ch["lost_frames"]), 1u);
  EXPECT_EQ(std::string_view(ch["lost_ranges"].at(0)["coin"]), "BTC");
  EXPECT_EQ(int64_t(ch["lost_ranges"].at(0)["first"]), 1120);
  EXPECT_EQ(int64_t(ch["lost_ranges"].at(0)["last"]), 1120);
  EXPECT_EQ(uint64_t(doc["health"]["missed_heights"]), 1u);
  EXPECT_EQ(int64_t(doc["exit_code"]), 3);
}

TEST(ChainLoopback, ConflatedOnlyIsCountedAndHealthy) {
  ServerOptions o;
  o.frames = 300;
  o.audit = true;
  o.conflated = [](int i) { return i % 10 == 5 ? 3 : 0; };  // 30 frames each replaced 3 others
  LoopbackServer srv(o);
  Config c = audit_config(srv, 300);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  const ChainChannel& cc = rr.total.health.chain.ch[kL2Book];
  EXPECT_EQ(cc.conflated, 90u);
  EXPECT_EQ(cc.lost_frames, 0u);
  EXPECT_EQ(rr.total.health.missed_heights(), 0u);
  const Verdict v = verdict(rr.total.health, c, rr.total.c.disconnects);
  EXPECT_EQ(v.exit_code, 0) << v.line;
  EXPECT_EQ(v.channel[kL2Book], "ok");
  EXPECT_NE(v.line.find("l2Book=ok (conflated 90) -> HEALTHY"), std::string::npos) << v.line;
  EXPECT_NE(format_table(rr.total, c, rr.info).find("conflated=90"), std::string::npos);
}

TEST(ChainLoopback, ServerLostRangeIsNamedOnceWithItsNotice) {
  ServerOptions o;
  o.frames = 200;
  o.audit = true;
  o.channels = {"trades"};
  o.lost_at = 101;  // ETH's frame at 1101 says the server dropped 1100 (its notice was sent first)
  o.error_after_acks = R"(hlbook: this connection fell behind; {"type":"trades","coin":"ETH"} lost blocks before height 1101 and continues from it)";
  LoopbackServer srv(o);
  // As hlbook, trades on an audit connection start with a live frame, not recent trades; each coin's first (n 1,
  // no prev) is kept out of the percentiles like a snapshot.
  Config c = audit_config(srv, 198 * 2);
  c.channels = {kTrades};
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  ASSERT_EQ(srv.lost_range(), (std::pair<int64_t, int64_t>{1100, 1100}));
  const Health& h = rr.total.health;
  EXPECT_EQ(h.loss_notices[kTrades], 1u);
  EXPECT_EQ(h.chain.ch[kTrades].dropped_heights, 1u);
  EXPECT_EQ(h.chain.ch[kTrades].lost_events, 1u);
  const Verdict v = verdict(h, c, rr.total.c.disconnects);
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_EQ(v.why[kTrades], "1 heights dropped by the server: ETH 1100 (server)") << v.line;
}

TEST(ChainLoopback, QuietTradesWithoutAuditIsQuietExit0) {
  ServerOptions o;
  o.frames = 1000000;  // l2Book keeps coming until the binary's run ends; trades only get their first frame
  o.spacing_us = 2000;
  o.expected_subs = 4;
  LoopbackServer srv(o);
  TempDir tmp;
  auto out = tmp.p / "out.txt";
  const int rc = run_binary("--url " + srv.url() + " --coins BTC,ETH --channels l2Book,trades --duration 3 "
                            "--max-silence 1 --json " + (tmp.p / "r.json").string(),
                            out);
  const std::string text = slurp(out);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("l2Book=ok trades=quiet (no frame for"), std::string::npos) << text;
  EXPECT_NE(text.find("-> HEALTHY; checked:"), std::string::npos) << text;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.load((tmp.p / "r.json").string()).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(doc["channels"].at(1)["verdict"]), "quiet");
  EXPECT_EQ(uint64_t(doc["channels"].at(1)["snapshot_frames"]), 2u);  // recent trades, one per coin
  EXPECT_EQ(uint64_t(doc["channels"].at(1)["count"]), 0u);
  EXPECT_TRUE(bool(doc["healthy"]));
}

TEST(ChainLoopback, RestartIsOneReconnectWithoutPhantomLoss) {
  ServerOptions o;
  o.frames = 400;
  o.audit = true;
  o.close_after = 150;
  o.restart_lower = true;  // the next connection's heights are 900 lower, its chains new
  LoopbackServer srv(o);
  Config c = audit_config(srv, 400);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(rr.total.c.disconnects, 1u);
  EXPECT_EQ(rr.total.c.reconnects, 1u);
  const Health& h = rr.total.health;
  EXPECT_EQ(h.missed_heights(), 0u);
  EXPECT_EQ(h.chain.ranges_total, 0u);
  EXPECT_EQ(rr.total.ch[kL2Book].snapshot_frames, 4u);  // two per session
  // Each coin's heights went back once (the first live frame after the snapshot).
  EXPECT_EQ(h.chain.ch[kL2Book].regressions, 2u);
  ASSERT_FALSE(h.chain.regressions.empty());
  EXPECT_GT(h.chain.regressions[0].from, h.chain.regressions[0].to);
  const Verdict v = verdict(h, c, rr.total.c.disconnects);
  EXPECT_NE(v.line.find("height went back from "), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("1 disconnects"), std::string::npos) << v.line;
  EXPECT_EQ(v.line.find("lost 1"), std::string::npos) << v.line;
}
