// The SVG charts on synthetic frames: each chart's series and counts, the stage chart's chain -> node panel
// apart from hlbook's own stages (each on its own scale), and CDF lines that differ in dash, width and marker.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>

#include "report.hpp"
#include "stats.hpp"
#include "synthetic.hpp"
#include "xml_check.hpp"

using namespace lat;

namespace {

using test::frame;
using test::kMs;
using test::kT0;

struct Fx {
  Config cfg;
  CoinIndex coins{{"BTC", 0}, {"ETH", 1}};
  Fx() {
    cfg.url = "ws://x/ws";
    cfg.channels = {kL2Book, kTrades, kBbo};
    cfg.coins = {"BTC", "ETH"};
    cfg.audit = true;
  }
};

// Each subscription's first frame: a whole state, counted apart from the latency samples.
void snapshots(Shard& sh, int slot, std::initializer_list<std::pair<Kind, const char*>> subs, int64_t at_ns) {
  for (auto [k, coin] : subs) sh.on_frame(slot, frame(k, coin, at_ns / kMs - 5000), at_ns, 100);
}

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
  snapshots(sh, slot, {{Kind::L2Book, "BTC"}, {Kind::Bbo, "BTC"}}, kT0 * kMs);
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
  EXPECT_NE(st.find("data-stage=\"block_to_node_write\""), std::string::npos);
  Config no_audit = fx.cfg;
  no_audit.audit = false;
  no_audit.svg_path = "out/lat.svg";
  EXPECT_EQ(svg_paths(no_audit), (std::vector<std::string>{"out/lat.svg"}));
  fx.cfg.svg_path = "out/lat.svg";
  EXPECT_EQ(svg_paths(fx.cfg), (std::vector<std::string>{"out/lat.svg", "out/lat-stages.svg", "out/lat-added.svg"}));
}


namespace {

// l2Book and bbo frames with identical stages: the node 150 ms behind the chain, hlbook's own part ~0.3 ms.
Stats node_lagging() {
  Fx fx;
  fx.cfg.channels = {kL2Book, kBbo};
  Shard sh(fx.cfg, fx.coins, 0, nullptr);
  const int slot = sh.add_connection(kT0 * kMs);
  snapshots(sh, slot, {{Kind::L2Book, "BTC"}, {Kind::Bbo, "BTC"}}, kT0 * kMs);
  for (int i = 0; i < 200; ++i) {
    const int64_t block = (kT0 + i * 100) * kMs, node = block + 150 * kMs, read = node + 100000, sent = read + 150000;
    Frame f = frame(i % 2 ? Kind::Bbo : Kind::L2Book, "BTC", block / kMs);
    f.audit = Audit{true, i + 1, block, node, read, 0, 0, sent};
    sh.on_frame(slot, f, sent + 60000 + (i / 2 % 10) * 10000, 1);
  }
  return sh.total_copy();
}

// The value of attribute `name` in every element matching `tag_re`.
std::vector<std::string> attrs(const std::string& svg, const std::string& tag_re, const std::string& name) {
  std::vector<std::string> out;
  std::regex re("<" + tag_re + "[^>]*? " + name + "=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

}  // namespace

TEST(Charts, StageChartSetsTheNodeLagApart) {
  Fx fx;
  fx.cfg.channels = {kL2Book, kBbo};
  const std::string svg = format_svg_stages(node_lagging(), fx.cfg);
  std::string why;
  ASSERT_TRUE(xml_well_formed(svg, why)) << why;
  EXPECT_NE(svg.find(">block_to_node_write, p50 | p99<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">node write -&gt; client receive, p50 | p99 (stacked)<"), std::string::npos) << svg;
  EXPECT_NE(svg.find("block_to_node_write p50 (left, its own scale: the chain and the node, not hlbook): l2Book 150.0 ms, bbo 150.0 ms"),
            std::string::npos)
      << svg;
  // hlbook's own stages fill their panel's scale (0.5 ms), instead of a sliver under 150 ms.
  std::regex seg(R"re(<rect class="segment" data-stage="([^"]+)"[^>]*? height="([0-9.]+)")re");
  double own = 0, chain = 0;
  int own_bars = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), seg); it != std::sregex_iterator(); ++it) {
    const double hgt = std::stod((*it)[2]);
    if ((*it)[1] == "block_to_node_write") {
      chain = std::max(chain, hgt);
    } else {
      own += hgt;
      ++own_bars;
    }
  }
  ASSERT_EQ(own_bars, 2 * 2 * 3);  // 2 channels x (p50, p99) x 3 stages
  EXPECT_GT(own / 4, 200.0);       // each stacked bar (of 4) > 200 px of the 430 px panel
  EXPECT_GT(chain, 200.0);
}

TEST(Charts, CdfLinesCanBeToldApart) {
  Fx fx;
  fx.cfg.channels = {kL2Book, kBbo};
  const Stats s = node_lagging();  // both channels have the same added latency: their curves coincide
  if (const char* dir = std::getenv("LATENCY_TEST_SHOW")) {  // keep the charts there for a look in a browser
    for (auto [name, svg] : {std::pair{"added.svg", format_svg_added(s, fx.cfg)},
                             {"percentiles.svg", format_svg_percentiles(s, fx.cfg)},
                             {"stages.svg", format_svg_stages(s, fx.cfg)}})
      std::ofstream(std::string(dir) + "/" + name) << svg;
  }
  for (const std::string& svg : {format_svg_added(s, fx.cfg), format_svg_percentiles(s, fx.cfg)}) {
    std::string why;
    ASSERT_TRUE(xml_well_formed(svg, why)) << why;
    const auto widths = attrs(svg, "polyline", "stroke-width");
    ASSERT_EQ(widths.size(), 2u);
    EXPECT_NE(widths[0], widths[1]);
    EXPECT_GT(std::stod(widths[0]), std::stod(widths[1]));  // the first drawn is the widest: the next stays visible
    EXPECT_EQ(attrs(svg, "polyline", "stroke-dasharray").size(), 1u);  // l2Book solid, bbo dashed
    // Markers on the curves and in the legend: circles for l2Book, squares for bbo.
    EXPECT_GE(attrs(svg, "circle", "class").size(), 5u);
    EXPECT_GE(attrs(svg, "rect class=\"marker\"", "width").size(), 5u);
    // The legend draws each line as the series is drawn.
    EXPECT_EQ(attrs(svg, "line", "stroke-dasharray").size(), 1u);
  }
}
