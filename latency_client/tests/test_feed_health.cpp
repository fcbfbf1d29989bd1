// Feed health end to end against the loopback server, in-process and through the built binary: a server that
// goes quiet (while still answering pings) leaves the connection "silent" and the binary exits 3 after printing
// its table; the idle timeout is not reset by pongs; missing, zero and out-of-order audit stamps are not sampled
// but counted; a server loss notice and an unacknowledged subscription make the channel "lost"; SIGINT writes
// every report; unwritable outputs are refused at start; the audit end-to-end row adds up. (The audit chain's
// runs are in test_chain_loopback.cpp.)
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "client.hpp"
#include "loopback_server.hpp"
#include "test_util.hpp"
#include "xml_check.hpp"

using namespace lat;

namespace {

// The l2Book samples of every window in a CSV report so far (the binary flushes each window as it ends).
uint64_t csv_l2_samples(const std::string& csv) {
  uint64_t n = 0;
  std::istringstream rows(csv);
  for (std::string row; std::getline(rows, row);) {
    const size_t at = row.find(",l2Book,");
    if (at != std::string::npos) n += std::stoull(row.substr(at + 8));
  }
  return n;
}

Config base(const LoopbackServer& srv) {
  Config c;
  c.url = srv.url();
  c.coins = {"BTC", "ETH"};
  c.channels = {kL2Book};
  c.duration_s = 60;
  c.quiet = true;
  return c;
}

}  // namespace

TEST(FeedHealth, SilentConnectionFailsAndExitsNonZeroWithTable) {
  ServerOptions o;
  o.frames = 40;  // then nothing but pongs for the rest of the run: the whole connection is silent
  o.spacing_us = 10000;
  LoopbackServer srv(o);
  TempDir tmp;
  auto out = tmp.p / "out.txt";
  const int rc = run_binary("--url " + srv.url() + " --coins BTC,ETH --channels l2Book --duration 3 --max-silence 1 "
                            "--ping 0.2 --json " + (tmp.p / "r.json").string(),
                            out);
  const std::string text = slurp(out);
  EXPECT_EQ(rc, 3) << text;
  EXPECT_NE(text.find("p99.9"), std::string::npos) << text;  // the table is still printed
  EXPECT_NE(text.find("verdict: l2Book=silent (no data frame on a connection for"), std::string::npos) << text;
  EXPECT_NE(text.find("NOT HEALTHY"), std::string::npos) << text;
  EXPECT_NE(text.find("not checked: per-subscription loss (no --audit)"), std::string::npos) << text;
  EXPECT_GE(srv.pings(), 2);  // pongs kept coming and did not count as data
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.load((tmp.p / "r.json").string()).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(doc["channels"].at(0)["verdict"]), "silent");
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["snapshot_frames"]), 2u);  // each coin's first frame
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["count"]), 40u);
  EXPECT_FALSE(bool(doc["healthy"]));
  EXPECT_EQ(std::string_view(doc["result"]), "NOT HEALTHY");
  EXPECT_EQ(int64_t(doc["exit_code"]), 3);
  // --allow-loss: same verdict, exit 0.
  EXPECT_EQ(run_binary("--url " + srv.url() + " --coins BTC,ETH --channels l2Book --duration 1 --max-silence 0.5 "
                       "--allow-loss",
                       out),
            0)
      << slurp(out);
  EXPECT_NE(slurp(out).find("--allow-loss: exit 0"), std::string::npos) << slurp(out);
}

TEST(FeedHealth, IdleTimeoutIgnoresPongs) {
  ServerOptions o;
  o.frames = 20;
  LoopbackServer srv(o);
  Config c = base(srv);
  c.duration_s = 3;
  c.ping_s = 0.2;  // pongs every 0.2 s; none of them may keep the connection "alive"
  c.idle_s = 1;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_GE(rr.total.health.idle_timeouts, 1u);
  EXPECT_GE(rr.total.c.disconnects, 1u);
  EXPECT_GE(rr.total.c.reconnects, 1u);
  EXPECT_GT(rr.total.c.pongs, 3u);
}

