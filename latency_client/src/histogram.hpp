// Log-linear latency histogram (HDR style) in integer microseconds.
//
// Debian ships no HdrHistogram_c, so this is a small one written for this tool. Layout: values below 1024 are
// counted exactly (one bucket per µs); above that, each power-of-two range [2^e, 2^(e+1)) is split into 1024
// equal sub-buckets of width 2^(e-10), so a bucket spans at most 1/1024 (< 0.1%) of its lower edge. Percentiles
// are reported as the highest value of the bucket (capped at the exact recorded max), which over-states the true
// sample by less than 0.1%. Chunks of 1024 counters are allocated lazily, so a histogram that only sees
// milliseconds costs a few tens of kB, which matters with --per-coin over hundreds of coins.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace lat {

class Histogram {
 public:
  static constexpr int kSubBits = 10;
  static constexpr uint64_t kSub = 1ull << kSubBits;   // 1024 sub-buckets per power of two
  static constexpr int kChunks = 64 - kSubBits + 1;     // chunk 0 = [0,1024), chunk c = [2^(c+9), 2^(c+10))

  Histogram() = default;
  Histogram(const Histogram& o) { *this = o; }
  Histogram& operator=(const Histogram& o);
  Histogram(Histogram&&) noexcept = default;
  Histogram& operator=(Histogram&&) noexcept = default;

  void record(uint64_t v_us, uint64_t n = 1);
  void merge(const Histogram& o);
  void reset();

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  uint64_t min() const { return count_ ? min_ : 0; }

  // Nearest-rank percentile: the smallest recorded value v such that at least p% of samples are <= v,
  // at histogram resolution (upper edge of v's bucket, capped at the exact max). p in (0,100]. 0 when empty.
  uint64_t percentile(double p) const;

  // Non-empty buckets in increasing order: (highest value of bucket, count). Used for the CDF plot.
  std::vector<std::pair<uint64_t, uint64_t>> buckets() const;

  // Bucket geometry, exposed for tests.
  static void locate(uint64_t v, int& chunk, uint64_t& sub);
  static uint64_t bucket_low(int chunk, uint64_t sub);
  static uint64_t bucket_high(int chunk, uint64_t sub);

 private:
  using Chunk = std::array<uint64_t, kSub>;
  std::array<std::unique_ptr<Chunk>, kChunks> chunks_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace lat
