// Shard hot path (latency, clamping, gaps, audit split) and Stats merging; see stats.hpp.
#include "stats.hpp"

namespace lat {

const char* stage_name(int s) {
  static const char* names[] = {"block_to_node_write", "node_write_to_read", "read_to_sent",
                                "sent_to_receive"};
  return (s >= 0 && s < kNumStages) ? names[s] : "?";
}

const char* stage_short_name(int s) {
  // The stage names, with who owns the time for a reader of the chart.
  static const char* names[] = {"block_to_node_write (chain, node)", "node_write_to_read (node, hlbook)",
                                "read_to_sent (hlbook)", "sent_to_receive (network)"};
  return (s >= 0 && s < kNumStages) ? names[s] : "?";
}

void ChannelStats::merge(const ChannelStats& o) {
  lat.merge(o.lat);
  for (int i = 0; i < kNumStages; ++i) {
    stage[i].merge(o.stage[i]);
    stage_invalid[i] += o.stage_invalid[i];
  }
  audit_e2e.merge(o.audit_e2e);
  added.merge(o.added);
  frames += o.frames;
  samples += o.samples;
  negatives += o.negatives;
  gaps += o.gaps;
  audited_frames += o.audited_frames;
  snapshot_frames += o.snapshot_frames;
}

void Counters::merge(const Counters& o) {
  frames += o.frames;
  bytes += o.bytes;
  bad += o.bad;
  errors += o.errors;
  pongs += o.pongs;
  acks += o.acks;
  other += o.other;
  unknown_coin += o.unknown_coin;
  disconnects += o.disconnects;
  reconnects += o.reconnects;
  warmup_discarded += o.warmup_discarded;
}

void Stats::merge(const Stats& o) {
  for (int i = 0; i < kNumChannels; ++i) ch[i].merge(o.ch[i]);
  if (coin.size() < o.coin.size()) coin.resize(o.coin.size());
  for (size_t i = 0; i < o.coin.size(); ++i)
    for (int c = 0; c < kNumChannels; ++c) coin[i][c].merge(o.coin[i][c]);
  c.merge(o.c);
  health.merge(o.health);
  trace.insert(trace.end(), o.trace.begin(), o.trace.end());
}

Shard::Shard(const Config& cfg, const CoinIndex& coins, int64_t warmup_end_ns, std::atomic<uint64_t>* counter)
    : cfg_(cfg),
      coins_(coins),
      warmup_end_ns_(warmup_end_ns),
      gap_ms_(static_cast<int64_t>(cfg.gap_s * 1000.0)),
      sample_counter_(counter) {
  if (cfg.per_coin) {
    total_.coin.resize(coins.size());
    window_.coin.resize(coins.size());
  }
  for (int ch : cfg.channels) subs_[ch] = coins.size();
}

int Shard::add_connection(int64_t now_ns) {
  std::lock_guard lk(m_);
  last_time_.emplace_back();
  for (auto& v : last_time_.back()) v.assign(coins_.size(), 0);
  health_.emplace_back(coins_.size(), now_ns);
  return static_cast<int>(last_time_.size()) - 1;
}

std::vector<int64_t> Shard::begin_session(int slot) {
  std::lock_guard lk(m_);
  return health_[slot].begin_session(cfg_.resume);
}

void Shard::on_subscribed(int slot, int64_t now_ns) {
  std::lock_guard lk(m_);
  health_[slot].on_subscribed(subs_, now_ns, total_.health);
}

static int channel_of(Kind k) {
  switch (k) {
    case Kind::L2Book: return kL2Book;
    case Kind::Trades: return kTrades;
    case Kind::Bbo: return kBbo;
    default: return -1;
  }
}

// A stage [a, b] of the audit chain: both stamps known (the server leaves out, or older servers send 0 for, a
// stamp it does not have) and in order. In µs, as the difference of the truncated stamps, so that the stages of
// a frame add up exactly to its end-to-end value.
static bool stage_us(int64_t a_ns, int64_t b_ns, int64_t& out) {
  if (a_ns <= 0 || b_ns <= 0 || b_ns < a_ns) return false;
  out = b_ns / 1000 - a_ns / 1000;
  return true;
}

void Shard::record_audit(int ch, const Frame& f, int64_t recv_ns, int64_t ms_row_us) {
  const Audit& a = f.audit;
  const int64_t ends[kNumStages + 1] = {a.block_ns, a.node_ns, a.read_ns, a.sent_ns, recv_ns};
  std::array<int64_t, kNumStages> v;
  bool valid[kNumStages];
  for (int k = 0; k < kNumStages; ++k) {
    valid[k] = stage_us(ends[k], ends[k + 1], v[k]);
    if (!valid[k]) v[k] = -1;
  }
  const bool all = valid[0] && valid[1] && valid[2] && valid[3];
  const bool added = valid[1] && valid[2] && valid[3];
  for (Stats* s : {&total_, &window_}) {
    ChannelStats& cs = s->ch[ch];
    cs.audited_frames++;
    for (int k = 0; k < kNumStages; ++k) {
      if (valid[k]) cs.stage[k].record(static_cast<uint64_t>(v[k]));
      else cs.stage_invalid[k]++;
    }
    if (all) cs.audit_e2e.record(static_cast<uint64_t>(v[0] + v[1] + v[2] + v[3]));
    if (added) cs.added.record(static_cast<uint64_t>(v[1] + v[2] + v[3]));
  }
  if (cfg_.keep_trace) total_.trace.push_back({v, all ? v[0] + v[1] + v[2] + v[3] : -1, ms_row_us});
}

void Shard::on_frame(int slot, const Frame& f, int64_t recv_ns, size_t bytes) {
  std::lock_guard lk(m_);
  Stats* both[2] = {&total_, &window_};
  for (Stats* s : both) {
    s->c.frames++;
    s->c.bytes += bytes;
  }
  int ch = channel_of(f.kind);
  if (ch < 0) {
    for (Stats* s : both) {
      switch (f.kind) {
        case Kind::Pong: s->c.pongs++; break;
        case Kind::SubAck: s->c.acks++; break;
        case Kind::Error: s->c.errors++; break;
        case Kind::Bad: s->c.bad++; break;
        default: s->c.other++; break;
      }
    }
    if (f.kind == Kind::SubAck) health_[slot].on_ack(f.ack_channel);
    // Loss notices come on hlbookNotice (older servers sent them as errors).
    if (f.kind == Kind::Error || f.kind == Kind::Notice) {
      const int lost = loss_notice_channel(f.error);
      if (lost >= 0) total_.health.loss_notices[lost]++;
      else if (lost == -1) total_.health.loss_notices_other++;
      const int refused = resume_refused_channel(f.error);
      if (refused >= 0) total_.health.chain.ch[refused].resume_refused++;
      else if (refused == -1) total_.health.loss_notices_other++;
    }
    return;
  }
  // The frame's subscription is its channel and its first sample's coin.
  int coin = -1;
  if (f.nsamples) {
    auto it = coins_.find(std::string_view(f.samples[0].coin));
    if (it != coins_.end()) coin = it->second;
  }
  const DataClass cls = health_[slot].on_data(ch, coin, f, recv_ns, total_.health);
  if (cls.duplicate) return;  // counted by the chain; received before the reconnect, measured then
  if (cls.snapshot) {
    // A whole state measures the subscription, not the feed: counted apart (warmup or not), in no histogram,
    // and no baseline for gaps.
    for (Stats* s : both) s->ch[ch].snapshot_frames++;
    return;
  }
  // A replayed frame's latency is the reconnect's, not the feed's: it only moves the gap baseline on.
  const bool measuring = recv_ns >= warmup_end_ns_ && !f.replayed;
  const int64_t recv_us = recv_ns / 1000;
  uint64_t recorded = 0;
  for (size_t i = 0; i < f.nsamples; ++i) {
    const Sample& smp = f.samples[i];
    int c = i == 0 ? coin : -1;  // the first sample's coin was looked up above
    if (c < 0) {
      auto it = coins_.find(std::string_view(smp.coin));
      if (it == coins_.end()) {
        for (Stats* s : both) s->c.unknown_coin++;
        continue;
      }
      c = it->second;
    }
    int64_t& last = last_time_[slot][ch][c];
    const bool gap = last != 0 && smp.time_ms - last > gap_ms_;
    if (smp.time_ms > last) last = smp.time_ms;
    if (!measuring) {
      if (!f.replayed)
        for (Stats* s : both) s->c.warmup_discarded++;
      continue;
    }
    const int64_t d = recv_us - smp.time_ms * 1000;
    const bool neg = d < 0;
    const uint64_t v = neg ? 0 : static_cast<uint64_t>(d);
    for (Stats* s : both) {
      ChannelStats& cs = s->ch[ch];
      cs.lat.record(v);
      cs.samples++;
      cs.negatives += neg;
      cs.gaps += gap;
      if (!s->coin.empty()) s->coin[c][ch].record(v);
    }
    ++recorded;
  }
  if (!measuring) return;
  for (Stats* s : both) s->ch[ch].frames++;
  if (f.audit.present && recorded)
    record_audit(ch, f, recv_ns, recv_us - f.samples[0].time_ms * 1000);
  if (sample_counter_ && recorded) sample_counter_->fetch_add(recorded, std::memory_order_relaxed);
}

void Shard::on_bad_frame(size_t bytes) {
  std::lock_guard lk(m_);
  for (Stats* s : {&total_, &window_}) {
    s->c.frames++;
    s->c.bytes += bytes;
    s->c.bad++;
  }
}

void Shard::on_disconnect(int slot, int64_t now_ns, bool idle_timeout) {
  std::lock_guard lk(m_);
  total_.c.disconnects++;
  window_.c.disconnects++;
  total_.health.idle_timeouts += idle_timeout;
  health_[slot].on_disconnect(now_ns, total_.health);
}

void Shard::finish(int64_t end_ns) {
  std::lock_guard lk(m_);
  for (auto& h : health_) h.finish(end_ns, total_.health);
}

void Shard::on_reconnect() {
  std::lock_guard lk(m_);
  total_.c.reconnects++;
  window_.c.reconnects++;
}

Stats Shard::take_window() {
  std::lock_guard lk(m_);
  Stats out = std::move(window_);
  window_ = Stats{};
  if (cfg_.per_coin) window_.coin.resize(coins_.size());
  return out;
}

Stats Shard::total_copy() {
  std::lock_guard lk(m_);
  return total_;
}

}  // namespace lat
