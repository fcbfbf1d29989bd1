// Flag parsing and validation for latency_stats; see cli.hpp.
#include "cli.hpp"

#include <cstdlib>
#include <sstream>

#include "extract.hpp"

namespace lat {

std::string help_text() {
  return R"(latency_stats: measure Hyperliquid-style WebSocket feed latency (client receive time - exchange time)

usage: latency_stats --url ws://HOST:PORT/ws --coins BTC,ETH|all --channels l2Book,trades,bbo [options]

  --url URL          WebSocket URL, ws:// or wss:// (wss:// when built with OpenSSL). Required.
  --coins LIST|all   comma-separated coins, or `all`: open a WS, subscribe allMids, take the keys of the first
                     allMids data.mids object. Required.
  --channels LIST    comma-separated subset of l2Book,trades,bbo. Required.
  --conns N          connections (default 1); each subscribes every coin x channel; threads = min(N, cores)
  --duration S       measured run length in seconds after warmup (default 10)
  --warmup S         discard samples received during the first S seconds (default 0)
  --per-coin         also report percentiles per coin
  --json FILE        write the report as JSON
  --csv FILE         write one CSV row per channel per window (needs --interval)
  --interval S       CSV / hlog window length in seconds (hlog default 5)
  --svg FILE         write the charts as SVG: FILE = latency by percentile per channel (HDR log axis); with
                     --audit also FILE-stages.svg (median/p99 per stage, stacked) and FILE-added.svg (node
                     write -> client CDF, 0-10 ms)
  --hlog FILE        write interval histograms in the HdrHistogram log format (values in microseconds)
  --compress         offer permessage-deflate ("permessage-deflate; client_max_window_bits")
  --audit            append audit=1 to the URL query and report the per-stage split from the audit object
  --resume           after a reconnect, resubscribe trades with "since" (the last height received - 1) and drop
                     the frames received twice: a reconnect then loses nothing, and the audit chain proves it
                     (replayed frames are kept out of the percentiles). Needs --audit. Without it, the heights
                     between a subscription's last frame before a disconnect and its first after are loss
  --insecure         wss:// only: do not verify the server certificate
  --gap S            expected block interval: exchange-time jumps larger than S per coin per channel count as
                     gaps (default 2)
  --max-silence S    a connection with no data frame for longer than S is "silent" (a failure); a channel
                     alone that long is "quiet" (reported only) (default 5)
  --idle S           reconnect after S without a data frame; pongs and acks do not count (default 60)
  --ping S           application ping period (default 30)
  --allow-loss       exit 0 even when a channel was silent or lost data (the verdict line still says so); not
                     for UNVERIFIED (exit 4)
  --stall AT,SECS    stop reading for SECS seconds, AT seconds after subscribing: a slow client on purpose, to
                     see what the server does about one (conflation, dropped heights) and that it says so
  --help             this text

Latency is taken per frame: wall clock after decompression, before JSON parsing, minus data.time (l2Book, bbo)
or each trade's time (trades, one sample per trade). Negative latencies are clamped to 0 and counted.
Percentiles are nearest-rank: the smallest recorded value v such that at least p% of samples are <= v, at
histogram resolution (< 0.1% relative error). SIGINT/SIGTERM end the run early; every report is still written.

Exit status: 0 healthy run; 1 bad flags, or an output file that cannot be written (checked at start); 2 server
unreachable at start; 3 a channel lost data (lost frames named by the audit chain, loss notices, unacknowledged
subscriptions, disconnects not resumed, refused or broken resumes) or went silent (the whole connection, or a
book change came late), unless --allow-loss; 4 UNVERIFIED: --audit, but no frame carried the audit chain, so
loss could not be checked (--allow-loss does not excuse it). A quiet channel alone is reported, not a failure.
)";
}

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, ','))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

bool to_double(const std::string& s, double& out) {
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' && out >= 0 && out < 1e9;
}

}  // namespace

