// Feed health: what a latency percentile cannot show. Per channel, the longest time without a data frame
// (silence; pongs and acks do not count), the server's "fell behind ... lost blocks" notices, subscriptions never
// acknowledged; per connection, block heights that never arrived (audit mode), idle timeouts and the downtime
// between a disconnect and the resubscribed reconnect. The verdict turns these into ok / silent / lost.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config.hpp"
#include "extract.hpp"

namespace lat {

struct Health {
  static constexpr size_t kMaxRanges = 20;  // missing-height ranges kept for the report (all are counted)
  std::array<int64_t, kNumChannels> max_silence_ns{};
  std::array<uint64_t, kNumChannels> loss_notices{}, acks_missing{}, acks_expected{};
  std::vector<int64_t> l2_coin_silence_ns;  // per coin index: longest time without an l2Book frame for the coin
  // Audit mode, per coin index: the longest the client went without a change of the coin's book that the server
  // had: per l2Book frame, min(time since the coin's previous frame, receive - block_ns). A coin whose book did not
  // change is not stale however long it is quiet; one whose change arrived late is.
  std::vector<int64_t> l2_coin_stale_ns;
  uint64_t missing_heights = 0;
  std::vector<std::pair<int64_t, int64_t>> missing_ranges;  // [first, last], first kMaxRanges of them
  uint64_t audited_heights = 0;                             // distinct heights seen (audit mode)
  uint64_t loss_notices_other = 0;                          // notices for a subscription we cannot attribute
  uint64_t idle_timeouts = 0;
  int64_t downtime_ns = 0, max_downtime_ns = 0;
  void merge(const Health& o);
  void add_missing(int64_t first, int64_t last);
};

// Per-connection tracking, owned by a Shard (called under its mutex).
class ConnHealth {
 public:
  ConnHealth(size_t ncoins, int64_t start_ns);
  // A session is subscribed: `subs[ch]` subscriptions went out. Ends a downtime.
  void on_subscribed(const std::array<uint64_t, kNumChannels>& subs, int64_t now_ns, Health& h);
  // coin < 0: not a requested coin; block_ns: the frame's audit block time (0 without audit)
  void on_data(int ch, int coin, int64_t recv_ns, int64_t block_ns, Health& h);
  void on_height(int64_t height, Health& h);
  void on_ack(int ch);
  void on_disconnect(int64_t now_ns, Health& h);
  void finish(int64_t end_ns, Health& h);  // closes silences, downtime, unacked subscriptions and height tracking

 private:
  void close_session(Health& h);
  static constexpr int64_t kReorder = 256;  // a height is missing once one this much newer arrived (or at the end)
  std::array<int64_t, kNumChannels> last_recv_{};
  std::vector<int64_t> coin_last_;
  int64_t down_since_ = 0;
  bool in_session_ = false;
  std::array<uint64_t, kNumChannels> expected_{}, acked_{};
  int64_t base_ = 0;        // lowest height not yet decided
  std::deque<bool> seen_;   // seen_[i]: height base_ + i arrived
};

// "hlbook: this connection fell behind; {"type":"trades",...} lost blocks ..." -> the channel (or -1 when the
// text is a loss notice for another subscription); -2 when it is not a loss notice.
int loss_notice_channel(std::string_view error_text);

struct Verdict {
  std::array<std::string, kNumChannels> channel;  // "ok", "silent", "lost", "silent+lost"
  std::array<std::string, kNumChannels> why;
  bool healthy = true;
  std::string line;  // the table's last line
};
Verdict verdict(const Health& h, const Config& cfg, uint64_t disconnects);

}  // namespace lat
