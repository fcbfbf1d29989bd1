// Resume across reconnects without sockets: which `since` each subscription asks for, the replayed frames
// already received dropped (streaming heights included), a resume the server did not honour and a
// re-subscription without resume are loss with their heights, the "cannot resume" notice, `replayed` read from
// a frame, and --resume refused without --audit.
#include <gtest/gtest.h>

#include "chain.hpp"
#include "cli.hpp"
#include "health.hpp"
#include "resume.hpp"

using namespace lat;

namespace {

constexpr int BTC = 0, ETH = 1;

Chain link(int64_t n, int64_t prev) {
  Chain c;
  c.present = true;
  c.sub = 1;
  c.n = n;
  c.prev = prev;
  return c;
}

size_t at(int ch, int coin) { return static_cast<size_t>(ch) * 2 + static_cast<size_t>(coin); }

// A first session in which BTC's trades arrived at 100, 101 and 101 (two frames at 101) and ETH's none.
struct Resumed {
  ResumeTracker t{2};
  ChainHealth h;
  Resumed() {
    t.begin_session(false);
    t.on_subscribed(h);
    t.on_frame(kTrades, BTC, 100, link(1, 0), false, h);
    t.on_frame(kTrades, BTC, 101, link(2, 100), false, h);
    t.on_frame(kTrades, BTC, 101, link(3, 101), false, h);
  }
};

}  // namespace

TEST(Resume, AsksFromBeforeTheLastHeightOrderedChannelsOnly) {
  Resumed r;
  const std::vector<int64_t> since = r.t.begin_session(true);
  EXPECT_EQ(since[at(kTrades, BTC)], 100);  // 101 is asked again whole: it may have had more frames
  EXPECT_EQ(since[at(kTrades, ETH)], 100);  // nothing of ETH yet: from the channel's newest height
  EXPECT_EQ(since[at(kL2Book, BTC)], 0);    // a snapshot channel: its first frame states the book anyway
  r.t.on_subscribed(r.h);
  EXPECT_EQ(r.h.ch[kTrades].resumed, 2u);
  // Without --resume nothing asks for a since.
  for (int64_t s : r.t.begin_session(false)) EXPECT_EQ(s, 0);
}

TEST(Resume, DropsTheReplayedFramesAlreadyReceived) {
  Resumed r;
  r.t.begin_session(true);
  // The server replays every BTC frame above 100: the two at 101 it had, one more at 101 and 102.
  EXPECT_TRUE(r.t.on_frame(kTrades, BTC, 101, link(1, 100), true, r.h));
  EXPECT_TRUE(r.t.on_frame(kTrades, BTC, 101, link(2, 101), true, r.h));
  EXPECT_FALSE(r.t.on_frame(kTrades, BTC, 101, link(3, 101), true, r.h));  // sent while we were away
  EXPECT_FALSE(r.t.on_frame(kTrades, BTC, 102, link(4, 101), true, r.h));
  EXPECT_FALSE(r.t.on_frame(kTrades, BTC, 104, link(5, 102), false, r.h));  // live
  const ChainChannel& c = r.h.ch[kTrades];
  EXPECT_EQ(c.duplicates, 2u);
  EXPECT_EQ(c.replayed, 4u);
  EXPECT_EQ(c.unjoined, 0u);
  EXPECT_EQ(r.h.ranges_total, 0u);
  // Cut again after the live frame: from 103, the one frame at 104 skipped.
  const std::vector<int64_t> since = r.t.begin_session(true);
  EXPECT_EQ(since[at(kTrades, BTC)], 103);
  EXPECT_TRUE(r.t.on_frame(kTrades, BTC, 104, link(1, 103), true, r.h));
  EXPECT_EQ(r.h.ch[kTrades].unjoined, 0u);
}

TEST(Resume, CutDuringTheReplayDropsTheSameFramesAgain) {
  Resumed r;
  r.t.begin_session(true);
  EXPECT_TRUE(r.t.on_frame(kTrades, BTC, 101, link(1, 100), true, r.h));  // one of two, then cut
  EXPECT_EQ(r.t.begin_session(true)[at(kTrades, BTC)], 100);
  EXPECT_TRUE(r.t.on_frame(kTrades, BTC, 101, link(1, 100), true, r.h));
  EXPECT_TRUE(r.t.on_frame(kTrades, BTC, 101, link(2, 101), true, r.h));
  EXPECT_FALSE(r.t.on_frame(kTrades, BTC, 102, link(3, 101), true, r.h));
  EXPECT_EQ(r.h.ch[kTrades].duplicates, 3u);
  EXPECT_EQ(r.h.ch[kTrades].unjoined, 0u);
}

