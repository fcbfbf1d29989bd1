// Loss per subscription, from the audit chain (docs/api.md "Audit fields"). Each subscription of a connection
// numbers its frames (`n`) and names the previous frame's height (`prev`): a gap in n is frames lost after the
// server sent them, while heights between prev and height had nothing for the subscription (a quiet coin is not
// loss). The server's own drops (`lost`) and conflation (`conflated`) are in the chain too.
// State is one entry per subscription and one height per channel x coin: nothing grows with a height jump.
#pragma once
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "extract.hpp"

namespace lat {

// Who says the heights were lost: a gap in the chain, the server's `lost`, or a reconnect that nothing vouches for
// (not resumed, or the resume was refused or did not join on).
enum class LostBy { Chain, Server, Reconnect };
const char* lost_by_name(LostBy b);

struct LostRange {
  int ch = 0, coin = -1;        // coin -1: not known (a frame without samples)
  int64_t first = 0, last = 0;  // the lost frames' heights lie in [first, last]; first 0: not known
  uint64_t frames = 0;          // frames missing from the chain; 0 when not known (server, reconnect)
  LostBy by = LostBy::Chain;
  bool operator==(const LostRange&) const = default;
};

struct Regression {
  int ch = 0, coin = -1;
  int64_t from = 0, to = 0;  // height before, height after
};

struct ChainChannel {
  uint64_t chained_frames = 0;   // data frames that carried `n`
  uint64_t conflated = 0;        // frames the server replaced by newer ones: counted, not loss
  uint64_t lost_frames = 0;      // gaps in n: sent by the server, never received
  uint64_t dropped_heights = 0;  // heights in the server's `lost` ranges
  uint64_t lost_events = 0;      // frames carrying `lost` (the server also sends a loss notice for each)
  uint64_t regressions = 0;      // the height or the chain went back (a restarted server)
  uint64_t mismatches = 0;       // n followed on but prev was not the previous frame's height
  uint64_t ranges = 0;           // lost ranges (all counted; ChainHealth keeps the first few)
  // Across reconnects (resume.hpp): re-subscriptions nothing joins to the previous session (loss), the heights
  // in between, subscriptions resumed with `since`, resumes the server refused (loss), replayed frames received
  // (out of the percentiles, in the chain) and the replayed frames dropped as already received.
  uint64_t unjoined = 0, unjoined_heights = 0, resumed = 0, resume_refused = 0, replayed = 0, duplicates = 0;
  void merge(const ChainChannel& o);
};

struct ChainHealth {
  static constexpr size_t kMaxRanges = 20, kMaxRegressions = 5;  // kept for the report; all are counted
  std::array<ChainChannel, kNumChannels> ch{};
  std::vector<LostRange> ranges;
  uint64_t ranges_total = 0;
  std::vector<Regression> regressions;
  void merge(const ChainHealth& o);
  void add_range(const LostRange& r);
  void add_regression(const Regression& r);
  uint64_t chained_frames() const;
};

// One connection's chains (owned by its ConnHealth).
class ChainTracker {
 public:
  explicit ChainTracker(size_t ncoins);
  // A new session (connect + subscribe): the server numbers its subscriptions and chains afresh. Heights are
  // still compared with the previous session's, to see a restarted server's lower ones.
  void new_session();
  // One data frame of channel `ch` for `coin` (-1 when not known), `height` 0 without audit. `data_snapshot`:
  // data.isSnapshot. Returns whether the frame is a snapshot: a whole state that measures the subscription,
  // not the feed (chain: `snapshot`, or n == 1 without `prev`; no chain: isSnapshot or the subscription's first
  // frame). A resumed subscription's first frame has n 1 and `prev` (the `since` sent): a chained frame.
  bool on_frame(int ch, int coin, int64_t height, const Chain& c, bool data_snapshot, ChainHealth& out);

 private:
  static constexpr size_t kMaxSubs = 1 << 16;  // a server numbering more subscriptions than this is not followed
  struct Sub {
    int64_t n = 0, height = 0;
    bool same_height = false;  // two frames shared a height (streaming mode)
  };
  std::unordered_map<int64_t, Sub> subs_;
  std::vector<int64_t> last_height_;  // [ch * ncoins + coin]: newest height of a non-snapshot frame
  std::vector<uint8_t> seen_;         // [ch * ncoins + coin]: a frame arrived in this session
  size_t ncoins_;
};

}  // namespace lat
