// Silence, the chain, loss notices, missing acks and downtime per connection; see health.hpp (the verdict is in
// verdict.cpp).
#include "health.hpp"

#include <algorithm>

namespace lat {

uint64_t Health::missed_heights() const {
  uint64_t n = 0;
  for (const auto& c : chain.ch) n += c.lost_frames + c.dropped_heights + c.unjoined_heights;
  return n;
}

void Health::merge(const Health& o) {
  for (int c = 0; c < kNumChannels; ++c) {
    max_silence_ns[c] = std::max(max_silence_ns[c], o.max_silence_ns[c]);
    loss_notices[c] += o.loss_notices[c];
    acks_missing[c] += o.acks_missing[c];
    acks_expected[c] += o.acks_expected[c];
    data_frames[c] += o.data_frames[c];
  }
  max_conn_silence_ns = std::max(max_conn_silence_ns, o.max_conn_silence_ns);
  if (l2_coin_silence_ns.size() < o.l2_coin_silence_ns.size()) l2_coin_silence_ns.resize(o.l2_coin_silence_ns.size());
  for (size_t i = 0; i < o.l2_coin_silence_ns.size(); ++i)
    l2_coin_silence_ns[i] = std::max(l2_coin_silence_ns[i], o.l2_coin_silence_ns[i]);
  if (l2_coin_stale_ns.size() < o.l2_coin_stale_ns.size()) l2_coin_stale_ns.resize(o.l2_coin_stale_ns.size());
  for (size_t i = 0; i < o.l2_coin_stale_ns.size(); ++i)
    l2_coin_stale_ns[i] = std::max(l2_coin_stale_ns[i], o.l2_coin_stale_ns[i]);
  chain.merge(o.chain);
  audited_heights += o.audited_heights;
  loss_notices_other += o.loss_notices_other;
  idle_timeouts += o.idle_timeouts;
  downtime_ns += o.downtime_ns;
  max_downtime_ns = std::max(max_downtime_ns, o.max_downtime_ns);
}

ConnHealth::ConnHealth(size_t ncoins, int64_t start_ns)
    : coin_last_(ncoins, start_ns), conn_last_(start_ns), chain_(ncoins), resume_(ncoins) {
  last_recv_.fill(start_ns);
}

void ConnHealth::on_subscribed(const std::array<uint64_t, kNumChannels>& subs, int64_t now_ns, Health& h) {
  if (down_since_) {
    const int64_t d = now_ns - down_since_;
    h.downtime_ns += d;
    h.max_downtime_ns = std::max(h.max_downtime_ns, d);
    down_since_ = 0;
  }
  expected_ = subs;
  acked_.fill(0);
  in_session_ = true;
  conn_last_ = now_ns;  // the connection's silence restarts with the session (downtime is counted apart)
  top_height_ = 0;
  chain_.new_session();
  resume_.on_subscribed(h.chain);
}

DataClass ConnHealth::on_data(int ch, int coin, const Frame& f, int64_t recv_ns, Health& h) {
  h.data_frames[ch]++;
  h.max_silence_ns[ch] = std::max(h.max_silence_ns[ch], recv_ns - last_recv_[ch]);
  last_recv_[ch] = recv_ns;
  h.max_conn_silence_ns = std::max(h.max_conn_silence_ns, recv_ns - conn_last_);
  conn_last_ = recv_ns;
  const int64_t height = f.audit.present ? f.audit.height : 0;
  if (height > top_height_) {
    top_height_ = height;
    h.audited_heights++;
  }
  DataClass out;
  const bool snapshot = out.snapshot = chain_.on_frame(ch, coin, height, f.chain, f.is_snapshot, h.chain);
  // The chain saw every frame (a duplicate has its place in the new chain); only explicit snapshots are not part
  // of what a resume continues.
  if (f.chain.present && !f.chain.snapshot && !f.is_snapshot)
    out.duplicate = resume_.on_frame(ch, coin, height, f.chain, f.replayed, h.chain);
  if (ch == kL2Book && coin >= 0) {
    if (h.l2_coin_silence_ns.size() < coin_last_.size()) h.l2_coin_silence_ns.resize(coin_last_.size());
    h.l2_coin_silence_ns[coin] = std::max(h.l2_coin_silence_ns[coin], recv_ns - coin_last_[coin]);
    // A snapshot states the book as it is (possibly an old frame, after a reconnect): no change it carries
    // came late, so it only restarts the coin's clock.
    const int64_t block_ns = f.audit.present ? f.audit.block_ns : 0;
    if (block_ns > 0 && !snapshot) {
      if (h.l2_coin_stale_ns.size() < coin_last_.size()) h.l2_coin_stale_ns.resize(coin_last_.size());
      const int64_t stale = std::min(recv_ns - coin_last_[coin], recv_ns - block_ns);
      h.l2_coin_stale_ns[coin] = std::max(h.l2_coin_stale_ns[coin], stale);
    }
    coin_last_[coin] = recv_ns;
  }
  return out;
}

void ConnHealth::on_ack(int ch) {
  if (ch >= 0 && ch < kNumChannels) acked_[ch]++;
}

void ConnHealth::close_session(Health& h) {
  if (!in_session_) return;
  for (int c = 0; c < kNumChannels; ++c) {
    h.acks_expected[c] += expected_[c];
    h.acks_missing[c] += expected_[c] > acked_[c] ? expected_[c] - acked_[c] : 0;
  }
  in_session_ = false;
}

void ConnHealth::on_disconnect(int64_t now_ns, Health& h) {
  close_session(h);
  if (!down_since_) {
    h.max_conn_silence_ns = std::max(h.max_conn_silence_ns, now_ns - conn_last_);
    down_since_ = now_ns;
  }
}

void ConnHealth::finish(int64_t end_ns, Health& h) {
  close_session(h);
  if (down_since_) {
    const int64_t d = end_ns - down_since_;
    h.downtime_ns += d;
    h.max_downtime_ns = std::max(h.max_downtime_ns, d);
    down_since_ = 0;
  } else {
    h.max_conn_silence_ns = std::max(h.max_conn_silence_ns, end_ns - conn_last_);
  }
  for (int c = 0; c < kNumChannels; ++c) h.max_silence_ns[c] = std::max(h.max_silence_ns[c], end_ns - last_recv_[c]);
  if (h.l2_coin_silence_ns.size() < coin_last_.size()) h.l2_coin_silence_ns.resize(coin_last_.size());
  for (size_t i = 0; i < coin_last_.size(); ++i)
    h.l2_coin_silence_ns[i] = std::max(h.l2_coin_silence_ns[i], end_ns - coin_last_[i]);
}

namespace {

// The channel of the subscription a notice starting with `prefix` echoes; -1: not one of ours; -2: other text.
int notice_channel(std::string_view text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return -2;
  static constexpr std::string_view kType = "\"type\":\"";
  auto p = text.find(kType);
  if (p == std::string_view::npos) return -1;
  auto rest = text.substr(p + kType.size());
  return channel_from_name(rest.substr(0, rest.find('"')));
}

}  // namespace

int loss_notice_channel(std::string_view text) { return notice_channel(text, "hlbook: this connection fell behind;"); }

int resume_refused_channel(std::string_view text) { return notice_channel(text, "hlbook: cannot resume "); }

}  // namespace lat
