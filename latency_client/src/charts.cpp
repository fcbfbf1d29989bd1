// The SVG charts (no plotting library: plain SVG text). Each series is a <g class="series"> carrying
// data-chart, data-channel and data-count (its number of samples), so tests and scripts can check what is drawn.
//   (a) percentiles: latency (ms) against percentile on the HDR log axis (x = log10(1 / (1 - p))), p0..p99.99.
//   (b) stages: per channel, a stacked bar of each audit stage's median and one of each stage's p99.
//   (c) added: CDF of node write -> client receive on a fixed 0-10 ms axis (what the server and network add).
#include <algorithm>
#include <cmath>
#include <cstdio>
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

void begin(std::ostringstream& os, const std::string& title, const std::string& xlabel, const std::string& ylabel) {
  os.setf(std::ios::fixed);
  os.precision(2);
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W
     << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << ' ' << H
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n<title>" << xml_escape(title) << "</title>\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n"
     << "<text x=\"" << L + PW / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
     << "</text>\n<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << PW << "\" height=\"" << PH
     << "\" fill=\"none\" stroke=\"black\"/>\n<text x=\"" << L + PW / 2 << "\" y=\"" << H - 20
     << "\" text-anchor=\"middle\">" << xml_escape(xlabel) << "</text>\n<text x=\"20\" y=\"" << T + PH / 2
     << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " << T + PH / 2 << ")\">" << xml_escape(ylabel)
     << "</text>\n";
}

void xtick(std::ostringstream& os, double x, const std::string& label) {
  os << "<line x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << T + PH
     << "\" stroke=\"#ddd\"/>\n<text x=\"" << x << "\" y=\"" << T + PH + 18 << "\" text-anchor=\"middle\">"
     << xml_escape(label) << "</text>\n";
}

void ytick(std::ostringstream& os, double y, const std::string& label) {
  os << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << L + PW << "\" y2=\"" << y
     << "\" stroke=\"#eee\"/>\n<text x=\"" << L - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
     << xml_escape(label) << "</text>\n";
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

void y_axis(std::ostringstream& os, double top, double step) {
  for (double v = 0; v <= top + step / 2; v += step) ytick(os, T + PH - v / top * PH, fmt(v));
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
  int li = 0;
  for (int ch : cfg.channels) {
    const Histogram& h = s.ch[ch].lat;
    const char* col = kColors[ch % 4];
    os << "<g class=\"series\" data-chart=\"percentiles\" data-channel=\"" << channel_name(ch) << "\" data-count=\""
       << h.count() << "\">\n";
    legend(os, li++, col, std::string(channel_name(ch)) + " (n=" + std::to_string(h.count()) + ")");
    if (h.count()) {
      os << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"";
      bool first = true;
      for (double p : plot_percentiles()) {
        const double ms = (p == 0 ? h.min() : h.percentile(p)) / 1000.0;
        os << (first ? "" : " ") << hdr_x(p) << ',' << T + PH - std::min(ms, top) / top * PH;
        first = false;
      }
      os << "\"/>\n";
    }
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string format_svg_stages(const Stats& s, const Config& cfg) {
  std::ostringstream os;
  begin(os, "Where the time goes: audit stages, median and p99 (stacked)", "channel / percentile",
        "latency (ms, sum of per-stage percentiles)");
  double ymax = 0;
  for (int ch : cfg.channels) {
    double sum = 0;
    for (int k = 0; k < kNumStages; ++k) sum += s.ch[ch].stage[k].percentile(99) / 1000.0;
    ymax = std::max(ymax, sum);
  }
  double step;
  const double top = nice_top(ymax, step);
  y_axis(os, top, step);
  for (int k = 0; k < kNumStages; ++k) legend(os, k, kColors[k], stage_short_name(k));
  const double slot = PW / static_cast<double>(std::max<size_t>(1, cfg.channels.size()));
  const double bw = std::min(60.0, slot / 3);
  for (size_t i = 0; i < cfg.channels.size(); ++i) {
    const int ch = cfg.channels[i];
    const ChannelStats& cs = s.ch[ch];
    os << "<g class=\"series\" data-chart=\"stages\" data-channel=\"" << channel_name(ch) << "\" data-count=\""
       << cs.audited_frames << "\">\n";
    for (int b = 0; b < 2; ++b) {
      const double p = b == 0 ? 50 : 99;
      const double x = L + slot * static_cast<double>(i) + slot / 2 + (b == 0 ? -bw - 4 : 4);
      double y = T + PH;
      for (int k = 0; k < kNumStages; ++k) {
        const double ms = cs.stage[k].percentile(p) / 1000.0;
        const double hgt = ms / top * PH;
        y -= hgt;
        os << "<rect class=\"segment\" data-stage=\"" << xml_escape(stage_short_name(k)) << "\" data-count=\""
           << cs.stage[k].count() << "\" data-ms=\"" << ms << "\" x=\"" << x << "\" y=\"" << y << "\" width=\"" << bw
           << "\" height=\"" << hgt << "\" fill=\"" << kColors[k] << "\"><title>" << channel_name(ch) << " p" << p
           << ' ' << xml_escape(stage_short_name(k)) << ": " << ms << " ms</title></rect>\n";
      }
      os << "<text x=\"" << x + bw / 2 << "\" y=\"" << y - 4 << "\" text-anchor=\"middle\" font-size=\"10\">"
         << (b == 0 ? "p50" : "p99") << "</text>\n";
    }
    xtick(os, L + slot * static_cast<double>(i) + slot / 2,
          std::string(channel_name(ch)) + " (n=" + std::to_string(cs.audited_frames) + ")");
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string format_svg_added(const Stats& s, const Config& cfg) {
  std::ostringstream os;
  begin(os, "Added latency: node write -> client receive (CDF)", "latency (ms)", "cumulative fraction of frames");
  constexpr double kMaxMs = 10;
  for (int i = 0; i <= 10; ++i) xtick(os, L + i / 10.0 * PW, fmt(i * kMaxMs / 10));
  for (int i = 0; i <= 10; ++i) ytick(os, T + (1.0 - i / 10.0) * PH, fmt(i / 10.0));
  int li = 0;
  for (int ch : cfg.channels) {
    const Histogram& h = s.ch[ch].added;
    const char* col = kColors[ch % 4];
    uint64_t above = 0;
    for (auto [v, n] : h.buckets()) above += v > kMaxMs * 1000 ? n : 0;
    os << "<g class=\"series\" data-chart=\"added\" data-channel=\"" << channel_name(ch) << "\" data-count=\""
       << h.count() << "\">\n";
    legend(os, li++, col,
           std::string(channel_name(ch)) + " n=" + std::to_string(h.count()) + " (" + std::to_string(above) +
               " > 10 ms)");
    if (h.count()) {
      os << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"" << L << ',' << T + PH;
      uint64_t cum = 0;
      const double total = static_cast<double>(h.count());
      for (auto [v, n] : h.buckets()) {
        if (v > kMaxMs * 1000) break;
        cum += n;
        os << ' ' << L + v / 1000.0 / kMaxMs * PW << ',' << T + (1.0 - cum / total) * PH;
      }
      os << "\"/>\n";
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
