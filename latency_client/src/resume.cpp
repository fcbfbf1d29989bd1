// Resume points and the join of a re-subscription to the previous session; see resume.hpp.
#include "resume.hpp"

#include <algorithm>

namespace lat {

ResumeTracker::ResumeTracker(size_t ncoins)
    : points_(ncoins * kNumChannels), since_(ncoins * kNumChannels, 0), chan_top_(kNumChannels, 0), ncoins_(ncoins) {}

const std::vector<int64_t>& ResumeTracker::begin_session(bool resume) {
  for (size_t i = 0; i < points_.size(); ++i) {
    Point& p = points_[i];
    const int ch = static_cast<int>(i / std::max<size_t>(ncoins_, 1));
    p.seen = false;
    p.since = 0;
    p.drop = 0;
    if (resume && ordered_channel(ch)) {
      if (p.last > 0) {
        p.since = p.last - 1;
        p.drop = p.at_last;
      } else if (chan_top_[ch] > 0) {
        // Nothing of this coin yet, but the channel had frames up to chan_top: the connection's frames come in
        // height order, so this coin's could only be at that height or after it.
        p.since = chan_top_[ch] - 1;
      }
    }
    since_[i] = p.since;
  }
  return since_;
}

void ResumeTracker::on_subscribed(ChainHealth& out) {
  for (size_t i = 0; i < points_.size(); ++i)
    if (points_[i].since > 0) out.ch[i / std::max<size_t>(ncoins_, 1)].resumed++;
}

void ResumeTracker::unjoined(int ch, int coin, int64_t first, int64_t last, ChainHealth& out) {
  ChainChannel& cc = out.ch[ch];
  cc.unjoined++;
  if (first > last) return;  // no height in between, but nothing vouches for the frames at the edges either
  cc.unjoined_heights += static_cast<uint64_t>(last - first) + 1;
  out.add_range({ch, coin, first, last, 0, LostBy::Reconnect});
}

bool ResumeTracker::on_frame(int ch, int coin, int64_t height, const Chain& c, bool replayed, ChainHealth& out) {
  if (coin < 0 || static_cast<size_t>(coin) >= ncoins_ || height <= 0 || !ordered_channel(ch)) return false;
  Point& p = points_[static_cast<size_t>(ch) * ncoins_ + static_cast<size_t>(coin)];
  chan_top_[ch] = std::max(chan_top_[ch], height);
  if (replayed) out.ch[ch].replayed++;
  if (!p.seen) {
    p.seen = true;
    if (p.since > 0) {
      // The server seeds a resumed chain's prev with `since`: anything else (no prev: it subscribed afresh) leaves
      // the heights after `since` unvouched.
      if (!c.present || c.prev != p.since) unjoined(ch, coin, p.since + 1, c.prev > p.since ? c.prev : height - 1, out);
    } else if (p.last > 0) {
      unjoined(ch, coin, p.last + 1, height - 1, out);  // not resumed: nothing between the two sessions is known
    }
  }
  if (replayed && p.drop > 0 && height == p.last) {
    --p.drop;
    out.ch[ch].duplicates++;
    return true;
  }
  p.drop = 0;  // a frame that is not one already received: none after it can be
  if (height == p.last) {
    p.at_last++;
  } else {
    // Newer, or lower after a restarted server (the chain reports that regression): the base moves either way.
    p.last = height;
    p.at_last = 1;
  }
  return false;
}

}  // namespace lat