TEST(FeedHealth, BadAuditStampsAreCountedNotSampled) {
  ServerOptions o;
  o.frames = 300;
  o.audit = true;
  o.tamper = [](int i, std::array<int64_t, 6>& st) {
    if (i % 10 == 1) st[1] = 0;                  // node stamp sent as 0 (older servers)
    if (i % 10 == 2) st[1] = -1;                 // node stamp left out (this server)
    if (i % 10 == 3) st[2] = st[1] - 1000000;    // read before node write: out of order
    if (i % 10 == 4) st[5] = -1;                 // no sent stamp
  };
  LoopbackServer srv(o);
  Config c = base(srv);
  c.audit = true;
  c.stop_after_samples = 300;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  const ChannelStats& cs = rr.total.ch[kL2Book];
  EXPECT_EQ(cs.audited_frames, 300u);
  EXPECT_EQ(cs.stage_invalid[kExchToNode], 60u);   // node 0 or missing
  EXPECT_EQ(cs.stage_invalid[kNodeToRead], 90u);   // node 0 / missing, and read < node
  EXPECT_EQ(cs.stage_invalid[kInServer], 30u);     // sent missing
  EXPECT_EQ(cs.stage_invalid[kSendToRecv], 30u);
  EXPECT_EQ(cs.stage[kExchToNode].count(), 240u);
  EXPECT_EQ(cs.stage[kExchToNode].max(), 2000u);   // never block - 0
  EXPECT_EQ(cs.stage[kNodeToRead].count(), 210u);
  EXPECT_EQ(cs.stage[kNodeToRead].max(), 1000u);
  EXPECT_EQ(cs.audit_e2e.count(), 180u);
}

TEST(FeedHealth, AuditEndToEndRowAddsUpAndTracksTheMsRow) {
  ServerOptions o;
  o.frames = 400;
  o.audit = true;
  o.delay_ms = [](int i) { return 30 + i % 20; };
  LoopbackServer srv(o);
  Config c = base(srv);
  c.audit = true;
  c.keep_trace = true;
  c.stop_after_samples = 400;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  ASSERT_EQ(rr.total.trace.size(), 400u);
  for (const TraceRow& r : rr.total.trace) {
    ASSERT_GE(r.e2e, 0);
    EXPECT_EQ(r.stage[0] + r.stage[1] + r.stage[2] + r.stage[3], r.e2e);
    EXPECT_GE(r.ms_row, r.e2e);
    EXPECT_LT(r.ms_row - r.e2e, 1000);  // the ms row differs by the truncation of block_ns to the ms: < 1 ms
  }
  const ChannelStats& cs = rr.total.ch[kL2Book];
  EXPECT_EQ(cs.audit_e2e.count(), 400u);
  EXPECT_EQ(cs.stage[kExchToNode].percentile(50), 2000u);
  EXPECT_EQ(cs.stage[kNodeToRead].percentile(50), 1000u);
}

TEST(FeedHealth, LossNoticeAndMissingAckMakeTheChannelLost) {
  ServerOptions o;
  o.frames = 100;
  o.channels = {"l2Book", "trades"};
  o.expected_subs = 4;
  o.unacked = 1;
  o.error_after_acks = R"(hlbook: this connection fell behind; {"type":"trades","coin":"ETH"} lost blocks before height 1234 and continues from it)";
  LoopbackServer srv(o);
  Config c = base(srv);
  c.channels = {kL2Book, kTrades};
  c.stop_after_samples = 50 + 50 * 2;
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  const Health& h = rr.total.health;
  EXPECT_EQ(h.loss_notices[kTrades], 1u);
  EXPECT_EQ(h.loss_notices[kL2Book], 0u);
  EXPECT_EQ(h.acks_missing[kL2Book], 1u);  // the first subscription sent is l2Book BTC
  EXPECT_EQ(h.acks_missing[kTrades], 0u);
  Verdict v = verdict(h, c, rr.total.c.disconnects);
  EXPECT_EQ(v.channel[kL2Book], "lost");
  EXPECT_EQ(v.channel[kTrades], "lost");
  EXPECT_NE(v.why[kTrades].find("1 loss notices"), std::string::npos) << v.why[kTrades];
}

