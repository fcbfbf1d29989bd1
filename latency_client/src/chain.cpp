// Per-subscription chain checking; see chain.hpp.
#include "chain.hpp"

#include <algorithm>

namespace lat {

const char* lost_by_name(LostBy b) {
  switch (b) {
    case LostBy::Chain: return "chain";
    case LostBy::Server: return "server";
    case LostBy::Reconnect: return "reconnect";
  }
  return "?";
}

void ChainChannel::merge(const ChainChannel& o) {
  chained_frames += o.chained_frames;
  conflated += o.conflated;
  lost_frames += o.lost_frames;
  dropped_heights += o.dropped_heights;
  lost_events += o.lost_events;
  regressions += o.regressions;
  mismatches += o.mismatches;
  ranges += o.ranges;
  unjoined += o.unjoined;
  unjoined_heights += o.unjoined_heights;
  resumed += o.resumed;
  resume_refused += o.resume_refused;
  replayed += o.replayed;
  duplicates += o.duplicates;
}

void ChainHealth::add_range(const LostRange& r) {
  ++ranges_total;
  if (r.ch >= 0 && r.ch < kNumChannels) ch[r.ch].ranges++;
  if (ranges.size() < kMaxRanges) ranges.push_back(r);
}

void ChainHealth::add_regression(const Regression& r) {
  if (r.ch >= 0 && r.ch < kNumChannels) ch[r.ch].regressions++;
  if (regressions.size() < kMaxRegressions) regressions.push_back(r);
}

void ChainHealth::merge(const ChainHealth& o) {
  for (int c = 0; c < kNumChannels; ++c) ch[c].merge(o.ch[c]);
  for (const auto& r : o.ranges)
    if (ranges.size() < kMaxRanges) ranges.push_back(r);
  ranges_total += o.ranges_total;
  for (const auto& r : o.regressions)
    if (regressions.size() < kMaxRegressions) regressions.push_back(r);
}

uint64_t ChainHealth::chained_frames() const {
  uint64_t n = 0;
  for (const auto& c : ch) n += c.chained_frames;
  return n;
}

ChainTracker::ChainTracker(size_t ncoins)
    : last_height_(ncoins * kNumChannels, 0), seen_(ncoins * kNumChannels, 0), ncoins_(ncoins) {}

void ChainTracker::new_session() {
  subs_.clear();
  std::fill(seen_.begin(), seen_.end(), 0);
}

bool ChainTracker::on_frame(int ch, int coin, int64_t height, const Chain& c, bool data_snapshot, ChainHealth& out) {
  const bool known = coin >= 0 && static_cast<size_t>(coin) < ncoins_;
  const size_t idx = known ? static_cast<size_t>(ch) * ncoins_ + static_cast<size_t>(coin) : 0;
  bool first = false;
  if (known) {
    first = !seen_[idx];
    seen_[idx] = 1;
  }
  const bool snapshot = data_snapshot || (c.present ? c.snapshot || (c.n == 1 && c.prev == 0) : first);
  ChainChannel& cc = out.ch[ch];

  // A height lower than the subscription's last one: the server restarted (or the chain was reset). Reported,
  // and the base moves to the new height. Snapshots are skipped: a late joiner's may be older than live frames.
  bool went_back = false;
  if (known && height > 0 && !snapshot) {
    int64_t& last = last_height_[idx];
    if (height < last) {
      out.add_regression({ch, coin, last, height});
      went_back = true;
    }
    last = height;
  }
  if (!c.present) return snapshot;

  auto it = subs_.find(c.sub);
  if (it == subs_.end()) {
    if (subs_.size() >= kMaxSubs) return snapshot;
    it = subs_.emplace(c.sub, Sub{}).first;
  }
  Sub& s = it->second;
  const bool fresh = s.n == 0;
  cc.chained_frames++;
  if (!fresh && c.n <= s.n) {
    // The chain went back: a new chain, not loss; heights are compared from here on.
    if (!went_back) out.add_regression({ch, coin, s.height, height});
    if (known && height > 0) last_height_[idx] = height;
    s.same_height = false;
  } else if (c.n > s.n + 1 && !fresh && c.prev == s.height && (c.conflated > 0 || c.lost_first > 0)) {
    // prev is the last frame received, so the numbers skipped were never sent: a server that numbers the frames
    // it conflated or dropped. The `conflated` / `lost` below already count them.
  } else if (c.n > s.n + 1) {
    // Frames s.n+1 .. c.n-1 never arrived. The last of them had height prev; the others lie after the last
    // frame received (at it too in streaming mode, where frames share heights).
    const int64_t missing = c.n - s.n - 1;
    const int64_t last = c.prev > 0 ? c.prev : height;
    int64_t first = last;
    if (missing > 1) first = fresh ? 0 : std::min(last, s.height + (s.same_height ? 0 : 1));
    cc.lost_frames += static_cast<uint64_t>(missing);
    out.add_range({ch, coin, first, last, static_cast<uint64_t>(missing)});
  } else if (!fresh && c.prev > 0 && c.prev != s.height) {
    cc.mismatches++;
  }
  if (c.lost_first > 0) {
    cc.dropped_heights += static_cast<uint64_t>(c.lost_last - c.lost_first) + 1;
    cc.lost_events++;
    out.add_range({ch, coin, c.lost_first, c.lost_last, 0, LostBy::Server});
  }
  cc.conflated += static_cast<uint64_t>(c.conflated);
  if (!fresh && height == s.height && c.n > s.n) s.same_height = true;
  s.n = c.n;
  s.height = height;
  return snapshot;
}

}  // namespace lat
