// The SVG charts (no plotting library: plain SVG text). Each series is a <g class="series"> carrying
// data-chart, data-channel and data-count (its number of samples), so tests and scripts can check what is drawn.
//   (a) percentiles: latency (ms) against percentile on the HDR log axis (x = log10(1 / (1 - p))), p0..p99.99.
//   (b) stages: per channel, median and p99 bars; chain -> node in a panel of its own, hlbook's own stages
//       (node -> hlbook, inside hlbook, network) stacked in another, each on its own scale, so a simulated node's
//       150 ms does not flatten a 0.3 ms server.
//   (c) added: CDF of node write -> client receive on a fixed 0-10 ms axis (what the server and network add).
// Lines of (a) and (c) differ in dash, width and marker as well as colour, widest drawn first, so a series
// lying on another stays visible.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "report.hpp"

namespace lat {

namespace {

constexpr double W = 940, H = 540, L = 80, R = 240, T = 40, B = 70, PW = W - L - R, PH = H - T - B;
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

void begin(std::ostringstream& os, const std::string& title, const std::string& xlabel, const std::string& ylabel,
           bool frame = true) {
  os.setf(std::ios::fixed);
  os.precision(2);
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
     << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << ' ' << H
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n<title>" << xml_escape(title) << "</title>\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n"
     << "<text x=\"" << L + PW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
     << "</text>\n";
  if (frame)
    os << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << PW << "\" height=\"" << PH
       << "\" fill=\"none\" stroke=\"black\"/>\n";
  os << "<text x=\"" << L + PW / 2 << "\" y=\"" << H - 20
     << "\" text-anchor=\"middle\">" << xml_escape(xlabel) << "</text>\n<text x=\"20\" y=\"" << T + PH / 2
     << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " << T + PH / 2 << ")\">" << xml_escape(ylabel)
     << "</text>\n";
}

void xtick(std::ostringstream& os, double x, const std::string& label) {
  os << "<line x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << T + PH
     << "\" stroke=\"#ddd\"/>\n<text x=\"" << x << "\" y=\"" << T + PH + 18 << "\" text-anchor=\"middle\">"
     << xml_escape(label) << "</text>\n";
}

void ytick(std::ostringstream& os, double y, const std::string& label, double x0 = L, double w = PW) {
  os << "<line x1=\"" << x0 << "\" y1=\"" << y << "\" x2=\"" << x0 + w << "\" y2=\"" << y
     << "\" stroke=\"#eee\"/>\n<text x=\"" << x0 - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
     << xml_escape(label) << "</text>\n";
}

// How a line is drawn: its channel's colour; width, dash pattern and marker by its place in --channels, the
// first widest. Series are drawn in that order, so each thinner line stays visible on the wider ones below.
struct LineStyle {
  const char* color;
  double width;
  const char* dash;  // "" = solid
  int marker;        // 0 circle, 1 square, 2 triangle
};
LineStyle line_style(size_t index, int ch) {
  static const LineStyle styles[] = {{"", 5, "", 0}, {"", 3, "9 5", 1}, {"", 2, "2 4", 2}};
  LineStyle st = styles[index % 3];
  st.color = kColors[ch % 4];
  return st;
}

void marker(std::ostringstream& os, const LineStyle& st, double x, double y) {
  const double r = 4.5;
  if (st.marker == 0)
    os << "<circle class=\"marker\" cx=\"" << x << "\" cy=\"" << y << "\" r=\"" << r << "\" fill=\"white\" stroke=\""
       << st.color << "\" stroke-width=\"2\"/>\n";
  else if (st.marker == 1)
    os << "<rect class=\"marker\" x=\"" << x - r << "\" y=\"" << y - r << "\" width=\"" << 2 * r << "\" height=\"" << 2 * r
       << "\" fill=\"" << st.color << "\"/>\n";
  else
    os << "<polygon class=\"marker\" points=\"" << x << ',' << y - r - 1 << ' ' << x - r - 1 << ',' << y + r << ' '
       << x + r + 1 << ',' << y + r << "\" fill=\"" << st.color << "\"/>\n";
}

std::string stroke_attrs(const LineStyle& st) {
  std::ostringstream o;
  o << "fill=\"none\" stroke=\"" << st.color << "\" stroke-width=\"" << st.width << "\" stroke-linejoin=\"round\"";
  if (*st.dash) o << " stroke-dasharray=\"" << st.dash << "\"";
  return o.str();
}

// A legend entry drawn as the series is: same dash, width and marker.
void line_legend(std::ostringstream& os, int i, const LineStyle& st, const std::string& text) {
  const double ly = T + 20 + i * 22, x0 = L + PW + 12, x1 = L + PW + 52;
  os << "<line x1=\"" << x0 << "\" y1=\"" << ly << "\" x2=\"" << x1 << "\" y2=\"" << ly << "\" " << stroke_attrs(st)
     << "/>\n";
  marker(os, st, (x0 + x1) / 2, ly);
  os << "<text x=\"" << x1 + 6 << "\" y=\"" << ly + 4 << "\">" << xml_escape(text) << "</text>\n";
}


void legend(std::ostringstream& os, int i, const char* color, const std::string& text) {
  const double ly = T + 20 + i * 22;
  os << "<line x1=\"" << L + PW + 15 << "\" y1=\"" << ly << "\" x2=\"" << L + PW + 40 << "\" y2=\"" << ly
     << "\" stroke=\"" << color << "\" stroke-width=\"6\"/>\n<text x=\"" << L + PW + 46 << "\" y=\"" << ly + 4
     << "\">" << xml_escape(text) << "</text>\n";
}

// A round axis top (1, 2 or 5 x 10^k) at or above v, and its tick step.
double nice_top(double v, double& step) {
  if (v <= 0) v = 1;
  const double mag = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= v) {
      step = m * mag / (m == 2.0 ? 4 : 5);
      return m * mag;
    }
  step = mag * 2;
  return mag * 10;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

void y_axis(std::ostringstream& os, double top, double step, double x0 = L, double w = PW) {
  for (double v = 0; v <= top + step / 2; v += step) ytick(os, T + PH - v / top * PH, fmt(v), x0, w);
}

std::string ms_text(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, ms < 10 ? "%.3f" : "%.1f", ms);
  return b;
}