CliResult parse_cli(const std::vector<std::string>& args, Config& cfg) {
  CliResult r;
  auto fail = [&](std::string msg) {
    r.action = CliAction::Error;
    r.error = std::move(msg);
    return r;
  };
  bool have_coins = false, have_channels = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    std::string v;
    double d;
    if (a == "--help" || a == "-h") {
      r.action = CliAction::Help;
      return r;
    } else if (a == "--url") {
      if (!value(cfg.url)) return fail("--url needs a value");
    } else if (a == "--coins") {
      if (!value(v)) return fail("--coins needs a value");
      have_coins = true;
      if (v == "all") cfg.all_coins = true;
      else cfg.coins = split(v);
      if (!cfg.all_coins && cfg.coins.empty()) return fail("--coins: empty list");
    } else if (a == "--channels") {
      if (!value(v)) return fail("--channels needs a value");
      have_channels = true;
      for (auto& c : split(v)) {
        int ch = channel_from_name(c);
        if (ch < 0) return fail("--channels: unknown channel '" + c + "' (expected l2Book, trades, bbo)");
        bool dup = false;
        for (int x : cfg.channels) dup |= x == ch;
        if (!dup) cfg.channels.push_back(ch);
      }
      if (cfg.channels.empty()) return fail("--channels: empty list");
    } else if (a == "--conns") {
      if (!value(v) || !to_double(v, d) || d < 1 || d > 10000 || d != static_cast<int>(d))
        return fail("--conns needs an integer >= 1");
      cfg.conns = static_cast<int>(d);
    } else if (a == "--duration") {
      if (!value(v) || !to_double(v, d) || d <= 0) return fail("--duration needs a number of seconds > 0");
      cfg.duration_s = d;
    } else if (a == "--warmup") {
      if (!value(v) || !to_double(v, d)) return fail("--warmup needs a number of seconds >= 0");
      cfg.warmup_s = d;
    } else if (a == "--interval") {
      if (!value(v) || !to_double(v, d) || d <= 0) return fail("--interval needs a number of seconds > 0");
      cfg.interval_s = d;
    } else if (a == "--gap") {
      if (!value(v) || !to_double(v, d) || d <= 0) return fail("--gap needs a number of seconds > 0");
      cfg.gap_s = d;
    } else if (a == "--max-silence") {
      if (!value(v) || !to_double(v, d) || d <= 0) return fail("--max-silence needs a number of seconds > 0");
      cfg.max_silence_s = d;
    } else if (a == "--idle") {
      if (!value(v) || !to_double(v, d) || d <= 0) return fail("--idle needs a number of seconds > 0");
      cfg.idle_s = d;
    } else if (a == "--ping") {
      if (!value(v) || !to_double(v, d) || d <= 0) return fail("--ping needs a number of seconds > 0");
      cfg.ping_s = d;
    } else if (a == "--allow-loss") {
      cfg.allow_loss = true;
    } else if (a == "--stall") {
      // AT,SECS: a slow client on purpose (tests of what a server does about one).
      const auto comma = value(v) ? v.find(',') : std::string::npos;
      double at = 0, secs = 0;
      if (comma == std::string::npos || !to_double(v.substr(0, comma), at) || !to_double(v.substr(comma + 1), secs) ||
          at < 0 || secs <= 0)
        return fail("--stall needs AT,SECS: seconds after subscribing, and how long to stop reading");
      cfg.stall_at_s = at;
      cfg.stall_s = secs;
    } else if (a == "--hlog") {
      if (!value(cfg.hlog_path)) return fail("--hlog needs a file");
    } else if (a == "--json") {
      if (!value(cfg.json_path)) return fail("--json needs a file");
    } else if (a == "--csv") {
      if (!value(cfg.csv_path)) return fail("--csv needs a file");
    } else if (a == "--svg") {
      if (!value(cfg.svg_path)) return fail("--svg needs a file");
    } else if (a == "--per-coin") {
      cfg.per_coin = true;
    } else if (a == "--compress") {
      cfg.compress = true;
    } else if (a == "--audit") {
      cfg.audit = true;
    } else if (a == "--resume") {
      cfg.resume = true;
    } else if (a == "--insecure") {
      cfg.insecure = true;
    } else {
      return fail("unknown flag '" + a + "' (see --help)");
    }
  }
  if (cfg.url.empty()) return fail("--url is required");
  if (cfg.url.rfind("ws://", 0) != 0 && cfg.url.rfind("wss://", 0) != 0)
    return fail("--url must start with ws:// or wss://");
  if (!have_coins) return fail("--coins is required");
  if (!have_channels) return fail("--channels is required");
  if (!cfg.csv_path.empty() && cfg.interval_s <= 0) return fail("--csv needs --interval S");
  if (cfg.resume && !cfg.audit)
    return fail("--resume needs --audit (the heights it resumes from are in the audit object)");
  r.action = CliAction::Run;
  return r;
}

}  // namespace lat