TEST(Resume, NotHonouredIsLossFromSince) {
  Resumed r;
  r.t.begin_session(true);
  // A fresh chain (no prev): the server subscribed afresh; 101..104 are vouched for by nobody.
  EXPECT_FALSE(r.t.on_frame(kTrades, BTC, 105, link(1, 0), false, r.h));
  EXPECT_EQ(r.h.ch[kTrades].unjoined, 1u);
  EXPECT_EQ(r.h.ch[kTrades].unjoined_heights, 4u);
  ASSERT_EQ(r.h.ranges.size(), 1u);
  EXPECT_EQ(r.h.ranges[0], (LostRange{kTrades, BTC, 101, 104, 0, LostBy::Reconnect}));
  // A chain whose prev is past the since: the frames up to prev were not replayed.
  Resumed q;
  q.t.begin_session(true);
  q.t.on_frame(kTrades, BTC, 107, link(1, 103), true, q.h);
  ASSERT_EQ(q.h.ranges.size(), 1u);
  EXPECT_EQ(q.h.ranges[0], (LostRange{kTrades, BTC, 101, 103, 0, LostBy::Reconnect}));
}

TEST(Resume, WithoutResumeTheHeightsBetweenSessionsAreLoss) {
  Resumed r;
  r.t.begin_session(false);
  r.t.on_frame(kTrades, BTC, 104, link(1, 0), false, r.h);
  r.t.on_frame(kTrades, BTC, 105, link(2, 104), false, r.h);
  r.t.on_frame(kTrades, ETH, 104, link(1, 0), false, r.h);  // nothing of ETH before: nothing to join
  EXPECT_EQ(r.h.ch[kTrades].unjoined, 1u);
  EXPECT_EQ(r.h.ch[kTrades].unjoined_heights, 2u);
  ASSERT_EQ(r.h.ranges.size(), 1u);
  EXPECT_EQ(r.h.ranges[0], (LostRange{kTrades, BTC, 102, 103, 0, LostBy::Reconnect}));
  // Even the very next height is not vouched for (more frames at 101 may have been sent): still counted.
  Resumed q;
  q.t.begin_session(false);
  q.t.on_frame(kTrades, BTC, 102, link(1, 0), false, q.h);
  EXPECT_EQ(q.h.ch[kTrades].unjoined, 1u);
  EXPECT_EQ(q.h.ch[kTrades].unjoined_heights, 0u);
  EXPECT_TRUE(q.h.ranges.empty());
}

TEST(Resume, ResumedFirstFrameIsChainedNotASnapshot) {
  ChainTracker t(2);
  ChainHealth h;
  EXPECT_TRUE(t.on_frame(kTrades, BTC, 100, link(1, 0), false, h));     // a fresh chain's first frame
  t.new_session();
  EXPECT_FALSE(t.on_frame(kTrades, BTC, 101, link(1, 100), false, h));  // prev = since: chained
  EXPECT_EQ(h.ch[kTrades].lost_frames, 0u);
}

TEST(Resume, RefusedNoticeNamesItsChannel) {
  EXPECT_EQ(resume_refused_channel(R"(hlbook: cannot resume {"type":"trades","coin":"BTC"} from height 5: the oldest height it can replay is 9; subscribed afresh)"),
            kTrades);
  EXPECT_EQ(resume_refused_channel(R"(hlbook: cannot resume {"type":"l4Book","coin":"BTC"} from height 5)"), -1);
  EXPECT_EQ(resume_refused_channel("hlbook: this connection fell behind; {\"type\":\"trades\"}"), -2);
}

TEST(Resume, ExtractsReplayed) {
  Extractor ex;
  Frame f;
  ASSERT_EQ(ex.parse(R"({"channel":"trades","data":[{"coin":"BTC","time":5}],"replayed":true,"audit":{"height":7,"sub":1,"n":1,"prev":6}})", f),
            Kind::Trades);
  EXPECT_TRUE(f.replayed);
  EXPECT_EQ(f.chain.prev, 6);
  ASSERT_EQ(ex.parse(R"({"channel":"trades","data":[{"coin":"BTC","time":5}],"audit":{"height":7,"sub":1,"n":2,"prev":6}})", f),
            Kind::Trades);
  EXPECT_FALSE(f.replayed);  // reset between frames
  ASSERT_EQ(ex.parse(R"({"channel":"trades","data":[{"coin":"BTC","time":5}],"replayed":true})", f), Kind::Trades);
  EXPECT_TRUE(f.replayed);
  // The name inside the data is not the key.
  ASSERT_EQ(ex.parse(R"({"channel":"bbo","data":{"coin":"replayed","time":5},"audit":{"height":7}})", f), Kind::Bbo);
  EXPECT_FALSE(f.replayed);
  EXPECT_EQ(f.audit.height, 7);
  EXPECT_EQ(ex.parse(R"({"channel":"trades","data":[],"replayed":1})", f), Kind::Bad);
}

TEST(Resume, FlagNeedsAudit) {
  Config c;
  auto r = parse_cli({"--url", "ws://h:1/ws", "--coins", "BTC", "--channels", "trades", "--resume"}, c);
  EXPECT_EQ(r.action, CliAction::Error);
  EXPECT_NE(r.error.find("--resume needs --audit"), std::string::npos) << r.error;
  Config d;
  r = parse_cli({"--url", "ws://h:1/ws", "--coins", "BTC", "--channels", "trades", "--resume", "--audit"}, d);
  EXPECT_EQ(r.action, CliAction::Run) << r.error;
  EXPECT_TRUE(d.resume);
  EXPECT_NE(help_text().find("--resume"), std::string::npos);
}
