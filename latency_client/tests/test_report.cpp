// Shard semantics (clamping, gaps, warmup, audit split, per-coin) and the report writers (table, JSON, CSV, SVG)
// on synthetic frames, plus CLI parsing. Deterministic: no sockets, no clocks.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <sstream>

#include "cli.hpp"
#include "report.hpp"
#include "stats.hpp"
#include "xml_check.hpp"

using namespace lat;

namespace {

Frame make(Kind k, std::vector<std::pair<std::string, int64_t>> s) {
  Frame f;
  f.kind = k;
  for (auto& [c, t] : s) f.samples.push_back(Sample{c, t});
  f.nsamples = f.samples.size();
  return f;
}

struct Fixture {
  Config cfg;
  CoinIndex coins{{"BTC", 0}, {"ETH", 1}};
  Fixture() {
    cfg.url = "ws://x/ws";
    cfg.channels = {kL2Book, kTrades, kBbo};
    cfg.coins = {"BTC", "ETH"};
    cfg.per_coin = true;
    cfg.audit = true;
  }
};

constexpr int64_t kMs = 1000000;  // ns per ms

}  // namespace

TEST(Shard, LatencyClampGapsWarmupAudit) {
  Fixture fx;
  const int64_t t0 = 1'790'000'000'000;  // exchange ms
  Shard sh(fx.cfg, fx.coins, /*warmup_end_ns=*/(t0 + 100) * kMs, nullptr);
  int slot = sh.add_connection(0);
  // Each subscription's first frame is a snapshot: counted apart, no sample, no gap baseline.
  for (auto [k, c] : {std::pair{Kind::L2Book, "BTC"}, {Kind::L2Book, "ETH"}, {Kind::Trades, "ETH"}, {Kind::Bbo, "BTC"}})
    sh.on_frame(slot, make(k, {{c, t0 - 60000}}), (t0 + 200) * kMs, 100);
  // During warmup: discarded, but gap state advances.
  sh.on_frame(slot, make(Kind::L2Book, {{"BTC", t0}}), (t0 + 50) * kMs, 100);
  // 30 ms latency
  sh.on_frame(slot, make(Kind::L2Book, {{"BTC", t0 + 1000}}), (t0 + 1030) * kMs, 100);
  // gap: 3 s later than previous BTC l2Book time (threshold 2 s); latency 10 ms
  sh.on_frame(slot, make(Kind::L2Book, {{"BTC", t0 + 4000}}), (t0 + 4010) * kMs, 100);
  // negative latency (clock skew): clamped and counted
  sh.on_frame(slot, make(Kind::L2Book, {{"ETH", t0 + 5000}}), (t0 + 4995) * kMs, 100);
  // trades: 3 samples, one unknown coin
  sh.on_frame(slot, make(Kind::Trades, {{"ETH", t0 + 5000}, {"ETH", t0 + 5001}, {"DOGE", t0 + 5001}}),
              (t0 + 5021) * kMs, 100);
  Frame b = make(Kind::Bbo, {{"BTC", t0 + 6000}});
  b.audit = Audit{true, 9, (t0 + 6000) * kMs, (t0 + 6002) * kMs, (t0 + 6003) * kMs, 0, 0, (t0 + 6004) * kMs};
  sh.on_frame(slot, b, (t0 + 6010) * kMs, 100);
  sh.on_frame(slot, make(Kind::Pong, {}), 0, 10);
  sh.on_frame(slot, make(Kind::SubAck, {}), 0, 10);
  sh.on_frame(slot, make(Kind::Error, {}), 0, 10);
  sh.on_frame(slot, make(Kind::Bad, {}), 0, 10);
  sh.on_bad_frame(3);
  sh.on_disconnect(slot, 0, false);
  sh.on_reconnect();

  Stats s = sh.total_copy();
  EXPECT_EQ(s.c.warmup_discarded, 1u);
  EXPECT_EQ(s.ch[kL2Book].snapshot_frames, 2u);
  EXPECT_EQ(s.ch[kTrades].snapshot_frames, 1u);
  EXPECT_EQ(s.ch[kBbo].snapshot_frames, 1u);
  EXPECT_EQ(s.ch[kL2Book].samples, 3u);
  EXPECT_EQ(s.ch[kL2Book].gaps, 1u);
  EXPECT_EQ(s.ch[kL2Book].negatives, 1u);
  EXPECT_EQ(s.ch[kL2Book].lat.max(), 30000u);
  EXPECT_EQ(s.ch[kL2Book].lat.percentile(1), 0u);  // the clamped sample
  EXPECT_EQ(s.ch[kTrades].samples, 2u);
  EXPECT_EQ(s.ch[kTrades].lat.percentile(100), 21000u);
  EXPECT_EQ(s.c.unknown_coin, 1u);
  EXPECT_EQ(s.ch[kBbo].audited_frames, 1u);
  EXPECT_EQ(s.ch[kBbo].stage[kExchToNode].max(), 2000u);
  EXPECT_EQ(s.ch[kBbo].stage[kNodeToRead].max(), 1000u);
  EXPECT_EQ(s.ch[kBbo].stage[kInServer].max(), 1000u);
  EXPECT_EQ(s.ch[kBbo].stage[kSendToRecv].max(), 6000u);
  EXPECT_EQ(s.c.pongs, 1u);
  EXPECT_EQ(s.c.acks, 1u);
  EXPECT_EQ(s.c.errors, 1u);
  EXPECT_EQ(s.c.bad, 2u);
  EXPECT_EQ(s.c.disconnects, 1u);
  EXPECT_EQ(s.c.reconnects, 1u);
  EXPECT_EQ(s.coin[0][kL2Book].count(), 2u);
  EXPECT_EQ(s.coin[1][kL2Book].count(), 1u);

  // Windows: taking one resets it, totals keep everything.
  Stats w = sh.take_window();
  EXPECT_EQ(w.ch[kL2Book].samples, 3u);
  EXPECT_EQ(sh.take_window().ch[kL2Book].samples, 0u);
  EXPECT_EQ(sh.total_copy().ch[kL2Book].samples, 3u);
}

