// Feed health and audit validation on synthetic frames (no sockets): silence, loss notices, missing acks,
// downtime, the verdict and its checks; snapshot frames kept out of every histogram; audit stamps that are
// missing, zero or out of order; the audit end-to-end row adding up; HdrHistogram index geometry of the --hlog
// writer. (The charts are in test_charts.cpp.)
#include <gtest/gtest.h>

#include <map>

#include "hlog.hpp"
#include "report.hpp"
#include "stats.hpp"
#include "synthetic.hpp"
#include "xml_check.hpp"

using namespace lat;

namespace {

using test::frame;
using test::kMs;
using test::kT0;

// Connects one connection to `sh` at `start` and acknowledges its two l2Book subscriptions (BTC, ETH); its slot.
int subscribe_l2(Shard& sh, int64_t start) {
  const int slot = sh.add_connection(start);
  sh.on_subscribed(slot, start);
  Frame ack;
  ack.kind = Kind::SubAck;
  ack.ack_channel = kL2Book;
  for (int i = 0; i < 2; ++i) sh.on_frame(slot, ack, start, 10);
  return slot;
}


Frame audited(Kind k, const std::string& coin, int64_t t_ms, int64_t height, int64_t node_ns, int64_t read_ns,
              int64_t sent_ns) {
  Frame f = frame(k, coin, t_ms);
  f.audit = Audit{true, height, t_ms * kMs, node_ns, read_ns, 0, 0, sent_ns};
  return f;
}

Frame chained(Frame f, int64_t sub, int64_t n, int64_t prev) {
  f.chain.present = true;
  f.chain.sub = sub;
  f.chain.n = n;
  f.chain.prev = prev;
  f.chain.snapshot = n == 1;
  return f;
}

// Each subscription's first frame: a whole state, counted apart from the latency samples.
void snapshots(Shard& sh, int slot, std::initializer_list<std::pair<Kind, const char*>> subs, int64_t at_ns) {
  for (auto [k, coin] : subs) sh.on_frame(slot, frame(k, coin, at_ns / kMs - 5000), at_ns, 100);
}

struct Fx {
  Config cfg;
  CoinIndex coins{{"BTC", 0}, {"ETH", 1}};
  Fx() {
    cfg.url = "ws://x/ws";
    cfg.channels = {kL2Book, kTrades};
    cfg.coins = {"BTC", "ETH"};
    cfg.audit = true;
    cfg.keep_trace = true;
  }
};

}  // namespace

