// The verdict: per channel ok / quiet / unverified / silent / lost / silent+lost with the reasons, the run's
// HEALTHY / NOT HEALTHY / UNVERIFIED, which checks ran, and the exit code; see health.hpp.
#include <cstdio>

#include "health.hpp"

namespace lat {

namespace {

std::string secs(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1fs", static_cast<double>(ns) / 1e9);
  return b;
}

std::string coin_label(const Config& cfg, int coin) {
  if (coin < 0) return "?";
  return static_cast<size_t>(coin) < cfg.coins.size() ? cfg.coins[coin] : "#" + std::to_string(coin);
}

// "BTC 1120", "ETH 1200-1209 (3 frames)", "ETH ..1300 (4 frames)", "SOL 1500-1510 (server)"
std::string range_text(const Config& cfg, const LostRange& r) {
  std::string s = coin_label(cfg, r.coin) + " ";
  if (r.first == 0) s += "..";
  else if (r.first != r.last) s += std::to_string(r.first) + "-";
  s += std::to_string(r.last);
  if (r.frames > 1) s += " (" + std::to_string(r.frames) + " frames)";
  if (r.by != LostBy::Chain) s += std::string(" (") + lost_by_name(r.by) + ")";
  return s;
}

// What the chain says was lost on channel ch, with its first few ranges named.
std::string chain_loss(const Health& h, const Config& cfg, int ch) {
  const ChainChannel& c = h.chain.ch[ch];
  if (!c.lost_frames && !c.dropped_heights && !c.unjoined && !c.resume_refused) return "";
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : " + ") + part; };
  if (c.lost_frames) add("lost " + std::to_string(c.lost_frames) + (c.lost_frames == 1 ? " frame" : " frames"));
  if (c.dropped_heights) add(std::to_string(c.dropped_heights) + " heights dropped by the server");
  if (c.resume_refused) add(std::to_string(c.resume_refused) + " resumes refused");
  if (c.unjoined)
    add(std::to_string(c.unjoined) + " subscriptions not joined across a reconnect (" +
        std::to_string(c.unjoined_heights) + " heights unaccounted)");
  int shown = 0, mine = 0;
  for (const LostRange& r : h.chain.ranges) {
    if (r.ch != ch) continue;
    ++mine;
    if (shown < 3) s += (shown++ ? ", " : ": ") + range_text(cfg, r);
  }
  if (mine > shown || h.chain.ranges_total > h.chain.ranges.size()) s += ", ...";
  return s + "; ";
}

}  // namespace