TEST(Report, TableJsonCsvSvg) {
  Fixture fx;
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  int slot = sh.add_connection(1'790'000'000'000 * kMs);
  for (auto [k, c] : {std::pair{Kind::L2Book, "BTC"}, {Kind::L2Book, "ETH"}, {Kind::Bbo, "BTC"}, {Kind::Bbo, "ETH"}})
    sh.on_frame(slot, make(k, {{c, 1'789'999'000'000}}), 1'790'000'000'000 * kMs, 100);
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = 1'790'000'000'000 + i * 500;
    sh.on_frame(slot, make(i % 2 ? Kind::L2Book : Kind::Bbo, {{i % 3 ? "BTC" : "ETH", t}}),
                (t + 20 + i % 61) * kMs + 123456, 200);
  }
  Stats s = sh.total_copy();
  RunInfo info;
  info.url = "ws://127.0.0.1:1/ws?audit=1";
  info.coins = fx.cfg.coins;

  std::string table = format_table(s, fx.cfg, info);
  EXPECT_NE(table.find("channel                                       count        p25        p50"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("(ms)"), std::string::npos);
  EXPECT_NE(table.find("nearest-rank"), std::string::npos);
  EXPECT_NE(table.find("l2Book BTC"), std::string::npos);
  EXPECT_NE(table.find("read_to_sent"), std::string::npos);
  EXPECT_NE(table.find("disconnects=0"), std::string::npos);

  std::string json = format_json(s, fx.cfg, info);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(doc["unit"]), "ms");
  auto chans = doc["channels"].get_array();
  ASSERT_EQ(chans.size(), 3u);
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["count"]), 500u);
  EXPECT_GT(double(doc["channels"].at(0)["p50"]), 20.0);
  EXPECT_EQ(doc["channels"].at(0)["stages"].get_array().size(), 4u);
  EXPECT_EQ(uint64_t(doc["channels"].at(0)["snapshot_frames"]), 2u);
  for (const char* key : {"conflated", "lost_frames", "dropped_heights", "height_regressions", "lost_ranges_total"})
    EXPECT_EQ(uint64_t(doc["channels"].at(0)[key]), 0u) << key;
  EXPECT_EQ(doc["channels"].at(0)["lost_ranges"].get_array().size(), 0u);
  EXPECT_EQ(std::string_view(doc["result"]), "UNVERIFIED");  // --audit, and no frame carried the chain
  EXPECT_EQ(int64_t(doc["exit_code"]), 4);
  EXPECT_FALSE(bool(doc["healthy"]));
  EXPECT_EQ(uint64_t(doc["health"]["missed_heights"]), 0u);
  EXPECT_EQ(doc["not_checked"].get_array().size(), 1u);

  std::ostringstream csv;
  write_csv_header(csv);
  write_csv_window(csv, 1.0, 2.0, s, fx.cfg);
  std::string c = csv.str();
  EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 4);
  EXPECT_NE(c.find("1.000,2.000,l2Book,500,"), std::string::npos) << c;

  std::string svg = format_svg_percentiles(s, fx.cfg);
  std::string why;
  EXPECT_TRUE(xml_well_formed(svg, why)) << why;
  size_t polylines = 0;
  for (size_t pos = 0; (pos = svg.find("<polyline", pos)) != std::string::npos; ++pos) ++polylines;
  EXPECT_EQ(polylines, 2u);  // trades has no samples
  EXPECT_NE(svg.find("percentile (HDR log axis)"), std::string::npos);
  EXPECT_NE(svg.find(">99.99%<"), std::string::npos);
}

