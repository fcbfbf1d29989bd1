// The audit chain on synthetic frames: quiet subscriptions are not loss, a dropped frame is named by its height,
// the server's `lost` is loss and `conflated` is not, huge jumps stay sane, regressions are reported and reset the
// base, streaming frames share heights, reconnects restart the chains; which frames are snapshots.
#include <gtest/gtest.h>

#include "chain.hpp"

using namespace lat;

namespace {

constexpr int BTC = 0, ETH = 1;

Chain link(int64_t sub, int64_t n, int64_t prev, bool snapshot = false) {
  Chain c;
  c.present = true;
  c.sub = sub;
  c.n = n;
  c.prev = prev;
  c.snapshot = snapshot;
  return c;
}

// Feeds one subscription's frames (n from 1, prev = the previous height) at the given heights.
struct Feed {
  ChainTracker t{2};
  ChainHealth h;
  bool frame(int ch, int coin, int64_t height, const Chain& c, bool data_snapshot = false) {
    return t.on_frame(ch, coin, height, c, data_snapshot, h);
  }
};

}  // namespace

TEST(Chain, QuietSubscriptionIsNotLoss) {
  Feed f;
  // BTC's book changed at 100, 150 and 400 only: prev vouches for the heights between.
  EXPECT_TRUE(f.frame(kL2Book, BTC, 100, link(1, 1, 0, true)));
  EXPECT_FALSE(f.frame(kL2Book, BTC, 150, link(1, 2, 100)));
  EXPECT_FALSE(f.frame(kL2Book, BTC, 400, link(1, 3, 150)));
  EXPECT_EQ(f.h.ch[kL2Book].chained_frames, 3u);
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 0u);
  EXPECT_EQ(f.h.ch[kL2Book].mismatches, 0u);
  EXPECT_TRUE(f.h.ranges.empty());
  EXPECT_EQ(f.h.ranges_total, 0u);
}

TEST(Chain, OneDroppedFrameIsNamedByItsHeight) {
  Feed f;
  f.frame(kTrades, ETH, 100, link(2, 1, 0, true));
  f.frame(kTrades, ETH, 110, link(2, 2, 100));
  // n = 3 (height 130) never arrived; n = 4 names it as its prev.
  f.frame(kTrades, ETH, 140, link(2, 4, 130));
  EXPECT_EQ(f.h.ch[kTrades].lost_frames, 1u);
  ASSERT_EQ(f.h.ranges.size(), 1u);
  EXPECT_EQ(f.h.ranges[0], (LostRange{kTrades, ETH, 130, 130, 1}));
  // Two more missing (n 5, 6): the last at 170, the other after 140.
  f.frame(kTrades, ETH, 180, link(2, 7, 170));
  EXPECT_EQ(f.h.ch[kTrades].lost_frames, 3u);
  ASSERT_EQ(f.h.ranges.size(), 2u);
  EXPECT_EQ(f.h.ranges[1], (LostRange{kTrades, ETH, 141, 170, 2}));
  EXPECT_EQ(f.h.ch[kTrades].ranges, 2u);
}

TEST(Chain, ServerLostRangeIsLossConflatedIsNot) {
  Feed f;
  f.frame(kTrades, BTC, 100, link(1, 1, 0, true));
  Chain c = link(1, 2, 100);
  c.lost_first = 101;
  c.lost_last = 120;
  f.frame(kTrades, BTC, 121, c);
  EXPECT_EQ(f.h.ch[kTrades].dropped_heights, 20u);
  EXPECT_EQ(f.h.ch[kTrades].lost_events, 1u);
  EXPECT_EQ(f.h.ch[kTrades].lost_frames, 0u);  // n followed on: nothing lost after sending
  ASSERT_EQ(f.h.ranges.size(), 1u);
  EXPECT_EQ(f.h.ranges[0], (LostRange{kTrades, BTC, 101, 120, 0, LostBy::Server}));

  f.frame(kL2Book, BTC, 100, link(2, 1, 0, true));
  Chain k = link(2, 2, 100);
  k.conflated = 3;
  f.frame(kL2Book, BTC, 104, k);
  k = link(2, 3, 104);
  k.conflated = 2;
  f.frame(kL2Book, BTC, 107, k);
  EXPECT_EQ(f.h.ch[kL2Book].conflated, 5u);
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 0u);
  EXPECT_EQ(f.h.ch[kL2Book].ranges, 0u);
}

