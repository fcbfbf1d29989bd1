// Table / JSON / CSV / SVG writers over merged Stats; see report.hpp. Everything here runs off the hot path.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace lat {

std::string ms3(uint64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu.%03llu", static_cast<unsigned long long>(us / 1000),
                static_cast<unsigned long long>(us % 1000));
  return buf;
}

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o;
}

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

void table_row(std::ostream& os, const std::string& label, const Histogram& h) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-40s %10llu", label.c_str(), static_cast<unsigned long long>(h.count()));
  os << buf;
  for (double p : kPercentiles) {
    std::snprintf(buf, sizeof buf, " %10s", ms3(h.percentile(p)).c_str());
    os << buf;
  }
  std::snprintf(buf, sizeof buf, " %10s\n", ms3(h.max()).c_str());
  os << buf;
}

void json_hist(std::ostream& os, const Histogram& h) {
  os << "\"count\":" << h.count();
  static const char* keys[] = {"p25", "p50", "p75", "p90", "p99", "p99_9"};
  for (int i = 0; i < 6; ++i) os << ",\"" << keys[i] << "\":" << ms3(h.percentile(kPercentiles[i]));
  os << ",\"max\":" << ms3(h.max()) << ",\"min\":" << ms3(h.min());
}

std::string channel_list(const Config& cfg) {
  std::string s;
  for (int ch : cfg.channels) s += (s.empty() ? "" : ",") + std::string(channel_name(ch));
  return s;
}

}  // namespace

std::string format_table(const Stats& s, const Config& cfg, const RunInfo& info) {
  std::ostringstream os;
  os << "latency_stats " << info.url << "  coins=" << info.coins.size() << " channels=" << channel_list(cfg)
     << " conns=" << cfg.conns << " measured=" << std::fixed;
  os.precision(1);
  os << info.measured_s << "s warmup=" << cfg.warmup_s << "s compression="
     << (!info.compression_requested ? "off" : info.compression_accepted ? "accepted" : "refused") << "\n";
  os << "latency = client receive wall clock (after decompression, before parsing) - exchange time\n";
  os << "percentiles: " << kPercentileRule << "\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-40s %10s %10s %10s %10s %10s %10s %10s %10s  (ms)\n", "channel", "count", "p25",
                "p50", "p75", "p90", "p99", "p99.9", "max");
  os << buf;
  for (int ch : cfg.channels) {
    const ChannelStats& cs = s.ch[ch];
    table_row(os, channel_name(ch), cs.lat);
    if (cfg.per_coin)
      for (size_t i = 0; i < s.coin.size() && i < info.coins.size(); ++i)
        if (s.coin[i][ch].count()) table_row(os, std::string("  ") + channel_name(ch) + " " + info.coins[i], s.coin[i][ch]);
    if (cfg.audit)
      for (int k = 0; k < kNumStages; ++k)
        table_row(os, std::string("  ") + channel_name(ch) + " " + stage_name(k), cs.stage[k]);
  }
  os << "\n";
  for (int ch : cfg.channels) {
    const ChannelStats& cs = s.ch[ch];
    os << channel_name(ch) << ": frames=" << cs.frames << " samples=" << cs.samples
       << " negative_clamped=" << cs.negatives << " gaps(>" << cfg.gap_s << "s)=" << cs.gaps;
    if (cfg.audit) os << " audited_frames=" << cs.audited_frames << " stage_negative_clamped=" << cs.stage_negatives;
    os << "\n";
  }
  const Counters& c = s.c;
  os << "connection: frames=" << c.frames << " bytes=" << c.bytes << " bad_frames=" << c.bad
     << " error_frames=" << c.errors << " disconnects=" << c.disconnects << " reconnects=" << c.reconnects
     << " unknown_coin=" << c.unknown_coin << " other=" << c.other << " pongs=" << c.pongs << " acks=" << c.acks
     << " warmup_discarded=" << c.warmup_discarded << "\n";
  return os.str();
}

