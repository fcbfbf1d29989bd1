// Log-linear histogram implementation; see histogram.hpp for the bucket layout and the error bound.
#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace lat {

Histogram& Histogram::operator=(const Histogram& o) {
  if (this == &o) return *this;
  for (int c = 0; c < kChunks; ++c)
    chunks_[c] = o.chunks_[c] ? std::make_unique<Chunk>(*o.chunks_[c]) : nullptr;
  count_ = o.count_;
  max_ = o.max_;
  min_ = o.min_;
  return *this;
}

void Histogram::locate(uint64_t v, int& chunk, uint64_t& sub) {
  if (v < kSub) {
    chunk = 0;
    sub = v;
    return;
  }
  int e = 63 - std::countl_zero(v);  // e >= kSubBits
  chunk = e - kSubBits + 1;
  sub = (v >> (e - kSubBits)) - kSub;
}

uint64_t Histogram::bucket_low(int chunk, uint64_t sub) {
  if (chunk == 0) return sub;
  int e = chunk + kSubBits - 1;
  return (kSub + sub) << (e - kSubBits);
}

uint64_t Histogram::bucket_high(int chunk, uint64_t sub) {
  if (chunk == 0) return sub;
  int e = chunk + kSubBits - 1;
  uint64_t width = 1ull << (e - kSubBits);
  return bucket_low(chunk, sub) + (width - 1);
}

void Histogram::record(uint64_t v, uint64_t n) {
  if (n == 0) return;
  int c;
  uint64_t s;
  locate(v, c, s);
  if (!chunks_[c]) chunks_[c] = std::make_unique<Chunk>(Chunk{});
  (*chunks_[c])[s] += n;
  count_ += n;
  max_ = std::max(max_, v);
  min_ = std::min(min_, v);
}

void Histogram::merge(const Histogram& o) {
  for (int c = 0; c < kChunks; ++c) {
    if (!o.chunks_[c]) continue;
    if (!chunks_[c]) chunks_[c] = std::make_unique<Chunk>(Chunk{});
    for (uint64_t s = 0; s < kSub; ++s) (*chunks_[c])[s] += (*o.chunks_[c])[s];
  }
  count_ += o.count_;
  if (o.count_) {
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
  }
}

void Histogram::reset() {
  for (auto& c : chunks_) c.reset();
  count_ = 0;
  max_ = 0;
  min_ = UINT64_MAX;
}

uint64_t Histogram::percentile(double p) const {
  if (count_ == 0) return 0;
  double want = std::ceil(p / 100.0 * static_cast<double>(count_) - 1e-9);
  uint64_t rank = want < 1.0 ? 1 : static_cast<uint64_t>(want);
  if (rank > count_) rank = count_;
  uint64_t seen = 0;
  for (int c = 0; c < kChunks; ++c) {
    if (!chunks_[c]) continue;
    const Chunk& ch = *chunks_[c];
    for (uint64_t s = 0; s < kSub; ++s) {
      seen += ch[s];
      if (seen >= rank) return std::min(bucket_high(c, s), max_);
    }
  }
  return max_;
}

std::vector<std::pair<uint64_t, uint64_t>> Histogram::buckets() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (int c = 0; c < kChunks; ++c) {
    if (!chunks_[c]) continue;
    const Chunk& ch = *chunks_[c];
    for (uint64_t s = 0; s < kSub; ++s)
      if (ch[s]) out.emplace_back(std::min(bucket_high(c, s), max_), ch[s]);
  }
  return out;
}

}  // namespace lat