TEST(Chain, NumbersOfConflatedOrDroppedFramesAreNotLostTwice) {
  // A server may number the frames it conflated or dropped: the gap in n then sits behind a prev that is the
  // last frame received, and `conflated` / `lost` already count it.
  Feed f;
  f.frame(kL2Book, BTC, 100, link(1, 1, 0, true));
  Chain k = link(1, 4, 100);
  k.conflated = 2;
  f.frame(kL2Book, BTC, 110, k);
  EXPECT_EQ(f.h.ch[kL2Book].conflated, 2u);
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 0u);
  f.frame(kTrades, BTC, 100, link(2, 1, 0, true));
  Chain d = link(2, 5, 100);
  d.lost_first = 101;
  d.lost_last = 103;
  f.frame(kTrades, BTC, 104, d);
  EXPECT_EQ(f.h.ch[kTrades].dropped_heights, 3u);
  EXPECT_EQ(f.h.ch[kTrades].lost_frames, 0u);
  EXPECT_EQ(f.h.ranges_total, 1u);
  // Frames lost after sending are still lost when the frame after them was also conflated.
  k = link(1, 6, 118);
  k.conflated = 1;
  f.frame(kL2Book, BTC, 120, k);
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 1u);
  EXPECT_EQ(f.h.ranges.back(), (LostRange{kL2Book, BTC, 118, 118, 1}));
}

TEST(Chain, HugeJumpsStaySane) {
  Feed f;
  constexpr int64_t kHuge = 1'000'000'000'000'000;
  f.frame(kL2Book, BTC, 100, link(1, 1, 0, true));
  f.frame(kL2Book, BTC, kHuge, link(1, 2, 100));  // a height jump: nothing lost, nothing allocated for it
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 0u);
  EXPECT_EQ(f.h.ch[kL2Book].regressions, 0u);
  f.frame(kL2Book, BTC, kHuge + 5, link(1, kHuge, kHuge + 4));  // an n jump: counted, one range
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, static_cast<uint64_t>(kHuge - 3));
  ASSERT_EQ(f.h.ranges.size(), 1u);
  EXPECT_EQ(f.h.ranges[0].first, kHuge + 1);
  EXPECT_EQ(f.h.ranges[0].last, kHuge + 4);
  f.frame(kL2Book, BTC, kHuge + 6, link(1, kHuge + 1, kHuge + 5));
  EXPECT_EQ(f.h.ranges_total, 1u);
}

TEST(Chain, RegressionIsReportedAndTheBaseReset) {
  Feed f;
  f.frame(kL2Book, BTC, 500, link(1, 1, 0, true));
  f.frame(kL2Book, BTC, 510, link(1, 2, 500));
  // The server restarted: a new session whose heights start lower.
  f.t.new_session();
  EXPECT_TRUE(f.frame(kL2Book, BTC, 20, link(1, 1, 0, true)));  // its snapshot is not compared
  f.frame(kL2Book, BTC, 21, link(1, 2, 20));
  f.frame(kL2Book, BTC, 22, link(1, 3, 21));
  EXPECT_EQ(f.h.ch[kL2Book].regressions, 1u);
  ASSERT_EQ(f.h.regressions.size(), 1u);
  EXPECT_EQ(f.h.regressions[0].from, 510);
  EXPECT_EQ(f.h.regressions[0].to, 21);
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 0u);  // no phantom loss across the restart
  // Within a session, a chain that starts again (n back to 1) is one regression, not loss.
  f.frame(kL2Book, BTC, 15, link(1, 1, 0, true));
  f.frame(kL2Book, BTC, 16, link(1, 2, 15));
  EXPECT_EQ(f.h.ch[kL2Book].regressions, 2u);
  EXPECT_EQ(f.h.ch[kL2Book].lost_frames, 0u);
  EXPECT_EQ(f.h.ranges_total, 0u);
}