TEST(Report, Ms3) {
  EXPECT_EQ(ms3(0), "0.000");
  EXPECT_EQ(ms3(1), "0.001");
  EXPECT_EQ(ms3(12345678), "12345.678");
}

TEST(XmlCheck, RejectsBroken) {
  std::string why;
  EXPECT_FALSE(xml_well_formed("<svg><g></svg>", why));
  EXPECT_FALSE(xml_well_formed("<svg a=\"1></svg>", why));
  EXPECT_FALSE(xml_well_formed("<svg>a & b</svg>", why));
  EXPECT_TRUE(xml_well_formed("<?xml version=\"1.0\"?><svg><line/><text>a &amp; b</text></svg>", why));
}

TEST(Cli, ParsesAllFlags) {
  Config c;
  auto r = parse_cli({"--url", "ws://h:1/ws", "--coins", "BTC,ETH", "--channels", "l2Book,trades,bbo", "--conns",
                      "4", "--duration", "3", "--warmup", "1.5", "--per-coin", "--json", "a.json", "--csv", "a.csv",
                      "--interval", "0.5", "--svg", "a.svg", "--compress", "--audit", "--gap", "5"},
                     c);
  ASSERT_EQ(r.action, CliAction::Run) << r.error;
  EXPECT_EQ(c.coins, (std::vector<std::string>{"BTC", "ETH"}));
  EXPECT_EQ(c.channels, (std::vector<int>{kL2Book, kTrades, kBbo}));
  EXPECT_EQ(c.conns, 4);
  EXPECT_DOUBLE_EQ(c.warmup_s, 1.5);
  EXPECT_TRUE(c.per_coin && c.compress && c.audit);
  EXPECT_DOUBLE_EQ(c.gap_s, 5);
  EXPECT_DOUBLE_EQ(c.max_silence_s, 5);
  EXPECT_FALSE(c.allow_loss);
  Config e;
  ASSERT_EQ(parse_cli({"--url", "ws://h:1/ws", "--coins", "BTC", "--channels", "bbo", "--max-silence", "2.5",
                       "--idle", "7", "--ping", "0.5", "--allow-loss", "--hlog", "x.hlog"},
                      e)
                .action,
            CliAction::Run);
  EXPECT_DOUBLE_EQ(e.max_silence_s, 2.5);
  EXPECT_DOUBLE_EQ(e.idle_s, 7);
  EXPECT_DOUBLE_EQ(e.ping_s, 0.5);
  EXPECT_TRUE(e.allow_loss);
  EXPECT_EQ(e.hlog_path, "x.hlog");
  Config d;
  EXPECT_EQ(parse_cli({"--url", "ws://h:1/ws", "--coins", "all", "--channels", "bbo"}, d).action, CliAction::Run);
  EXPECT_TRUE(d.all_coins);
  EXPECT_DOUBLE_EQ(d.duration_s, 10);
}

TEST(Cli, RejectsBadFlags) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--url", "http://h/ws", "--coins", "BTC", "--channels", "bbo"},
      {"--url", "ws://h/ws", "--channels", "bbo"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "l3Book"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "bbo", "--conns", "0"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "bbo", "--duration", "x"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "bbo", "--csv", "f"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "bbo", "--bogus"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "bbo", "--max-silence", "0"},
      {"--url", "ws://h/ws", "--coins", "BTC", "--channels", "bbo", "--hlog"},
      {"--url"},
  };
  for (auto& a : bad) {
    Config c;
    auto r = parse_cli(a, c);
    EXPECT_EQ(r.action, CliAction::Error);
    EXPECT_FALSE(r.error.empty());
    EXPECT_EQ(r.error.find('\n'), std::string::npos);
  }
  Config c;
  EXPECT_EQ(parse_cli({"--help"}, c).action, CliAction::Help);
  for (const char* flag : {"--url", "--coins", "--channels", "--conns", "--duration", "--warmup", "--per-coin",
                           "--json", "--csv", "--interval", "--svg", "--compress", "--audit", "--gap", "--help",
                           "--max-silence", "--idle", "--ping", "--allow-loss", "--hlog"})
    EXPECT_NE(help_text().find(flag), std::string::npos) << flag;
}