TEST(FeedHealth, SigintWritesEveryReport) {
  ServerOptions o;
  o.frames = 1000000;
  o.spacing_us = 5000;
  o.audit = true;
  LoopbackServer srv(o);
  TempDir tmp;
  auto out = tmp.p / "out.txt";
  const auto json = tmp.p / "r.json", svg = tmp.p / "r.svg", csv = tmp.p / "r.csv", hlog = tmp.p / "r.hlog";
  pid_t pid = spawn_binary({"--url", srv.url(), "--coins", "BTC,ETH", "--channels", "l2Book", "--duration", "600",
                            "--audit", "--json", json.string(), "--svg", svg.string(), "--csv", csv.string(),
                            "--interval", "1", "--hlog", hlog.string()},
                           out);
  ASSERT_GT(pid, 0);
  // Interrupted once a window with samples is written: the run has data to report (no pause to hope so). The
  // bound only guards against a binary that never writes one.
  uint64_t in_csv = 0;
  for (int polls = 0; polls < 6000 && in_csv == 0; ++polls) {
    in_csv = csv_l2_samples(slurp(csv));
    if (in_csv == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGINT);
  const int rc = wait_exit(pid);  // it stops: the run was 600 s long, and ctest's timeout is 120 s
  ASSERT_GT(in_csv, 0u) << "no CSV window with samples: " << slurp(out);
  const std::string text = slurp(out);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("interrupted: stopped by a signal"), std::string::npos) << text;
  EXPECT_NE(text.find("p99.9"), std::string::npos) << text;
  EXPECT_NE(text.find("verdict: l2Book=ok"), std::string::npos) << text;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.load(json.string()).get(doc), simdjson::SUCCESS) << slurp(json);
  EXPECT_TRUE(bool(doc["interrupted"]));
  EXPECT_GE(uint64_t(doc["channels"].at(0)["count"]), in_csv);  // the whole run holds the windows before the signal
  for (const auto& f : {svg, tmp.p / "r-stages.svg", tmp.p / "r-added.svg"}) {
    std::string why;
    const std::string s = slurp(f);
    EXPECT_TRUE(xml_well_formed(s, why)) << f << ": " << why;
    EXPECT_NE(s.find("data-channel=\"l2Book\""), std::string::npos) << f;
  }
  EXPECT_NE(slurp(csv).find(",l2Book,"), std::string::npos);
  EXPECT_NE(slurp(hlog).find("Tag=l2Book,"), std::string::npos);
}

TEST(FeedHealth, UnwritableOutputIsAnErrorAtStart) {
  ServerOptions o;
  LoopbackServer srv(o);
  TempDir tmp;
  auto out = tmp.p / "out.txt";
  for (const char* flag : {"--json", "--svg", "--hlog"}) {
    EXPECT_EQ(run_binary("--url " + srv.url() + " --coins BTC --channels l2Book --duration 30 " + flag + " " +
                             (tmp.p / "no/such/dir/f").string(),
                         out),
              1)
        << flag;
    EXPECT_EQ(srv.data_connections(), 0) << flag << ": connected before failing";
    EXPECT_NE(slurp(out).find("cannot write"), std::string::npos) << slurp(out);
  }
  EXPECT_EQ(run_binary("--url " + srv.url() + " --coins BTC --channels l2Book --duration 30 --csv " +
                           (tmp.p / "no/such/dir/f").string() + " --interval 1",
                       out),
            1);
}