TEST(Chain, StreamingFramesShareHeights) {
  Feed f;
  f.frame(kTrades, BTC, 100, link(1, 1, 0, true));
  f.frame(kTrades, BTC, 100, link(1, 2, 100));
  f.frame(kTrades, BTC, 100, link(1, 3, 100));
  f.frame(kTrades, BTC, 101, link(1, 4, 100));
  EXPECT_EQ(f.h.ch[kTrades].lost_frames, 0u);
  EXPECT_EQ(f.h.ch[kTrades].mismatches, 0u);
  EXPECT_EQ(f.h.ch[kTrades].regressions, 0u);
  f.frame(kTrades, BTC, 101, link(1, 5, 101));
  // n 6 and 7 lost, the last at 101: the other may share the last received frame's height.
  f.frame(kTrades, BTC, 102, link(1, 8, 101));
  EXPECT_EQ(f.h.ch[kTrades].lost_frames, 2u);
  ASSERT_EQ(f.h.ranges.size(), 1u);
  EXPECT_EQ(f.h.ranges[0], (LostRange{kTrades, BTC, 101, 101, 2}));
}

TEST(Chain, ReconnectRestartsChainsWithoutPhantomLoss) {
  Feed f;
  for (int64_t n = 1; n <= 5; ++n) f.frame(kBbo, ETH, 100 + n, link(3, n, n > 1 ? 99 + n : 0, n == 1));
  f.t.new_session();
  // New sub numbers, n from 1 again, heights going on.
  for (int64_t n = 1; n <= 5; ++n) f.frame(kBbo, ETH, 200 + n, link(1, n, n > 1 ? 199 + n : 0, n == 1));
  EXPECT_EQ(f.h.ch[kBbo].chained_frames, 10u);
  EXPECT_EQ(f.h.ch[kBbo].lost_frames, 0u);
  EXPECT_EQ(f.h.ch[kBbo].regressions, 0u);
  EXPECT_EQ(f.h.ranges_total, 0u);
}

TEST(Chain, WhichFramesAreSnapshots) {
  Feed f;
  const Chain none;
  // No chain: each subscription's first frame per session, and isSnapshot frames.
  EXPECT_TRUE(f.frame(kL2Book, BTC, 0, none));
  EXPECT_FALSE(f.frame(kL2Book, BTC, 0, none));
  EXPECT_TRUE(f.frame(kL2Book, ETH, 0, none));
  EXPECT_TRUE(f.frame(kTrades, BTC, 0, none));  // recent trades
  EXPECT_FALSE(f.frame(kTrades, BTC, 0, none));
  EXPECT_TRUE(f.frame(kTrades, BTC, 0, none, true));
  f.t.new_session();
  EXPECT_TRUE(f.frame(kL2Book, BTC, 0, none));
  EXPECT_FALSE(f.frame(kL2Book, BTC, 0, none));
  // Chain: `snapshot` (an l4Book snapshot after a fall-behind, say) and a first frame; not the rest.
  EXPECT_TRUE(f.frame(kBbo, BTC, 10, link(4, 1, 0)));
  EXPECT_FALSE(f.frame(kBbo, BTC, 11, link(4, 2, 10)));
  EXPECT_TRUE(f.frame(kBbo, BTC, 12, link(4, 3, 11, true)));
  EXPECT_EQ(f.h.ch[kBbo].lost_frames, 0u);
}
