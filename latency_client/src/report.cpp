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

std::string coin_of(const RunInfo& info, int coin) {
  return coin >= 0 && static_cast<size_t>(coin) < info.coins.size() ? info.coins[coin] : "?";
}

// "BTC 1120", "ETH 1200-1209 (3 frames)", "SOL 1500-1510 (server)"; first 0: not known.
std::string range_text(const RunInfo& info, const LostRange& r) {
  std::string s = coin_of(info, r.coin) + " " + (r.first == 0 ? ".." : r.first == r.last ? "" : std::to_string(r.first) + "-") +
                  std::to_string(r.last);
  if (r.frames > 1) s += " (" + std::to_string(r.frames) + " frames)";
  if (r.by != LostBy::Chain) s += std::string(" (") + lost_by_name(r.by) + ")";
  return s;
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
  os << info.clock.line << "\n";
  if (info.interrupted) os << "interrupted: stopped by a signal before the duration ended\n";
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
    if (cfg.audit) {
      table_row(os, std::string("  ") + channel_name(ch) + " audit: recv - block_ns", cs.audit_e2e);
      for (int k = 0; k < kNumStages; ++k)
        table_row(os, std::string("    ") + stage_name(k), cs.stage[k]);
      table_row(os, std::string("  ") + channel_name(ch) + " added: node write->recv", cs.added);
    }
  }
  os << "\n";
  const Health& h = s.health;
  for (int ch : cfg.channels) {
    const ChannelStats& cs = s.ch[ch];
    os << channel_name(ch) << ": frames=" << cs.frames << " samples=" << cs.samples
       << " negative_clamped=" << cs.negatives << " gaps(>" << cfg.gap_s << "s)=" << cs.gaps
       << " max_silence=" << ms3(static_cast<uint64_t>(h.max_silence_ns[ch] / 1000)) << "ms loss_notices="
       << h.loss_notices[ch] << " acks_missing=" << h.acks_missing[ch] << "/" << h.acks_expected[ch]
       << " snapshot_frames=" << cs.snapshot_frames;
    if (cfg.audit) {
      const ChainChannel& cc = h.chain.ch[ch];
      os << " audited_frames=" << cs.audited_frames << " stage_invalid=";
      for (int k = 0; k < kNumStages; ++k) os << (k ? "," : "") << cs.stage_invalid[k];
      os << " chained_frames=" << cc.chained_frames << " conflated=" << cc.conflated << " lost_frames=" << cc.lost_frames
         << " dropped_heights=" << cc.dropped_heights << " height_regressions=" << cc.regressions;
      if (cfg.resume || cc.unjoined)
        os << " resumed=" << cc.resumed << " resume_refused=" << cc.resume_refused << " unjoined=" << cc.unjoined
           << " unjoined_heights=" << cc.unjoined_heights << " replayed=" << cc.replayed
           << " duplicates=" << cc.duplicates;
    }
    os << "\n";
    if (h.chain.ch[ch].ranges) {
      os << "  " << channel_name(ch) << " lost:";
      size_t shown = 0;
      for (const LostRange& r : h.chain.ranges)
        if (r.ch == ch) os << (shown++ ? ", " : " ") << range_text(info, r);
      if (shown < h.chain.ch[ch].ranges) os << " ... (" << h.chain.ch[ch].ranges << " ranges)";
      os << "\n";
    }
    if (ch == kL2Book && cfg.per_coin)
      for (size_t i = 0; i < h.l2_coin_silence_ns.size() && i < info.coins.size(); ++i)
        os << "  l2Book " << info.coins[i] << " max_silence="
           << ms3(static_cast<uint64_t>(h.l2_coin_silence_ns[i] / 1000)) << "ms"
           << (i < h.l2_coin_stale_ns.size()
                   ? " max_stale=" + ms3(static_cast<uint64_t>(h.l2_coin_stale_ns[i] / 1000)) + "ms"
                   : std::string())
           << "\n";
  }
  os << "health: idle_timeouts=" << h.idle_timeouts << " downtime=" << ms3(static_cast<uint64_t>(h.downtime_ns / 1000))
     << "ms max_downtime=" << ms3(static_cast<uint64_t>(h.max_downtime_ns / 1000)) << "ms";
  os << " max_connection_silence=" << ms3(static_cast<uint64_t>(h.max_conn_silence_ns / 1000)) << "ms";
  if (cfg.audit) {
    os << " audited_heights=" << h.audited_heights << " missed_heights=" << h.missed_heights();
    uint64_t regressions = 0;
    for (const auto& c : h.chain.ch) regressions += c.regressions;
    os << " height_regressions=" << regressions;
    for (const Regression& r : h.chain.regressions)
      os << " [" << channel_name(r.ch) << " " << coin_of(info, r.coin) << ": height went back from " << r.from
         << " to " << r.to << "]";
  }
  os << "\n";
  const Counters& c = s.c;
  os << "connection: frames=" << c.frames << " bytes=" << c.bytes << " bad_frames=" << c.bad
     << " error_frames=" << c.errors << " disconnects=" << c.disconnects << " reconnects=" << c.reconnects
     << " unknown_coin=" << c.unknown_coin << " other=" << c.other << " pongs=" << c.pongs << " acks=" << c.acks
     << " warmup_discarded=" << c.warmup_discarded << "\n";
  os << verdict(s.health, cfg, s.c.disconnects).line << "\n";
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
     << json_escape(info.extensions_response) << "\"},\"clock\":{\"known\":" << (info.clock.known ? "true" : "false")
     << ",\"synchronised\":" << (info.clock.synchronised ? "true" : "false")
     << ",\"est_error_ms\":" << info.clock.est_error_ms << ",\"max_error_ms\":" << info.clock.max_error_ms
     << ",\"warning\":" << (info.clock.warn ? "true" : "false") << "},\"interrupted\":"
     << (info.interrupted ? "true" : "false") << ",\"max_silence_s\":" << cfg.max_silence_s << ",\"coins\":[";
  for (size_t i = 0; i < info.coins.size(); ++i) os << (i ? "," : "") << '"' << json_escape(info.coins[i]) << '"';
  os << "],\"channels\":[";
  const Health& h = s.health;
  const Verdict v = verdict(h, cfg, s.c.disconnects);
  bool first = true;
  for (int ch : cfg.channels) {
    const ChannelStats& cs = s.ch[ch];
    os << (first ? "" : ",") << "{\"channel\":\"" << channel_name(ch) << "\",";
    first = false;
    json_hist(os, cs.lat);
    os << ",\"frames\":" << cs.frames << ",\"negative_clamped\":" << cs.negatives << ",\"gaps\":" << cs.gaps
       << ",\"verdict\":\"" << v.channel[ch] << "\",\"why\":\"" << json_escape(v.why[ch])
       << "\",\"max_silence_ms\":" << ms3(static_cast<uint64_t>(h.max_silence_ns[ch] / 1000))
       << ",\"loss_notices\":" << h.loss_notices[ch] << ",\"acks_missing\":" << h.acks_missing[ch]
       << ",\"acks_expected\":" << h.acks_expected[ch] << ",\"snapshot_frames\":" << cs.snapshot_frames;
    const ChainChannel& cc = h.chain.ch[ch];
    os << ",\"chained_frames\":" << cc.chained_frames << ",\"conflated\":" << cc.conflated
       << ",\"lost_frames\":" << cc.lost_frames << ",\"dropped_heights\":" << cc.dropped_heights
       << ",\"height_regressions\":" << cc.regressions << ",\"chain_mismatches\":" << cc.mismatches
       << ",\"lost_ranges_total\":" << cc.ranges << ",\"resumed\":" << cc.resumed
       << ",\"resume_refused\":" << cc.resume_refused << ",\"unjoined\":" << cc.unjoined
       << ",\"unjoined_heights\":" << cc.unjoined_heights << ",\"replayed\":" << cc.replayed
       << ",\"duplicates\":" << cc.duplicates << ",\"lost_ranges\":[";
    bool fr = true;
    for (const LostRange& r : h.chain.ranges) {
      if (r.ch != ch) continue;
      os << (fr ? "" : ",") << "{\"coin\":\"" << json_escape(coin_of(info, r.coin)) << "\",\"first\":" << r.first
         << ",\"last\":" << r.last << ",\"frames\":" << r.frames << ",\"by\":\"" << lost_by_name(r.by) << "\"}";
      fr = false;
    }
    os << "]";
    if (cfg.audit) {
      os << ",\"audited_frames\":" << cs.audited_frames << ",\"audit_e2e\":{";
      json_hist(os, cs.audit_e2e);
      os << "},\"added\":{";
      json_hist(os, cs.added);
      os << "},\"stages\":[";
      for (int k = 0; k < kNumStages; ++k) {
        os << (k ? "," : "") << "{\"stage\":\"" << stage_name(k) << "\",\"invalid\":" << cs.stage_invalid[k] << ",";
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
     << ",\"acks\":" << c.acks << ",\"warmup_discarded\":" << c.warmup_discarded << "},\"health\":{"
     << "\"idle_timeouts\":" << h.idle_timeouts << ",\"downtime_ms\":" << h.downtime_ns / 1000000
     << ",\"max_downtime_ms\":" << h.max_downtime_ns / 1000000 << ",\"max_connection_silence_ms\":"
     << ms3(static_cast<uint64_t>(h.max_conn_silence_ns / 1000)) << ",\"audited_heights\":" << h.audited_heights
     << ",\"missed_heights\":" << h.missed_heights() << ",\"missed_height_ranges\":[";
  for (size_t i = 0; i < h.chain.ranges.size(); ++i)
    os << (i ? "," : "") << "[" << h.chain.ranges[i].first << "," << h.chain.ranges[i].last << "]";
  uint64_t regressions = 0;
  for (const auto& cc : h.chain.ch) regressions += cc.regressions;
  os << "],\"missed_height_ranges_total\":" << h.chain.ranges_total << ",\"height_regressions\":" << regressions
     << ",\"regressions\":[";
  for (size_t i = 0; i < h.chain.regressions.size(); ++i) {
    const Regression& r = h.chain.regressions[i];
    os << (i ? "," : "") << "{\"channel\":\"" << channel_name(r.ch) << "\",\"coin\":\"" << json_escape(coin_of(info, r.coin))
       << "\",\"from\":" << r.from << ",\"to\":" << r.to << "}";
  }
  auto list = [&](const std::vector<std::string>& v) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << '"' << json_escape(v[i]) << '"';
    os << "]";
  };
  os << "],\"loss_notices_other\":" << h.loss_notices_other << "},\"healthy\":" << (v.healthy ? "true" : "false")
     << ",\"result\":\"" << v.result << "\",\"exit_code\":" << v.exit_code << ",\"checked\":";
  list(v.checked);
  os << ",\"not_checked\":";
  list(v.not_checked);
  os << ",\"verdict\":\"" << json_escape(v.line) << "\"}\n";
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

}  // namespace lat
