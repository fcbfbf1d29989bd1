// Silence, missed heights, loss notices, missing acks, downtime, and the verdict; see health.hpp.
#include "health.hpp"

#include <algorithm>
#include <cstdio>

namespace lat {

void Health::add_missing(int64_t first, int64_t last) {
  missing_heights += static_cast<uint64_t>(last - first + 1);
  if (missing_ranges.size() < kMaxRanges) missing_ranges.emplace_back(first, last);
}

void Health::merge(const Health& o) {
  for (int c = 0; c < kNumChannels; ++c) {
    max_silence_ns[c] = std::max(max_silence_ns[c], o.max_silence_ns[c]);
    loss_notices[c] += o.loss_notices[c];
    acks_missing[c] += o.acks_missing[c];
    acks_expected[c] += o.acks_expected[c];
  }
  if (l2_coin_silence_ns.size() < o.l2_coin_silence_ns.size()) l2_coin_silence_ns.resize(o.l2_coin_silence_ns.size());
  for (size_t i = 0; i < o.l2_coin_silence_ns.size(); ++i)
    l2_coin_silence_ns[i] = std::max(l2_coin_silence_ns[i], o.l2_coin_silence_ns[i]);
  if (l2_coin_stale_ns.size() < o.l2_coin_stale_ns.size()) l2_coin_stale_ns.resize(o.l2_coin_stale_ns.size());
  for (size_t i = 0; i < o.l2_coin_stale_ns.size(); ++i)
    l2_coin_stale_ns[i] = std::max(l2_coin_stale_ns[i], o.l2_coin_stale_ns[i]);
  missing_heights += o.missing_heights;
  for (auto& r : o.missing_ranges)
    if (missing_ranges.size() < kMaxRanges) missing_ranges.push_back(r);
  audited_heights += o.audited_heights;
  loss_notices_other += o.loss_notices_other;
  idle_timeouts += o.idle_timeouts;
  downtime_ns += o.downtime_ns;
  max_downtime_ns = std::max(max_downtime_ns, o.max_downtime_ns);
}

ConnHealth::ConnHealth(size_t ncoins, int64_t start_ns) : coin_last_(ncoins, start_ns), down_since_(0) {
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
}

void ConnHealth::on_data(int ch, int coin, int64_t recv_ns, int64_t block_ns, Health& h) {
  h.max_silence_ns[ch] = std::max(h.max_silence_ns[ch], recv_ns - last_recv_[ch]);
  last_recv_[ch] = recv_ns;
  if (ch == kL2Book && coin >= 0) {
    if (h.l2_coin_silence_ns.size() < coin_last_.size()) h.l2_coin_silence_ns.resize(coin_last_.size());
    h.l2_coin_silence_ns[coin] = std::max(h.l2_coin_silence_ns[coin], recv_ns - coin_last_[coin]);
    if (block_ns > 0) {
      if (h.l2_coin_stale_ns.size() < coin_last_.size()) h.l2_coin_stale_ns.resize(coin_last_.size());
      const int64_t stale = std::min(recv_ns - coin_last_[coin], recv_ns - block_ns);
      h.l2_coin_stale_ns[coin] = std::max(h.l2_coin_stale_ns[coin], stale);
    }
    coin_last_[coin] = recv_ns;
  }
}

void ConnHealth::on_height(int64_t height, Health& h) {
  if (height <= 0) return;
  if (seen_.empty() && base_ == 0) base_ = height;
  if (height < base_) return;  // older than the decided range: a late duplicate, or decided missing already
  const auto idx = static_cast<size_t>(height - base_);
  if (idx >= seen_.size()) seen_.resize(idx + 1, false);
  if (!seen_[idx]) h.audited_heights++;
  seen_[idx] = true;
  // Decide heights that are kReorder behind the newest: a frame that late is not coming.
  while (static_cast<int64_t>(seen_.size()) > kReorder) {
    int64_t run = 0;
    while (run < static_cast<int64_t>(seen_.size()) - kReorder && !seen_[static_cast<size_t>(run)]) ++run;
    if (run) {
      h.add_missing(base_, base_ + run - 1);
      seen_.erase(seen_.begin(), seen_.begin() + run);
      base_ += run;
    } else {
      seen_.pop_front();
      ++base_;
    }
  }
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
  if (!down_since_) down_since_ = now_ns;
}

void ConnHealth::finish(int64_t end_ns, Health& h) {
  close_session(h);
  if (down_since_) {
    const int64_t d = end_ns - down_since_;
    h.downtime_ns += d;
    h.max_downtime_ns = std::max(h.max_downtime_ns, d);
    down_since_ = 0;
  }
  for (int c = 0; c < kNumChannels; ++c) h.max_silence_ns[c] = std::max(h.max_silence_ns[c], end_ns - last_recv_[c]);
  if (h.l2_coin_silence_ns.size() < coin_last_.size()) h.l2_coin_silence_ns.resize(coin_last_.size());
  for (size_t i = 0; i < coin_last_.size(); ++i)
    h.l2_coin_silence_ns[i] = std::max(h.l2_coin_silence_ns[i], end_ns - coin_last_[i]);
  // Heights between the oldest undecided and the newest seen that never arrived.
  size_t i = 0;
  while (i < seen_.size()) {
    if (seen_[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < seen_.size() && !seen_[j]) ++j;
    h.add_missing(base_ + static_cast<int64_t>(i), base_ + static_cast<int64_t>(j) - 1);
    i = j;
  }
  seen_.clear();
}

int loss_notice_channel(std::string_view text) {
  static constexpr std::string_view kPrefix = "hlbook: this connection fell behind;";
  if (text.substr(0, kPrefix.size()) != kPrefix) return -2;
  static constexpr std::string_view kType = "\"type\":\"";
  auto p = text.find(kType);
  if (p == std::string_view::npos) return -1;
  auto rest = text.substr(p + kType.size());
  return channel_from_name(rest.substr(0, rest.find('"')));
}

namespace {
std::string secs(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1fs", static_cast<double>(ns) / 1e9);
  return b;
}
}  // namespace

Verdict verdict(const Health& h, const Config& cfg, uint64_t disconnects) {
  Verdict v;
  const auto limit = static_cast<int64_t>(cfg.max_silence_s * 1e9);
  std::string conn_loss;  // a connection's loss is every channel's: they share it
  if (h.missing_heights) conn_loss += std::to_string(h.missing_heights) + " missed heights; ";
  if (disconnects) conn_loss += std::to_string(disconnects) + " disconnects, " + secs(h.downtime_ns) + " down; ";
  if (h.loss_notices_other) conn_loss += std::to_string(h.loss_notices_other) + " loss notices; ";
  std::string line = "verdict:";
  for (int ch : cfg.channels) {
    const bool silent = h.max_silence_ns[ch] > limit;
    std::string why;
    if (silent) why += "silent " + secs(h.max_silence_ns[ch]) + " > " + secs(limit) + "; ";
    bool stale = false;
    if (ch == kL2Book)
      for (size_t i = 0; i < h.l2_coin_stale_ns.size(); ++i)
        if (h.l2_coin_stale_ns[i] > limit) {
          stale = true;
          why += (i < cfg.coins.size() ? cfg.coins[i] : "#" + std::to_string(i)) + " book change late by " +
                 secs(h.l2_coin_stale_ns[i]) + "; ";
        }
    std::string loss = conn_loss;
    if (h.loss_notices[ch]) loss += std::to_string(h.loss_notices[ch]) + " loss notices; ";
    if (h.acks_missing[ch]) loss += std::to_string(h.acks_missing[ch]) + " subscriptions not acknowledged; ";
    why += loss;
    if (!why.empty()) why.resize(why.size() - 2);
    const bool quiet = silent || stale;
    v.channel[ch] = quiet && !loss.empty() ? "silent+lost" : quiet ? "silent" : !loss.empty() ? "lost" : "ok";
    v.why[ch] = why;
    v.healthy &= v.channel[ch] == "ok";
    line += std::string(" ") + channel_name(ch) + "=" + v.channel[ch] + (why.empty() ? "" : " (" + why + ")");
  }
  line += v.healthy ? " -> HEALTHY" : cfg.allow_loss ? " -> NOT HEALTHY (--allow-loss: exit 0)" : " -> NOT HEALTHY";
  v.line = line;
  return v;
}

}  // namespace lat