std::string format_json(const Stats& s, const Config& cfg, const RunInfo& info) {
  std::ostringstream os;
  os << "{\"url\":\"" << json_escape(info.url) << "\",\"unit\":\"ms\",\"percentile_rule\":\""
     << json_escape(kPercentileRule) << "\",\"start_unix_ms\":" << info.start_unix_ms
     << ",\"measured_s\":" << info.measured_s << ",\"warmup_s\":" << cfg.warmup_s << ",\"conns\":" << cfg.conns
     << ",\"gap_threshold_s\":" << cfg.gap_s << ",\"compression\":{\"requested\":"
     << (info.compression_requested ? "true" : "false")
     << ",\"accepted\":" << (info.compression_accepted ? "true" : "false") << ",\"response\":\""
     << json_escape(info.extensions_response) << "\"},\"coins\":[";
  for (size_t i = 0; i < info.coins.size(); ++i) os << (i ? "," : "") << '"' << json_escape(info.coins[i]) << '"';
  os << "],\"channels\":[";
  bool first = true;
  for (int ch : cfg.channels) {
    const ChannelStats& cs = s.ch[ch];
    os << (first ? "" : ",") << "{\"channel\":\"" << channel_name(ch) << "\",";
    first = false;
    json_hist(os, cs.lat);
    os << ",\"frames\":" << cs.frames << ",\"negative_clamped\":" << cs.negatives << ",\"gaps\":" << cs.gaps;
    if (cfg.audit) {
      os << ",\"audited_frames\":" << cs.audited_frames << ",\"stage_negative_clamped\":" << cs.stage_negatives
         << ",\"stages\":[";
      for (int k = 0; k < kNumStages; ++k) {
        os << (k ? "," : "") << "{\"stage\":\"" << stage_name(k) << "\",";
        json_hist(os, cs.stage[k]);
        os << "}";
      }
      os << "]";
    }
    if (cfg.per_coin) {
      os << ",\"per_coin\":[";
      bool f2 = true;
      for (size_t i = 0; i < s.coin.size() && i < info.coins.size(); ++i) {
        if (!s.coin[i][ch].count()) continue;
        os << (f2 ? "" : ",") << "{\"coin\":\"" << json_escape(info.coins[i]) << "\",";
        f2 = false;
        json_hist(os, s.coin[i][ch]);
        os << "}";
      }
      os << "]";
    }
    os << "}";
  }
  const Counters& c = s.c;
  os << "],\"counters\":{\"frames\":" << c.frames << ",\"bytes\":" << c.bytes << ",\"bad_frames\":" << c.bad
     << ",\"error_frames\":" << c.errors << ",\"disconnects\":" << c.disconnects << ",\"reconnects\":" << c.reconnects
     << ",\"unknown_coin\":" << c.unknown_coin << ",\"other\":" << c.other << ",\"pongs\":" << c.pongs
     << ",\"acks\":" << c.acks << ",\"warmup_discarded\":" << c.warmup_discarded << "}}\n";
  return os.str();
}

void write_csv_header(std::ostream& os) {
  os << "window_start_unix_s,window_end_unix_s,channel,count,p25_ms,p50_ms,p75_ms,p90_ms,p99_ms,p99_9_ms,max_ms,"
        "negative_clamped,gaps,disconnects,reconnects,bad_frames\n";
}

void write_csv_window(std::ostream& os, double t0, double t1, const Stats& s, const Config& cfg) {
  char tb[64];
  std::snprintf(tb, sizeof tb, "%.3f,%.3f", t0, t1);
  for (int ch : cfg.channels) {
    const ChannelStats& cs = s.ch[ch];
    os << tb << ',' << channel_name(ch) << ',' << cs.lat.count();
    for (double p : kPercentiles) os << ',' << ms3(cs.lat.percentile(p));
    os << ',' << ms3(cs.lat.max()) << ',' << cs.negatives << ',' << cs.gaps << ',' << s.c.disconnects << ','
       << s.c.reconnects << ',' << s.c.bad << '\n';
  }
  os.flush();
}

