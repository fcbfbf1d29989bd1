// Feed health and audit validation on synthetic frames (no sockets): silence, missed heights, loss notices,
// missing acks, downtime, the verdict; audit stamps that are missing, zero or out of order; the audit end-to-end
// row adding up; the SVG charts' series and counts; HdrHistogram index geometry of the --hlog writer.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "hlog.hpp"
#include "report.hpp"
#include "stats.hpp"
#include "xml_check.hpp"

using namespace lat;

namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kT0 = 1'790'000'000'000;  // exchange ms

Frame frame(Kind k, const std::string& coin, int64_t t_ms) {
  Frame f;
  f.kind = k;
  f.samples.push_back(Sample{coin, t_ms});
  f.nsamples = 1;
  return f;
}

Frame audited(Kind k, const std::string& coin, int64_t t_ms, int64_t height, int64_t node_ns, int64_t read_ns,
              int64_t sent_ns) {
  Frame f = frame(k, coin, t_ms);
  f.audit = Audit{true, height, t_ms * kMs, node_ns, read_ns, 0, 0, sent_ns};
  return f;
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

TEST(Health, SilenceHeightsNoticesAcksDowntime) {
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
  // l2Book heights 100..110 with 104 and 107-108 missing; 109 arrives before 106 (reordered, not missing).
  int64_t t = start;
  for (int64_t h : {100, 101, 102, 103, 105, 109, 106, 110}) {
    t += 500 * kMs;
    sh.on_frame(slot, audited(Kind::L2Book, h % 2 ? "BTC" : "ETH", t / kMs - 10, h, 0, 0, 0), t, 100);
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
  EXPECT_EQ(h.missing_heights, 3u);
  ASSERT_EQ(h.missing_ranges.size(), 2u);
  EXPECT_EQ(h.missing_ranges[0], (std::pair<int64_t, int64_t>{104, 104}));
  EXPECT_EQ(h.missing_ranges[1], (std::pair<int64_t, int64_t>{107, 108}));
  EXPECT_EQ(h.audited_heights, 8u);
  EXPECT_EQ(h.loss_notices[kTrades], 1u);
  EXPECT_EQ(h.loss_notices[kL2Book], 0u);
  EXPECT_EQ(h.acks_expected[kTrades], 4u);
  EXPECT_EQ(h.acks_missing[kTrades], 1u);
  EXPECT_EQ(h.acks_missing[kL2Book], 0u);
  EXPECT_EQ(h.downtime_ns, 3000 * kMs);
  // l2Book: last frame at start + 4 s, run ended at start + 9.5 s: 5.5 s silent despite the pongs.
  EXPECT_EQ(h.max_silence_ns[kL2Book], 5500 * kMs);
  // trades: nothing until start + 8.5 s.
  EXPECT_EQ(h.max_silence_ns[kTrades], 8500 * kMs);

  Verdict v = verdict(h, fx.cfg, 1);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.channel[kL2Book], "silent+lost");
  EXPECT_EQ(v.channel[kTrades], "silent+lost");
  EXPECT_NE(v.line.find("3 missed heights"), std::string::npos) << v.line;
  EXPECT_NE(v.line.find("1 subscriptions not acknowledged"), std::string::npos) << v.line;
  fx.cfg.max_silence_s = 10;
  EXPECT_EQ(verdict(h, fx.cfg, 1).channel[kTrades], "lost");
}

TEST(Health, HealthyFeedIsOk) {
  Fx fx;
  fx.cfg.channels = {kL2Book};
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(start);
  sh.on_subscribed(slot, start);
  Frame ack;
  ack.kind = Kind::SubAck;
  ack.ack_channel = kL2Book;
  for (int i = 0; i < 2; ++i) sh.on_frame(slot, ack, start, 10);
  for (int i = 1; i <= 20; ++i)
    sh.on_frame(slot, audited(Kind::L2Book, "BTC", kT0 + i * 400, 500 + i, 0, 0, 0), start + i * 400 * kMs, 100);
  sh.finish(start + 8400 * kMs);
  Stats s = sh.total_copy();
  Verdict v = verdict(s.health, fx.cfg, 0);
  EXPECT_TRUE(v.healthy) << v.line;
  EXPECT_EQ(v.channel[kL2Book], "ok");
  EXPECT_EQ(s.health.missing_heights, 0u);
  EXPECT_EQ(s.health.max_silence_ns[kL2Book], 400 * kMs);
  RunInfo info;
  info.coins = fx.cfg.coins;
  const std::string table = format_table(s, fx.cfg, info);
  EXPECT_EQ(table.substr(table.rfind("verdict:")), "verdict: l2Book=ok -> HEALTHY\n") << table;
}

namespace {

// l2Book frames: ETH fresh every 0.5 s for 10 s; BTC at 0.5 s, then once more at 9.5 s for a block `btc_block_s`
// after the start. Returns the verdict's l2Book entry.
std::pair<std::string, std::string> btc_late_or_quiet(double btc_block_s, int64_t& stale_ns) {
  Fx fx;
  fx.cfg.channels = {kL2Book};
  const int64_t start = kT0 * kMs;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(start);
  sh.on_subscribed(slot, start);
  Frame ack;
  ack.kind = Kind::SubAck;
  ack.ack_channel = kL2Book;
  for (int i = 0; i < 2; ++i) sh.on_frame(slot, ack, start, 10);
  auto send = [&](const char* coin, int64_t block_ms_after, int64_t recv_ms_after, int64_t height) {
    Frame f = frame(Kind::L2Book, coin, kT0 + block_ms_after);
    f.audit = Audit{true, height, (kT0 + block_ms_after) * kMs, 0, 0, 0, 0, 0};
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

namespace {

// (chart, channel) -> data-count of every <g class="series"> in an SVG.
std::map<std::pair<std::string, std::string>, uint64_t> series(const std::string& svg) {
  std::map<std::pair<std::string, std::string>, uint64_t> out;
  std::regex re(R"re(<g class="series" data-chart="([a-z]+)" data-channel="([A-Za-z0-9]+)" data-count="([0-9]+)">)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out[{(*it)[1], (*it)[2]}] = std::stoull((*it)[3]);
  return out;
}

}  // namespace

TEST(Charts, EachChartHasItsSeriesWithTheirCounts) {
  Fx fx;
  fx.cfg.channels = {kL2Book, kTrades, kBbo};
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(kT0 * kMs);
  for (int i = 0; i < 300; ++i) {
    const int64_t block = (kT0 + i * 100) * kMs;
    const Kind k = i % 3 == 0 ? Kind::Bbo : Kind::L2Book;
    Frame f = frame(k, "BTC", block / kMs);
    // every 10th frame lacks its node stamp: not in the added-latency chart
    f.audit = Audit{true, i + 1, block, i % 10 ? block + 160 * kMs : 0, block + 161 * kMs, 0, 0, block + 162 * kMs};
    sh.on_frame(slot, f, block + 163 * kMs + i * 10000, 1);
  }
  Stats s = sh.total_copy();
  const uint64_t l2 = 200, bbo = 100;
  auto a = series(format_svg_percentiles(s, fx.cfg));
  auto b = series(format_svg_stages(s, fx.cfg));
  auto c = series(format_svg_added(s, fx.cfg));
  using K = std::pair<std::string, std::string>;
  EXPECT_EQ(a, (std::map<K, uint64_t>{{{"percentiles", "l2Book"}, l2}, {{"percentiles", "trades"}, 0}, {{"percentiles", "bbo"}, bbo}}));
  EXPECT_EQ(b, (std::map<K, uint64_t>{{{"stages", "l2Book"}, l2}, {{"stages", "trades"}, 0}, {{"stages", "bbo"}, bbo}}));
  EXPECT_EQ(c, (std::map<K, uint64_t>{{{"added", "l2Book"}, s.ch[kL2Book].added.count()}, {{"added", "trades"}, 0}, {{"added", "bbo"}, s.ch[kBbo].added.count()}}));
  EXPECT_EQ(s.ch[kL2Book].added.count() + s.ch[kBbo].added.count(), 270u);
  for (const std::string& svg : {format_svg_percentiles(s, fx.cfg), format_svg_stages(s, fx.cfg), format_svg_added(s, fx.cfg)}) {
    std::string why;
    EXPECT_TRUE(xml_well_formed(svg, why)) << why;
  }
  // The stages chart stacks four segments per bar, two bars (p50, p99) per channel.
  const std::string st = format_svg_stages(s, fx.cfg);
  size_t segs = 0;
  for (size_t pos = 0; (pos = st.find("class=\"segment\"", pos)) != std::string::npos; ++pos) ++segs;
  EXPECT_EQ(segs, 3u * 2 * kNumStages);
  EXPECT_NE(st.find("data-stage=\"chain -&gt; node\""), std::string::npos);
  Config no_audit = fx.cfg;
  no_audit.audit = false;
  no_audit.svg_path = "out/lat.svg";
  EXPECT_EQ(svg_paths(no_audit), (std::vector<std::string>{"out/lat.svg"}));
  fx.cfg.svg_path = "out/lat.svg";
  EXPECT_EQ(svg_paths(fx.cfg), (std::vector<std::string>{"out/lat.svg", "out/lat-stages.svg", "out/lat-added.svg"}));
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
