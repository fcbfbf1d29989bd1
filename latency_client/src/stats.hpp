// Per-thread statistics shards and their merge.
//
// Each connection thread owns one Shard: the hot path (on_frame) tracks the feed's health (health.hpp, which also
// tells snapshot frames apart), takes the receive timestamp's latency, clamps negatives to 0 (counted), tracks
// per-coin per-channel exchange-time gaps, validates audit stamps, and records into both a run-total and a
// current-window Stats. The shard mutex is uncontended except when the reporter swaps a window out, so the
// reporter never walks histograms while a connection thread writes them.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "config.hpp"
#include "extract.hpp"
#include "health.hpp"
#include "histogram.hpp"

namespace lat {

// Audit split stages, in pipeline order; they add up (per frame, exactly) to the audit end-to-end row.
enum Stage : int { kExchToNode = 0, kNodeToRead = 1, kInServer = 2, kSendToRecv = 3, kNumStages = 4 };
const char* stage_name(int s);
const char* stage_short_name(int s);  // chart legends: the stage name and who owns its time

struct ChannelStats {
  Histogram lat;                               // receive - exchange time (ms `time`), µs
  std::array<Histogram, kNumStages> stage;     // only with --audit: a stage is sampled when both stamps are valid
  Histogram audit_e2e;                         // receive - block_ns, for frames whose four stages are all valid
  Histogram added;                             // receive - node_ns (node write -> client), stages 2..4 valid
  std::array<uint64_t, kNumStages> stage_invalid{};  // stamp missing, zero or out of order: not sampled
  // frames: measured data frames; snapshot_frames: whole states (a subscription's first frame, isSnapshot,
  // audit `snapshot`), counted apart and kept out of every histogram here.
  uint64_t frames = 0, samples = 0, negatives = 0, gaps = 0, audited_frames = 0, snapshot_frames = 0;
  void merge(const ChannelStats& o);
};

struct Counters {
  uint64_t frames = 0, bytes = 0, bad = 0, errors = 0, pongs = 0, acks = 0, other = 0, unknown_coin = 0;
  uint64_t disconnects = 0, reconnects = 0, warmup_discarded = 0;
  void merge(const Counters& o);
};

// One audited frame's values in µs (tests only, Config::keep_trace): stages (-1 = not sampled), the audit
// end-to-end value (-1 = not sampled) and the ms-row value of the frame's first sample.
struct TraceRow {
  std::array<int64_t, kNumStages> stage;
  int64_t e2e, ms_row;
};

struct Stats {
  std::array<ChannelStats, kNumChannels> ch;
  std::vector<std::array<Histogram, kNumChannels>> coin;  // per coin (index = coin index), only with --per-coin
  Counters c;
  Health health;                                          // run totals only (windows leave it empty)
  std::vector<TraceRow> trace;
  void merge(const Stats& o);
};

using CoinIndex = std::map<std::string, int, std::less<>>;

class Shard {
 public:
  Shard(const Config& cfg, const CoinIndex& coins, int64_t warmup_end_ns, std::atomic<uint64_t>* sample_counter);

  // Registers one connection on this shard; returns its slot (gap, silence and chain state are per connection).
  int add_connection(int64_t now_ns);
  // A (re)connected session is about to subscribe: per [ch * ncoins + coin], the `since` to send (0: none).
  std::vector<int64_t> begin_session(int slot);
  // A (re)connected session sent its subscriptions.
  void on_subscribed(int slot, int64_t now_ns);
  // Hot path. recv_ns = wall clock (Unix ns) taken after decompression, before parsing.
  void on_frame(int slot, const Frame& f, int64_t recv_ns, size_t bytes);
  void on_bad_frame(size_t bytes);
  void on_disconnect(int slot, int64_t now_ns, bool idle_timeout);
  void on_reconnect();
  // The run ended at end_ns: closes every connection's open silence, downtime and acks.
  void finish(int64_t end_ns);

  Stats take_window();    // returns the current window and starts a new one
  Stats total_copy();

 private:

  std::mutex m_;
  const Config& cfg_;
  const CoinIndex& coins_;
  int64_t warmup_end_ns_;
  int64_t gap_ms_;
  std::atomic<uint64_t>* sample_counter_;
  Stats total_, window_;
  void record_audit(int ch, const Frame& f, int64_t recv_ns, int64_t ms_row_us);
  std::vector<std::array<std::vector<int64_t>, kNumChannels>> last_time_;  // [slot][channel][coin]
  std::vector<ConnHealth> health_;                                           // [slot]
  std::array<uint64_t, kNumChannels> subs_{};                                // subscriptions per session
};

}  // namespace lat