std::string format_svg(const Stats& s, const Config& cfg) {
  const double W = 900, H = 540, L = 80, R = 170, T = 40, B = 70;
  const double pw = W - L - R, ph = H - T - B;
  // Latency axis: decades of milliseconds covering all channels; 0 µs samples plot at the left edge.
  double lo = 1e18, hi = 0;
  for (int ch : cfg.channels) {
    const Histogram& h = s.ch[ch].lat;
    if (!h.count()) continue;
    lo = std::min(lo, std::max<double>(h.min(), 1.0) / 1000.0);
    hi = std::max(hi, std::max<double>(h.max(), 1.0) / 1000.0);
  }
  if (hi == 0) lo = 1, hi = 1000;
  int dlo = static_cast<int>(std::floor(std::log10(lo)));
  int dhi = static_cast<int>(std::ceil(std::log10(hi)));
  if (dhi <= dlo) dhi = dlo + 1;
  auto xpos = [&](double ms) {
    double lx = std::log10(std::max(ms, std::pow(10.0, dlo)));
    return L + (lx - dlo) / (dhi - dlo) * pw;
  };
  auto ypos = [&](double f) { return T + (1.0 - f) * ph; };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c"};

  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
     << ' ' << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<title>latency CDF per channel</title>\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n"
     << "<text x=\"" << L + pw / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
     << "Latency CDF (receive - exchange time)</text>\n";
  // Grid and ticks: every decade, plus 2x and 5x when the axis spans few decades.
  const bool minor = dhi - dlo <= 3;
  for (int d = dlo; d <= dhi; ++d) {
    for (double m : {1.0, 2.0, 5.0}) {
      if ((m != 1.0 && (!minor || d == dhi))) continue;
      const double v = m * std::pow(10.0, d);
      const double x = xpos(v);
      char lbl[32];
      std::snprintf(lbl, sizeof lbl, "%g", v);
      os << "<line x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << T + ph << "\" stroke=\""
         << (m == 1.0 ? "#ccc" : "#eee") << "\"/>\n<text x=\"" << x << "\" y=\"" << T + ph + 18
         << "\" text-anchor=\"middle\">" << lbl << "</text>\n";
    }
  }
  for (int i = 0; i <= 10; ++i) {
    double f = i / 10.0, y = ypos(f);
    os << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << L + pw << "\" y2=\"" << y
       << "\" stroke=\"#eee\"/>\n<text x=\"" << L - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << f
       << "</text>\n";
  }
  os << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph
     << "\" fill=\"none\" stroke=\"black\"/>\n"
     << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 20 << "\" text-anchor=\"middle\">latency (ms, log scale)</text>\n"
     << "<text x=\"20\" y=\"" << T + ph / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " << T + ph / 2
     << ")\">cumulative fraction of samples</text>\n";
  int li = 0;
  for (int ch : cfg.channels) {
    const Histogram& h = s.ch[ch].lat;
    const char* col = colors[ch % 3];
    double ly = T + 20 + li++ * 22;
    os << "<line x1=\"" << L + pw + 15 << "\" y1=\"" << ly << "\" x2=\"" << L + pw + 40 << "\" y2=\"" << ly
       << "\" stroke=\"" << col << "\" stroke-width=\"2\"/>\n<text x=\"" << L + pw + 46 << "\" y=\"" << ly + 4
       << "\">" << xml_escape(channel_name(ch)) << " (n=" << h.count() << ")</text>\n";
    if (!h.count()) continue;
    os << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"";
    uint64_t cum = 0;
    double total = static_cast<double>(h.count());
    double px = xpos(std::max<double>(h.min(), 1.0) / 1000.0);
    os << px << ',' << ypos(0);
    for (auto [v, n] : h.buckets()) {
      cum += n;
      double x = xpos(std::max<double>(v, 1.0) / 1000.0);
      os << ' ' << x << ',' << ypos(cum / total);
    }
    os << "\"/>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace lat
