// Feed health: what a latency percentile cannot show. Per channel, the longest time without a data frame
// (pongs and acks do not count; a quiet channel is information, not a failure), the server's "fell behind ...
// lost blocks" notices, subscriptions never acknowledged; per subscription, with --audit, the chain's lost,
// dropped and conflated frames (chain.hpp); per connection, the longest time without any data frame, idle
// timeouts and the downtime between a disconnect and the resubscribed reconnect. The verdict turns these into
// ok / quiet / unverified / silent / lost, HEALTHY / NOT HEALTHY / UNVERIFIED and the exit code.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chain.hpp"
#include "config.hpp"
#include "extract.hpp"
#include "resume.hpp"

namespace lat {

struct Health {
  std::array<int64_t, kNumChannels> max_silence_ns{};
  std::array<uint64_t, kNumChannels> loss_notices{}, acks_missing{}, acks_expected{};
  std::array<uint64_t, kNumChannels> data_frames{};  // every data frame, warmup and snapshots included
  int64_t max_conn_silence_ns = 0;  // longest time a connection went without any data frame while up
  std::vector<int64_t> l2_coin_silence_ns;  // per coin index: longest time without an l2Book frame for the coin
  // Audit mode, per coin index: the longest the client went without a change of the coin's book that the server
  // had: per live l2Book frame, min(time since the coin's previous frame, receive - block_ns). A coin whose book
  // did not change is not stale however long it is quiet; one whose change arrived late is.
  std::vector<int64_t> l2_coin_stale_ns;
  ChainHealth chain;                 // per-subscription loss, conflation and height regressions (audit)
  uint64_t audited_heights = 0;      // new highest heights seen, per connection session (audit)
  uint64_t loss_notices_other = 0;   // notices for a subscription we cannot attribute
  uint64_t idle_timeouts = 0;
  int64_t downtime_ns = 0, max_downtime_ns = 0;
  void merge(const Health& o);
  uint64_t missed_heights() const;  // lost frames + heights dropped by the server or unjoined, all channels
};

// What on_data makes of a data frame.
struct DataClass {
  bool snapshot = false;   // a whole state: out of the latency percentiles
  bool duplicate = false;  // replayed, and already received before the reconnect: dropped
};

// Per-connection tracking, owned by a Shard (called under its mutex).
class ConnHealth {
 public:
  ConnHealth(size_t ncoins, int64_t start_ns);
  // A session is about to subscribe: the `since` per [ch * ncoins + coin] (0: none); see resume.hpp.
  const std::vector<int64_t>& begin_session(bool resume) { return resume_.begin_session(resume); }
  // A session is subscribed: `subs[ch]` subscriptions went out. Ends a downtime; chains start afresh.
  void on_subscribed(const std::array<uint64_t, kNumChannels>& subs, int64_t now_ns, Health& h);
  // One data frame of channel ch; coin < 0: not a requested coin (or no sample).
  DataClass on_data(int ch, int coin, const Frame& f, int64_t recv_ns, Health& h);
  void on_ack(int ch);
  void on_disconnect(int64_t now_ns, Health& h);
  void finish(int64_t end_ns, Health& h);  // closes silences, downtime and unacked subscriptions

 private:
  void close_session(Health& h);
  std::array<int64_t, kNumChannels> last_recv_{};
  std::vector<int64_t> coin_last_;
  int64_t conn_last_ = 0;    // last data frame (or subscription) on this connection
  int64_t down_since_ = 0;
  int64_t top_height_ = 0;   // highest height of this session
  bool in_session_ = false;
  std::array<uint64_t, kNumChannels> expected_{}, acked_{};
  ChainTracker chain_;
  ResumeTracker resume_;
};

// "hlbook: this connection fell behind; {"type":"trades",...} lost blocks ..." -> the channel (or -1 when the
// text is a loss notice for another subscription); -2 when it is not a loss notice.
int loss_notice_channel(std::string_view error_text);
// "hlbook: cannot resume {"type":"trades",...} from height H: ..." -> the channel, -1 (another subscription) or
// -2 (not that notice).
int resume_refused_channel(std::string_view notice_text);

struct Verdict {
  std::array<std::string, kNumChannels> channel;  // ok, quiet, unverified, silent, lost, silent+lost
  std::array<std::string, kNumChannels> why;
  bool failed = false;      // a channel was silent or lost data
  bool unverified = false;  // --audit, and loss could not be checked (no frame carried the chain)
  bool healthy = true;      // neither
  std::string result;       // HEALTHY, NOT HEALTHY, UNVERIFIED
  int exit_code = 0;        // 0 healthy (or failed with --allow-loss), 3 failed, 4 unverified
  std::vector<std::string> checked, not_checked;
  std::string line;         // the table's last line
};
Verdict verdict(const Health& h, const Config& cfg, uint64_t disconnects);

}  // namespace lat
