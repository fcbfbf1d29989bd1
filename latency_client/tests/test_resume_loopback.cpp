// Resume against the loopback server, which keeps its frames and honours "since": a connection dropped with
// frames made but never delivered. With --resume the client re-subscribes trades with since = its last height - 1,
// drops the replayed frames it already had (also several at one height, as in streaming mode), keeps replays out
// of the percentiles and reports no loss; without it the heights between the sessions are loss; a refused resume
// (the notice) is loss. Runs end when the live samples arrived; nothing here is timed.
#include <gtest/gtest.h>
#include <simdjson.h>

#include "client.hpp"
#include "loopback_server.hpp"

using namespace lat;

namespace {

// trades for BTC and ETH (alternating frames, two trades each); the first connection is dropped after 150 frames
// with 4 more made and never sent.
ServerOptions dropping(int heights_every = 1, int close_after = 150) {
  ServerOptions o;
  o.frames = 300;
  o.channels = {"trades"};
  o.audit = true;
  o.replay = true;
  o.heights_every = heights_every;
  o.close_after = close_after;
  o.unsent_at_close = 4;
  return o;
}

// Live samples: the frames sent (300 less the 4 never sent) less each session's first frame per coin when it
// is a fresh chain's (n 1 without prev: kept out like a snapshot), two trades each.
Config trades_config(const LoopbackServer& srv, bool resume, int fresh_firsts) {
  Config c = loopback_config(srv);
  c.channels = {kTrades};
  c.audit = true;
  c.resume = resume;
  c.stop_after_samples = static_cast<uint64_t>(296 - fresh_firsts) * 2;
  return c;
}

int since_subscribes(LoopbackServer& srv) {
  int n = 0;
  for (const auto& s : srv.subscribes()) n += s.find("\"since\":") != std::string::npos;
  return n;
}

}  // namespace

TEST(ResumeLoopback, ResumedReconnectLosesNothing) {
  LoopbackServer srv(dropping());
  Config c = trades_config(srv, true, 2);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(rr.total.c.disconnects, 1u);
  // BTC's last frame was at 1148, ETH's at 1149: each asks from the height before.
  const auto subs = srv.subscribes();
  ASSERT_EQ(subs.size(), 4u);
  EXPECT_EQ(subs[2], R"({"method":"subscribe","subscription":{"type":"trades","coin":"BTC","since":1147}})");
  EXPECT_EQ(subs[3], R"({"method":"subscribe","subscription":{"type":"trades","coin":"ETH","since":1148}})");
  const ChainChannel& cc = rr.total.health.chain.ch[kTrades];
  EXPECT_EQ(cc.resumed, 2u);
  EXPECT_EQ(cc.replayed, 6u);    // per coin: its last frame again, and the two never sent
  EXPECT_EQ(cc.duplicates, 2u);  // that last frame, dropped
  EXPECT_EQ(cc.lost_frames, 0u);
  EXPECT_EQ(cc.unjoined, 0u);
  EXPECT_EQ(cc.mismatches, 0u);
  EXPECT_EQ(rr.total.health.missed_heights(), 0u);
  // Only live frames are measured: the replays carry the reconnect's delay, not the feed's.
  EXPECT_EQ(rr.total.ch[kTrades].lat.count(), 294u * 2);
  const Verdict v = verdict(rr.total.health, c, rr.total.c.disconnects);
  EXPECT_EQ(v.exit_code, 0) << v.line;
  EXPECT_NE(v.line.find("trades=ok (1 disconnects"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("resume across reconnects"), std::string::npos) << v.line;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  const std::string json = format_json(rr.total, c, rr.info);
  ASSERT_EQ(p.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["duplicates"]), 2u);
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["unjoined_heights"]), 0u);
  EXPECT_TRUE(bool(doc["healthy"]));
}

TEST(ResumeLoopback, StreamingHeightsDropExactlyTheFramesReceived) {
  // Four frames per height (two per coin); the cut falls after both of each coin's frames at 1037 arrived, the
  // four never sent are at 1038.
  LoopbackServer srv(dropping(4, 152));
  Config c = trades_config(srv, true, 2);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  const auto subs = srv.subscribes();
  ASSERT_EQ(subs.size(), 4u);
  EXPECT_NE(subs[2].find("\"since\":1036"), std::string::npos) << subs[2];
  EXPECT_NE(subs[3].find("\"since\":1036"), std::string::npos) << subs[3];
  const ChainChannel& cc = rr.total.health.chain.ch[kTrades];
  EXPECT_EQ(cc.duplicates, 4u);  // two per coin at 1037
  EXPECT_EQ(cc.replayed, 8u);
  EXPECT_EQ(cc.lost_frames, 0u);
  EXPECT_EQ(cc.unjoined, 0u);
  EXPECT_EQ(rr.total.ch[kTrades].lat.count(), 294u * 2);
  EXPECT_EQ(verdict(rr.total.health, c, rr.total.c.disconnects).exit_code, 0);
}

TEST(ResumeLoopback, WithoutResumeTheReconnectIsLoss) {
  LoopbackServer srv(dropping());
  Config c = trades_config(srv, false, 4);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(since_subscribes(srv), 0);
  const ChainChannel& cc = rr.total.health.chain.ch[kTrades];
  EXPECT_EQ(cc.unjoined, 2u);
  // BTC: 1148, then 1154: 1149..1153; ETH: 1149, then 1155: 1150..1154.
  EXPECT_EQ(cc.unjoined_heights, 10u);
  EXPECT_EQ(rr.total.health.missed_heights(), 10u);
  const Verdict v = verdict(rr.total.health, c, rr.total.c.disconnects);
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_EQ(v.channel[kTrades], "lost");
  EXPECT_NE(v.why[kTrades].find("2 subscriptions not joined across a reconnect (10 heights unaccounted): "
                                "BTC 1149-1153 (reconnect), ETH 1150-1154 (reconnect)"),
            std::string::npos)
      << v.line;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  const std::string json = format_json(rr.total, c, rr.info);
  ASSERT_EQ(p.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["unjoined_heights"]), 10u);
  EXPECT_EQ(std::string_view(doc["channels"].at(0)["lost_ranges"].at(0)["by"]), "reconnect");
  EXPECT_FALSE(bool(doc["healthy"]));
}

TEST(ResumeLoopback, RefusedResumeIsLoss) {
  ServerOptions o = dropping();
  o.oldest_replay = 1152;  // both since (1147, 1148) are too old
  LoopbackServer srv(o);
  Config c = trades_config(srv, true, 4);
  auto rr = run_latency(c, nullptr);
  ASSERT_EQ(rr.exit_code, 0) << rr.error;
  EXPECT_EQ(since_subscribes(srv), 2);
  const ChainChannel& cc = rr.total.health.chain.ch[kTrades];
  EXPECT_EQ(cc.resume_refused, 2u);
  EXPECT_EQ(cc.unjoined, 2u);
  EXPECT_EQ(cc.unjoined_heights, 12u);  // BTC 1148..1153, ETH 1149..1154
  EXPECT_EQ(rr.total.health.loss_notices_other, 0u);
  const Verdict v = verdict(rr.total.health, c, rr.total.c.disconnects);
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_NE(v.why[kTrades].find("2 resumes refused"), std::string::npos) << v.line;
}