Verdict verdict(const Health& h, const Config& cfg, uint64_t disconnects) {
  Verdict v;
  const auto limit = static_cast<int64_t>(cfg.max_silence_s * 1e9);
  const bool chained = h.chain.chained_frames() > 0;
  bool has_l2 = false;
  for (int ch : cfg.channels) has_l2 |= ch == kL2Book;

  v.checked = {"connection silence", "loss notices", "acks", "disconnects"};
  if (!cfg.audit) {
    v.not_checked.push_back("per-subscription loss (no --audit)");
    if (has_l2) v.not_checked.push_back("book change late (no --audit)");
  } else {
    if (chained) v.checked.push_back("per-subscription loss (audit chain)");
    else v.not_checked.push_back("per-subscription loss (no frame carried the audit chain)");
    if (has_l2) v.checked.push_back("book change late (block_ns)");
    if (cfg.resume) v.checked.push_back("resume across reconnects (audit chain)");
  }

  // Shared by every channel of the run: a connection's silence, disconnects and unattributed notices.
  const bool conn_silent = h.max_conn_silence_ns > limit;
  // Resumed, a disconnect loses nothing by itself: the chain's join to the previous session says whether it did.
  std::string conn_loss, conn_info;
  if (disconnects)
    (cfg.resume ? conn_info : conn_loss) += std::to_string(disconnects) + " disconnects, " + secs(h.downtime_ns) +
                                            " down" + (cfg.resume ? " (resumed)" : "") + "; ";
  if (h.loss_notices_other) conn_loss += std::to_string(h.loss_notices_other) + " loss notices; ";

  std::string line = "verdict:", unverified_names;
  for (int ch : cfg.channels) {
    const ChainChannel& cc = h.chain.ch[ch];
    std::string why;
    bool silent = false;
    if (conn_silent) {
      silent = true;
      why += "no data frame on a connection for " + secs(h.max_conn_silence_ns) + " > " + secs(limit) + "; ";
    }
    if (ch == kL2Book) {
      // The first few coins are named; a slow client can make every coin late at once.
      constexpr size_t kNamed = 5;
      size_t late = 0;
      for (size_t i = 0; i < h.l2_coin_stale_ns.size(); ++i)
        if (h.l2_coin_stale_ns[i] > limit && ++late <= kNamed)
          why += coin_label(cfg, static_cast<int>(i)) + " book change late by " + secs(h.l2_coin_stale_ns[i]) + "; ";
      if (late > kNamed) why += "and " + std::to_string(late - kNamed) + " more coins' book changes late; ";
      silent |= late > 0;
    }
    // The chain names lost heights exactly; the server's notice for the same drop is not counted again, only
    // notices no chain frame followed (a path without the chain, or the run ended first).
    std::string loss = chain_loss(h, cfg, ch) + conn_loss;
    const uint64_t notices = h.loss_notices[ch] > cc.lost_events ? h.loss_notices[ch] - cc.lost_events : 0;
    if (notices) loss += std::to_string(notices) + " loss notices; ";
    if (h.acks_missing[ch]) loss += std::to_string(h.acks_missing[ch]) + " subscriptions not acknowledged; ";
    why += loss;
    // Information, not failures.
    why += conn_info;
    if (cc.replayed)
      why += "replayed " + std::to_string(cc.replayed) + " (" + std::to_string(cc.duplicates) + " already received); ";
    const bool quiet = h.max_silence_ns[ch] > limit;
    if (quiet && !conn_silent) why += "no frame for " + secs(h.max_silence_ns[ch]) + "; ";
    if (cc.conflated) why += "conflated " + std::to_string(cc.conflated) + "; ";
    if (cc.regressions) {
      for (const Regression& r : h.chain.regressions)
        if (r.ch == ch) {
          why += "height went back from " + std::to_string(r.from) + " to " + std::to_string(r.to) + ": " +
                 std::to_string(cc.regressions) + " times; ";
          break;
        }
    }
    if (cc.mismatches) why += std::to_string(cc.mismatches) + " chain mismatches (prev); ";
    const bool unverified = cfg.audit && (!chained || (h.data_frames[ch] > 0 && cc.chained_frames == 0));
    if (unverified) {
      why += "loss not checked: no frame carried the audit chain; ";
      unverified_names += (unverified_names.empty() ? "" : ", ") + std::string(channel_name(ch));
    }
    if (!why.empty()) why.resize(why.size() - 2);
    const bool lost = !loss.empty();
    std::string word = silent && lost ? "silent+lost"
                       : silent       ? "silent"
                       : lost         ? "lost"
                       : unverified   ? "unverified"
                       : quiet        ? "quiet"
                                      : "ok";
    v.failed |= silent || lost;
    v.unverified |= unverified;
    v.channel[ch] = word;
    v.why[ch] = why;
    line += std::string(" ") + channel_name(ch) + "=" + word + (why.empty() ? "" : " (" + why + ")");
  }
  v.healthy = !v.failed && !v.unverified;
  v.result = v.failed ? "NOT HEALTHY" : v.unverified ? "UNVERIFIED" : "HEALTHY";
  // 4 is not excused by --allow-loss: it says loss could not be looked for at all.
  v.exit_code = v.failed && !cfg.allow_loss ? 3 : v.unverified ? 4 : 0;
  line += " -> " + v.result;
  if (v.failed && cfg.allow_loss) line += v.unverified ? " (--allow-loss, but unverified: exit 4)" : " (--allow-loss: exit 0)";
  if (v.unverified) line += " (loss could not be checked: " + unverified_names + ")";
  line += "; checked: ";
  for (size_t i = 0; i < v.checked.size(); ++i) line += (i ? ", " : "") + v.checked[i];
  if (!v.not_checked.empty()) {
    line += "; not checked: ";
    for (size_t i = 0; i < v.not_checked.size(); ++i) line += (i ? ", " : "") + v.not_checked[i];
  }
  v.line = line;
  return v;
}

}  // namespace lat