TEST(Health, SilenceNoticesAcksDowntime) {
  Fx fx;
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(start);
  sh.on_subscribed(slot, start);
  Frame ack;
  ack.kind = Kind::SubAck;
  ack.ack_channel = kL2Book;
  sh.on_frame(slot, ack, start, 10);
  sh.on_frame(slot, ack, start, 10);
  ack.ack_channel = kTrades;
  sh.on_frame(slot, ack, start, 10);  // one trades subscription is never acknowledged
  int64_t t = start;
  snapshots(sh, slot, {{Kind::L2Book, "BTC"}, {Kind::L2Book, "ETH"}}, t);
  for (int i = 0; i < 8; ++i) {
    t += 500 * kMs;
    sh.on_frame(slot, frame(Kind::L2Book, i % 2 ? "BTC" : "ETH", t / kMs - 10), t, 100);
  }
  Frame pong;
  pong.kind = Kind::Pong;
  for (int i = 0; i < 20; ++i) sh.on_frame(slot, pong, t + i * 100 * kMs, 10);  // pongs are not data
  Frame notice;
  notice.kind = Kind::Error;
  notice.error = R"(hlbook: this connection fell behind; {"type":"trades","coin":"BTC"} lost blocks before height 120 and continues from it)";
  sh.on_frame(slot, notice, t, 100);
  notice.error = "Already subscribed: {\"type\":\"l2Book\"}";  // an ordinary error is no loss notice
  sh.on_frame(slot, notice, t, 100);
  // Disconnected for 3 s, then resubscribed and everything acknowledged.
  sh.on_disconnect(slot, t + 1000 * kMs, false);
  sh.on_subscribed(slot, t + 4000 * kMs);
  for (int ch : {kL2Book, kL2Book, kTrades, kTrades}) {
    ack.ack_channel = ch;
    sh.on_frame(slot, ack, t + 4000 * kMs, 10);
  }
  t += 4500 * kMs;
  sh.on_frame(slot, frame(Kind::Trades, "BTC", t / kMs - 5), t, 100);
  sh.finish(t + 1000 * kMs);

  const Stats total = sh.total_copy();
  const Health& h = total.health;
  EXPECT_EQ(total.ch[kL2Book].snapshot_frames, 2u);
  EXPECT_EQ(total.ch[kL2Book].samples, 8u);
  EXPECT_EQ(total.ch[kTrades].snapshot_frames, 1u);  // trades' first frame (recent trades)
  EXPECT_EQ(total.ch[kTrades].samples, 0u);
  EXPECT_EQ(h.loss_notices[kTrades], 1u);
  EXPECT_EQ(h.loss_notices[kL2Book], 0u);
  EXPECT_EQ(h.acks_expected[kTrades], 4u);
  EXPECT_EQ(h.acks_missing[kTrades], 1u);
  EXPECT_EQ(h.acks_missing[kL2Book], 0u);
  EXPECT_EQ(h.downtime_ns, 3000 * kMs);
  // l2Book: last frame at start + 4 s, run ended at start + 9.5 s: 5.5 s without one despite the pongs.
  EXPECT_EQ(h.max_silence_ns[kL2Book], 5500 * kMs);
  // trades: nothing until start + 8.5 s.
  EXPECT_EQ(h.max_silence_ns[kTrades], 8500 * kMs);
  // The connection: 1 s before the disconnect, 0.5 s and 1 s after the resubscription (downtime apart).
  EXPECT_EQ(h.max_conn_silence_ns, 1000 * kMs);

  fx.cfg.audit = false;
  Verdict v = verdict(h, fx.cfg, 1);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.exit_code, 3);
  EXPECT_EQ(v.result, "NOT HEALTHY");
  // Quiet channels are reported, not failures; the disconnect and the notice are loss.
  EXPECT_EQ(v.channel[kL2Book], "lost");
  EXPECT_EQ(v.channel[kTrades], "lost");
  EXPECT_NE(v.why[kTrades].find("no frame for 8.5s"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("1 disconnects"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("1 subscriptions not acknowledged"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("1 loss notices"), std::string::npos) << v.line;
  EXPECT_EQ(verdict(h, fx.cfg, 0).channel[kL2Book], "quiet");
  fx.cfg.max_silence_s = 0.9;  // now the connection itself was silent too long: a failure
  EXPECT_EQ(verdict(h, fx.cfg, 0).channel[kL2Book], "silent");
  fx.cfg.allow_loss = true;
  EXPECT_EQ(verdict(h, fx.cfg, 0).exit_code, 0);
}

TEST(Health, HealthyFeedIsOk) {
  Fx fx;
  fx.cfg.channels = {kL2Book};
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = subscribe_l2(sh, start);
  // BTC's book changes every 400 ms but only every other block: the chain vouches for the heights between.
  for (int i = 1; i <= 20; ++i)
    sh.on_frame(slot,
                chained(audited(Kind::L2Book, "BTC", kT0 + i * 400, 500 + 2 * i, 0, 0, 0), 1, i, i > 1 ? 498 + 2 * i : 0),
                start + i * 400 * kMs, 100);
  sh.finish(start + 8400 * kMs);
  Stats s = sh.total_copy();
  Verdict v = verdict(s.health, fx.cfg, 0);
  EXPECT_TRUE(v.healthy) << v.line;
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.channel[kL2Book], "ok");
  EXPECT_EQ(s.health.missed_heights(), 0u);
  EXPECT_EQ(s.health.chain.ch[kL2Book].chained_frames, 20u);
  EXPECT_EQ(s.ch[kL2Book].snapshot_frames, 1u);
  EXPECT_EQ(s.ch[kL2Book].samples, 19u);
  EXPECT_EQ(s.health.max_silence_ns[kL2Book], 400 * kMs);
  RunInfo info;
  info.coins = fx.cfg.coins;
  std::string table = format_table(s, fx.cfg, info);
  EXPECT_EQ(table.substr(table.rfind("verdict:")),
            "verdict: l2Book=ok -> HEALTHY; checked: connection silence, loss notices, acks, disconnects, "
            "per-subscription loss (audit chain), book change late (block_ns)\n")
      << table;
  // Without --audit the verdict says what it could not check.
  fx.cfg.audit = false;
  table = format_table(s, fx.cfg, info);
  EXPECT_EQ(table.substr(table.rfind("verdict:")),
            "verdict: l2Book=ok -> HEALTHY; checked: connection silence, loss notices, acks, disconnects; "
            "not checked: per-subscription loss (no --audit), book change late (no --audit)\n")
      << table;
}

TEST(Health, AuditWithoutChainIsUnverified) {
  Fx fx;
  fx.cfg.channels = {kL2Book, kTrades};
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(start);
  sh.on_subscribed(slot, start);
  Frame ack;
  ack.kind = Kind::SubAck;
  for (int ch : {kL2Book, kL2Book, kTrades, kTrades}) {
    ack.ack_channel = ch;
    sh.on_frame(slot, ack, start, 10);
  }
  for (int i = 1; i <= 10; ++i)  // stamps but no chain: an older server, or another one
    sh.on_frame(slot, audited(Kind::L2Book, "BTC", kT0 + i * 400, 500 + i, 0, 0, 0), start + i * 400 * kMs, 100);
  sh.finish(start + 4000 * kMs);
  Stats s = sh.total_copy();
  Verdict v = verdict(s.health, fx.cfg, 0);
  EXPECT_FALSE(v.healthy);
  EXPECT_FALSE(v.failed);
  EXPECT_TRUE(v.unverified);
  EXPECT_EQ(v.result, "UNVERIFIED");
  EXPECT_EQ(v.exit_code, 4);
  EXPECT_EQ(v.channel[kL2Book], "unverified");
  EXPECT_EQ(v.channel[kTrades], "unverified");
  EXPECT_NE(v.line.find("-> UNVERIFIED (loss could not be checked: l2Book, trades)"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("not checked: per-subscription loss (no frame carried the audit chain)"), std::string::npos)
      << v.line;
  fx.cfg.allow_loss = true;  // does not excuse what was never checked
  EXPECT_EQ(verdict(s.health, fx.cfg, 0).exit_code, 4);
  // Loss found as well: NOT HEALTHY (3) says more than UNVERIFIED.
  fx.cfg.allow_loss = false;
  EXPECT_EQ(verdict(s.health, fx.cfg, 1).exit_code, 3);
  EXPECT_EQ(verdict(s.health, fx.cfg, 1).result, "NOT HEALTHY");
  fx.cfg.allow_loss = true;
  EXPECT_EQ(verdict(s.health, fx.cfg, 1).exit_code, 4);
}

TEST(Health, SnapshotsAreKeptOutOfEveryHistogram) {
  Fx fx;
  fx.cfg.channels = {kL2Book, kTrades};
  fx.cfg.per_coin = true;
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(start);
  sh.on_subscribed(slot, start);
  auto stamped = [](Kind k, int64_t block_ms) {
    const int64_t b = block_ms * kMs;
    return audited(k, "BTC", block_ms, 7, b + 150 * kMs, b + 151 * kMs, b + 152 * kMs);
  };
  // An old slot frame (10 s old), then live frames 200 ms old; trades' recent trades, then a live one.
  sh.on_frame(slot, chained(stamped(Kind::L2Book, kT0 - 10000), 1, 1, 0), start, 100);
  sh.on_frame(slot, chained(stamped(Kind::L2Book, kT0 - 200), 1, 2, 7), start, 100);
  sh.on_frame(slot, chained(stamped(Kind::Trades, kT0 - 9000), 2, 1, 0), start, 100);
  sh.on_frame(slot, chained(stamped(Kind::Trades, kT0 - 200), 2, 2, 7), start, 100);
  // An l4Book-style snapshot later in the chain, and a frame whose data says isSnapshot.
  Frame again = chained(stamped(Kind::L2Book, kT0 - 10000), 1, 3, 7);
  again.chain.snapshot = true;
  sh.on_frame(slot, again, start, 100);
  Frame iss = chained(stamped(Kind::L2Book, kT0 - 10000), 1, 4, 7);
  iss.is_snapshot = true;
  sh.on_frame(slot, iss, start, 100);
  const Stats s = sh.total_copy();
  for (int ch : {kL2Book, kTrades}) {
    const ChannelStats& cs = s.ch[ch];
    EXPECT_EQ(cs.frames, 1u) << ch;
    EXPECT_EQ(cs.lat.count(), 1u) << ch;
    EXPECT_EQ(cs.lat.max(), 200000u) << ch;  // none of the old frames
    EXPECT_EQ(cs.audit_e2e.max(), 200000u) << ch;
    EXPECT_EQ(cs.added.count(), 1u) << ch;
    for (int k = 0; k < kNumStages; ++k) EXPECT_EQ(cs.stage[k].count(), 1u) << ch << " " << k;
    EXPECT_EQ(s.coin[0][ch].count(), 1u) << ch;
  }
  EXPECT_EQ(s.ch[kL2Book].snapshot_frames, 3u);
  EXPECT_EQ(s.ch[kTrades].snapshot_frames, 1u);
  RunInfo info;
  info.coins = fx.cfg.coins;
  const std::string table = format_table(s, fx.cfg, info);
  EXPECT_NE(table.find("snapshot_frames=3"), std::string::npos) << table;
}

namespace {

// l2Book frames: ETH fresh every 0.5 s for 10 s; BTC at 0.5 s, then once more at 9.5 s for a block `btc_block_s`
// after the start. Returns the verdict's l2Book entry.
std::pair<std::string, std::string> btc_late_or_quiet(double btc_block_s, int64_t& stale_ns) {
  Fx fx;
  fx.cfg.channels = {kL2Book};
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = subscribe_l2(sh, start);
  std::map<std::string, std::pair<int64_t, int64_t>> chains;  // coin -> (n, last height)
  auto send = [&](const char* coin, int64_t block_ms_after, int64_t recv_ms_after, int64_t height) {
    Frame f = frame(Kind::L2Book, coin, kT0 + block_ms_after);
    f.audit = Audit{true, height, (kT0 + block_ms_after) * kMs, 0, 0, 0, 0, 0};
    auto& [n, prev] = chains[coin];
    f = chained(f, coin[0] == 'B' ? 1 : 2, ++n, prev);
    prev = height;
    sh.on_frame(slot, f, start + recv_ms_after * kMs, 100);
  };
  int64_t height = 100;
  for (int64_t t = 500; t <= 10000; t += 500) {
    send("ETH", t - 10, t, height++);
    if (t == 500) send("BTC", t - 10, t, height++);
    if (t == 9500) send("BTC", static_cast<int64_t>(btc_block_s * 1000), t, height++);
  }
  sh.finish(start + 10000 * kMs);
  const Stats s = sh.total_copy();
  stale_ns = s.health.l2_coin_stale_ns.at(0);
  const Verdict v = verdict(s.health, fx.cfg, 0);
  return {v.channel[kL2Book], v.why[kL2Book]};
}

}  // namespace

TEST(Health, PerCoinL2BookSilenceCountsOnlyWhenTheBookChanged) {
  int64_t stale = 0;
  // BTC's book changed at 1.0 s on the server and the change arrived at 9.5 s: 8.5 s without it.
  auto [late, why] = btc_late_or_quiet(1.0, stale);
  EXPECT_EQ(stale, 8500 * kMs);
  EXPECT_EQ(late, "silent") << why;
  EXPECT_NE(why.find("BTC book change late by 8.5s"), std::string::npos) << why;
  // BTC's book did not change for 9 s (a quiet coin), and the change at 9.49 s arrived at once: healthy.
  auto [quiet, why2] = btc_late_or_quiet(9.49, stale);
  EXPECT_EQ(stale, 10 * kMs);
  EXPECT_EQ(quiet, "ok") << why2;
}

TEST(Health, HugeHeightJumpAndRegressionThroughTheShard) {
  Fx fx;
  fx.cfg.channels = {kL2Book};
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = subscribe_l2(sh, start);
  constexpr int64_t kHuge = 1'000'000'000'000'000;
  const int64_t heights[] = {100, 101, kHuge, kHuge + 1, 50, 51};  // a jump of 10^15, then a restart's lower ones
  int64_t prev = 0, n = 0;
  for (int64_t h : heights) {
    ++n;
    sh.on_frame(slot, chained(audited(Kind::L2Book, "BTC", kT0 + n, h, 0, 0, 0), 1, n, prev), start + n * kMs, 100);
    prev = h;
  }
  sh.finish(start + 10 * kMs);
  const Stats s = sh.total_copy();
  const Health& h = s.health;
  EXPECT_EQ(h.missed_heights(), 0u);
  EXPECT_EQ(h.chain.ch[kL2Book].regressions, 1u);
  ASSERT_EQ(h.chain.regressions.size(), 1u);
  EXPECT_EQ(h.chain.regressions[0].from, kHuge + 1);
  EXPECT_EQ(h.chain.regressions[0].to, 50);
  EXPECT_EQ(s.ch[kL2Book].samples, 5u);
  const Verdict v = verdict(h, fx.cfg, 0);
  EXPECT_EQ(v.channel[kL2Book], "ok") << v.line;  // a regression is reported, not a failure
  EXPECT_NE(v.why[kL2Book].find("height went back from 1000000000000001 to 50: 1 times"), std::string::npos) << v.line;
  RunInfo info;
  info.coins = fx.cfg.coins;
  EXPECT_NE(format_table(s, fx.cfg, info).find("height_regressions=1 [l2Book BTC: height went back from"),
            std::string::npos);
}

TEST(Health, LossNoticeChannel) {
  EXPECT_EQ(loss_notice_channel(R"(hlbook: this connection fell behind; {"type":"l4Book","coin":"BTC"} lost blocks and continues from the newest)"), -1);
  EXPECT_EQ(loss_notice_channel(R"(hlbook: this connection fell behind; {"type":"bbo","coin":"BTC"} lost blocks)"), kBbo);
  EXPECT_EQ(loss_notice_channel("Too many subscriptions: at most 1000 per connection"), -2);
}

TEST(Audit, MissingZeroAndOutOfOrderStampsAreNotSampled) {
  Fx fx;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(kT0 * kMs);
  const int64_t b = kT0 * kMs;
  snapshots(sh, slot, {{Kind::L2Book, "BTC"}}, b);
  // good: 150 ms, 2 ms, 0.5 ms, recv 1 ms after sent
  sh.on_frame(slot, audited(Kind::L2Book, "BTC", kT0, 1, b + 150 * kMs, b + 152 * kMs, b + 152500000), b + 153500000, 1);
  // node stamp missing (left out / 0): stages 0 and 1 not sampled, nor the end-to-end or the added row
  sh.on_frame(slot, audited(Kind::L2Book, "BTC", kT0, 2, 0, b + 152 * kMs, b + 153 * kMs), b + 154 * kMs, 1);
  // read before node (out of order): stage 1 not sampled; stage 2 (read -> sent) still valid
  sh.on_frame(slot, audited(Kind::L2Book, "BTC", kT0, 3, b + 150 * kMs, b + 149 * kMs, b + 151 * kMs), b + 152 * kMs, 1);
  // sent after the client received it (clock skew): network stage not sampled
  sh.on_frame(slot, audited(Kind::L2Book, "BTC", kT0, 4, b + 150 * kMs, b + 151 * kMs, b + 160 * kMs), b + 155 * kMs, 1);
  const Stats total = sh.total_copy();
  const ChannelStats& cs = total.ch[kL2Book];
  EXPECT_EQ(cs.audited_frames, 4u);
  EXPECT_EQ(cs.stage_invalid[kExchToNode], 1u);
  EXPECT_EQ(cs.stage_invalid[kNodeToRead], 2u);
  EXPECT_EQ(cs.stage_invalid[kInServer], 0u);
  EXPECT_EQ(cs.stage_invalid[kSendToRecv], 1u);
  EXPECT_EQ(cs.stage[kExchToNode].count(), 3u);
  EXPECT_EQ(cs.stage[kNodeToRead].count(), 2u);
  EXPECT_EQ(cs.stage[kSendToRecv].count(), 3u);
  EXPECT_EQ(cs.audit_e2e.count(), 1u);
  EXPECT_EQ(cs.audit_e2e.max(), 153500u);
  EXPECT_EQ(cs.added.count(), 1u);
  // No stage ever holds the ~1.8e15 µs a 0 stamp would give.
  for (int k = 0; k < kNumStages; ++k) EXPECT_LT(cs.stage[k].max(), 200000u) << k;
}

TEST(Audit, StagesAddUpToTheEndToEndRowPerFrame) {
  Fx fx;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(kT0 * kMs);
  snapshots(sh, slot, {{Kind::L2Book, "ETH"}}, kT0 * kMs);
  for (int i = 0; i < 500; ++i) {
    // ns stamps with sub-µs parts, block time off the millisecond grid as on mainnet
    const int64_t block = (kT0 + i) * kMs + 123457 + i * 997;
    const int64_t node = block + 150 * kMs + i * 1013, read = node + 1 * kMs + 777 * i, sent = read + 250311 + i;
    const int64_t recv = sent + 900123 + i * 31;
    Frame f = frame(Kind::L2Book, "ETH", block / kMs);
    f.audit = Audit{true, 10 + i, block, node, read, read + 5, read + 9, sent};
    sh.on_frame(slot, f, recv, 1);
  }
  Stats s = sh.total_copy();
  ASSERT_EQ(s.trace.size(), 500u);
  for (const TraceRow& r : s.trace) {
    ASSERT_GE(r.e2e, 0);
    EXPECT_EQ(r.stage[0] + r.stage[1] + r.stage[2] + r.stage[3], r.e2e);
    EXPECT_GE(r.ms_row, r.e2e);  // time is block_ns truncated to the ms: the ms row is up to 1 ms longer
    EXPECT_LT(r.ms_row - r.e2e, 1000);
  }
  EXPECT_EQ(s.ch[kL2Book].audit_e2e.count(), 500u);
}

TEST(Hlog, CountsIndexMatchesHdrHistogramLayout) {
  // Every bucket of ours is one HdrHistogram bucket (lowest 1, 3 significant digits): both ends of a bucket map
  // to the same index, and consecutive buckets to consecutive indexes.
  size_t prev = 0;
  bool first = true;
  for (int c = 0; c < 30; ++c)
    for (uint64_t sub = 0; sub < Histogram::kSub; ++sub) {
      const uint64_t lo = Histogram::bucket_low(c, sub), hi = Histogram::bucket_high(c, sub);
      ASSERT_EQ(hdr_counts_index(lo), hdr_counts_index(hi)) << lo << ".." << hi;
      if (!first) {
        ASSERT_EQ(hdr_counts_index(lo), prev + 1) << lo;
      }
      prev = hdr_counts_index(lo);
      first = false;
    }
  EXPECT_EQ(hdr_counts_index(2047), 2047u);
  EXPECT_EQ(hdr_counts_index(2048), 2048u);
  EXPECT_EQ(hdr_counts_index(2049), 2048u);
  EXPECT_EQ(hdr_counts_index(4096), 3072u);
}