// Percentiles drawn on the HDR axis: every 10% to 90%, then 0.1-decade steps to 99.99%.
std::vector<double> plot_percentiles() {
  std::vector<double> ps;
  for (int p = 0; p < 90; p += 10) ps.push_back(p);
  for (int d = 10; d <= 40; ++d) ps.push_back(100.0 * (1.0 - std::pow(10.0, -d / 10.0)));
  return ps;
}

double hdr_x(double p) { return L + std::log10(1.0 / (1.0 - p / 100.0)) / 4.0 * PW; }

}  // namespace

std::string format_svg_percentiles(const Stats& s, const Config& cfg) {
  std::ostringstream os;
  begin(os, "Latency by percentile (receive - exchange time)", "percentile (HDR log axis)", "latency (ms)");
  double ymax = 0;
  for (int ch : cfg.channels) ymax = std::max(ymax, s.ch[ch].lat.percentile(99.99) / 1000.0);
  double step;
  const double top = nice_top(ymax, step);
  y_axis(os, top, step);
  for (auto [p, l] : {std::pair{0.0, "0%"}, {50.0, "50%"}, {90.0, "90%"}, {99.0, "99%"}, {99.9, "99.9%"},
                      {99.99, "99.99%"}})
    xtick(os, hdr_x(p), l);
  for (size_t i = 0; i < cfg.channels.size(); ++i) {
    const int ch = cfg.channels[i];
    const Histogram& h = s.ch[ch].lat;
    const LineStyle st = line_style(i, ch);
    os << "<g class=\"series\" data-chart=\"percentiles\" data-channel=\"" << channel_name(ch) << "\" data-count=\""
       << h.count() << "\">\n";
    line_legend(os, static_cast<int>(i), st, std::string(channel_name(ch)) + " (n=" + std::to_string(h.count()) + ")");
    if (h.count()) {
      auto y_of = [&](double p) { return T + PH - std::min((p == 0 ? h.min() : h.percentile(p)) / 1000.0, top) / top * PH; };
      os << "<polyline " << stroke_attrs(st) << " points=\"";
      bool first = true;
      for (double p : plot_percentiles()) {
        os << (first ? "" : " ") << hdr_x(p) << ',' << y_of(p);
        first = false;
      }
      os << "\"/>\n";
      // Markers at percentiles staggered per series, so coinciding curves still show every marker.
      const double shift = static_cast<double>(i % 3) * 0.1;
      for (double decades : {0.3, 1.0, 2.0, 3.0}) {
        const double p = 100.0 * (1.0 - std::pow(10.0, -(decades + shift)));
        marker(os, st, hdr_x(p), y_of(p));
      }
    }
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

namespace {

// One panel of the stage chart: a frame, its title and its own y axis.
void stage_panel(std::ostringstream& os, double x0, double w, double top, double step, const std::string& title) {
  os << "<rect x=\"" << x0 << "\" y=\"" << T << "\" width=\"" << w << "\" height=\"" << PH
     << "\" fill=\"none\" stroke=\"black\"/>\n<text x=\"" << x0 + w / 2 << "\" y=\"" << T - 6
     << "\" text-anchor=\"middle\" font-size=\"11\">" << xml_escape(title) << "</text>\n";
  y_axis(os, top, step, x0, w);
}

// A bar of stacked stage segments [k0, k1) at percentile p, bottom at the panel's axis, labelled with its total
// (and the percentile when `name_p`); returns its top.
double stage_bar(std::ostringstream& os, const ChannelStats& cs, int ch, double p, int k0, int k1, double x, double bw,
                 double top, bool name_p) {
  double y = T + PH, total = 0;
  for (int k = k0; k < k1; ++k) {
    const double ms = cs.stage[k].percentile(p) / 1000.0;
    const double hgt = std::min(ms, top) / top * PH;
    total += ms;
    y -= hgt;
    os << "<rect class=\"segment\" data-stage=\"" << xml_escape(stage_name(k)) << "\" data-count=\""
       << cs.stage[k].count() << "\" data-ms=\"" << ms << "\" x=\"" << x << "\" y=\"" << y << "\" width=\"" << bw
       << "\" height=\"" << hgt << "\" fill=\"" << kColors[k] << "\"><title>" << channel_name(ch) << " p"
       << static_cast<int>(p) << ' ' << xml_escape(stage_short_name(k)) << ": " << ms << " ms</title></rect>\n";
  }
  os << "<text x=\"" << x + bw / 2 << "\" y=\"" << y - 4 << "\" text-anchor=\"middle\" font-size=\""
     << (name_p ? "9\">p" + std::to_string(static_cast<int>(p)) + " " : "8\">") << ms_text(total) << "</text>\n";
  return y;
}

}  // namespace

std::string format_svg_stages(const Stats& s, const Config& cfg) {
  std::ostringstream os;
  begin(os, "Where the time goes: audit stages, median and p99", "channel / percentile",
        "latency (ms, sum of per-stage percentiles)", false);
  // Two panels, two scales: the chain -> node lag (the node's, often 100+ ms) apart from hlbook's own stages.
  const double cw = PW * 0.3, gap = 56, ox = L + cw + gap, ow = PW - cw - gap;
  double chain_max = 0, own_max = 0;
  for (int ch : cfg.channels) {
    chain_max = std::max(chain_max, s.ch[ch].stage[kExchToNode].percentile(99) / 1000.0);
    double sum = 0;
    for (int k = kNodeToRead; k < kNumStages; ++k) sum += s.ch[ch].stage[k].percentile(99) / 1000.0;
    own_max = std::max(own_max, sum);
  }
  double cstep, ostep;
  const double ctop = nice_top(chain_max, cstep), otop = nice_top(own_max, ostep);
  stage_panel(os, L, cw, ctop, cstep, "block_to_node_write, p50 | p99");
  stage_panel(os, ox, ow, otop, ostep, "node write -> client receive, p50 | p99 (stacked)");
  for (int k = 0; k < kNumStages; ++k) legend(os, k, kColors[k], stage_short_name(k));
  const double n = static_cast<double>(std::max<size_t>(1, cfg.channels.size()));
  const double cslot = cw / n, oslot = ow / n;
  const double cbw = std::min(30.0, cslot / 3), obw = std::min(60.0, oslot / 3);
  std::string note;
  for (size_t i = 0; i < cfg.channels.size(); ++i) {
    const int ch = cfg.channels[i];
    const ChannelStats& cs = s.ch[ch];
    const double ci = static_cast<double>(i);
    os << "<g class=\"series\" data-chart=\"stages\" data-channel=\"" << channel_name(ch) << "\" data-count=\""
       << cs.audited_frames << "\">\n";
    for (int b = 0; b < 2; ++b) {
      const double p = b == 0 ? 50 : 99;
      stage_bar(os, cs, ch, p, kExchToNode, kNodeToRead, L + cslot * ci + cslot / 2 + (b == 0 ? -cbw - 3 : 3), cbw,
                ctop, false);
      stage_bar(os, cs, ch, p, kNodeToRead, kNumStages, ox + oslot * ci + oslot / 2 + (b == 0 ? -obw - 4 : 4), obw,
                otop, true);
    }
    xtick(os, L + cslot * ci + cslot / 2, channel_name(ch));
    xtick(os, ox + oslot * ci + oslot / 2,
          std::string(channel_name(ch)) + " (n=" + std::to_string(cs.audited_frames) + ")");
    os << "</g>\n";
    note += (note.empty() ? "" : ", ") + std::string(channel_name(ch)) + " " +
            ms_text(cs.stage[kExchToNode].percentile(50) / 1000.0) + " ms";
  }
  os << "<text x=\"" << L << "\" y=\"" << H - 4 << "\" font-size=\"10\">"
     << xml_escape("block_to_node_write p50 (left, its own scale: the chain and the node, not hlbook): " + note) << "</text>\n";
  os << "</svg>\n";
  return os.str();
}

std::string format_svg_added(const Stats& s, const Config& cfg) {
  std::ostringstream os;
  begin(os, "Added latency: node write -> client receive (CDF)", "latency (ms)", "cumulative fraction of frames");
  constexpr double kMaxMs = 10;
  for (int i = 0; i <= 10; ++i) xtick(os, L + i / 10.0 * PW, fmt(i * kMaxMs / 10));
  for (int i = 0; i <= 10; ++i) ytick(os, T + (1.0 - i / 10.0) * PH, fmt(i / 10.0));
  for (size_t i = 0; i < cfg.channels.size(); ++i) {
    const int ch = cfg.channels[i];
    const Histogram& h = s.ch[ch].added;
    const LineStyle st = line_style(i, ch);
    uint64_t above = 0;
    for (auto [v, n] : h.buckets()) above += v > kMaxMs * 1000 ? n : 0;
    os << "<g class=\"series\" data-chart=\"added\" data-channel=\"" << channel_name(ch) << "\" data-count=\""
       << h.count() << "\">\n";
    line_legend(os, static_cast<int>(i), st,
                std::string(channel_name(ch)) + " n=" + std::to_string(h.count()) + " (" + std::to_string(above) +
                    " > 10 ms)");
    if (h.count()) {
      // Markers where the curve reaches 10, 30, 50, 70 and 90 %, staggered per series (+6 % each), so their
      // shapes tell coinciding curves apart.
      std::vector<std::pair<double, double>> marks;
      double fracs[] = {0.1, 0.3, 0.5, 0.7, 0.9};
      for (double& f : fracs) f = std::min(0.99, f + 0.06 * static_cast<double>(i % 3));
      size_t next = 0;
      os << "<polyline " << stroke_attrs(st) << " points=\"" << L << ',' << T + PH;
      uint64_t cum = 0;
      const double total = static_cast<double>(h.count());
      for (auto [v, n] : h.buckets()) {
        if (v > kMaxMs * 1000) break;
        cum += n;
        const double x = L + v / 1000.0 / kMaxMs * PW, y = T + (1.0 - cum / total) * PH;
        os << ' ' << x << ',' << y;
        for (; next < std::size(fracs) && cum / total >= fracs[next]; ++next) marks.emplace_back(x, y);
      }
      os << "\"/>\n";
      for (auto [x, y] : marks) marker(os, st, x, y);
    }
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::vector<std::string> svg_paths(const Config& cfg) {
  if (cfg.svg_path.empty()) return {};
  std::vector<std::string> out{cfg.svg_path};
  if (cfg.audit) {
    std::string stem = cfg.svg_path;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".svg") == 0) stem.resize(stem.size() - 4);
    out.push_back(stem + "-stages.svg");
    out.push_back(stem + "-added.svg");
  }
  return out;
}

}  // namespace lat
