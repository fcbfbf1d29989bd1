// Resume across reconnects (issue #46, docs/api.md): per connection, per ordered channel x coin, the last height
// received and how many frames arrived at it. A re-subscription asks for `since` = that height - 1 (in streaming
// mode several frames share a height, so the last height is asked again whole) and the first that-many replayed
// frames at it are dropped: they are the ones already received, sent again in the same order.
// Loss across a reconnect: a resumed subscription whose first frame's `prev` is not the `since` sent, or one not
// resumed at all, leaves the heights since the previous session's last frame unvouched ("unjoined").
#pragma once
#include <cstdint>
#include <vector>

#include "chain.hpp"
#include "extract.hpp"

namespace lat {

// Channels whose every frame counts (a missed one is lost); l2Book and bbo state the whole slot each frame.
inline bool ordered_channel(int ch) { return ch == kTrades; }

class ResumeTracker {
 public:
  explicit ResumeTracker(size_t ncoins);
  // A session is about to subscribe. With `resume`, ordered subscriptions seen before get a `since`; returns it
  // per [ch * ncoins + coin] (0: subscribe plainly).
  const std::vector<int64_t>& begin_session(bool resume);
  // The session's subscriptions went out: counts the resumed ones.
  void on_subscribed(ChainHealth& out);
  // A chained, non-snapshot frame of an ordered channel with its height. Checks how the session's first frame
  // of the subscription joins the previous session; returns true for a replayed frame already received (drop it).
  bool on_frame(int ch, int coin, int64_t height, const Chain& c, bool replayed, ChainHealth& out);

 private:
  struct Point {
    int64_t last = 0;      // newest height received (0: none yet)
    uint64_t at_last = 0;  // frames received at `last`
    int64_t since = 0;     // this session's `since` (0: not resumed)
    uint64_t drop = 0;     // replayed frames at `last` still to drop
    bool seen = false;     // a frame arrived in this session
  };
  void unjoined(int ch, int coin, int64_t first, int64_t last, ChainHealth& out);
  std::vector<Point> points_;      // [ch * ncoins + coin]
  std::vector<int64_t> since_;     // begin_session's answer
  std::vector<int64_t> chan_top_;  // [ch]: newest height on the channel (for a coin that had none yet)
  size_t ncoins_;
};

}  // namespace lat
