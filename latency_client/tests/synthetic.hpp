// Synthetic frames for the tests that feed a Shard directly (no sockets): one sample of a coin at an exchange time.
#pragma once
#include <cstdint>
#include <string>

#include "extract.hpp"

namespace lat::test {

constexpr int64_t kMs = 1000000;            // ns per ms
constexpr int64_t kT0 = 1'790'000'000'000;  // exchange ms

inline Frame frame(Kind k, const std::string& coin, int64_t t_ms) {
  Frame f;
  f.kind = k;
  f.samples.push_back(Sample{coin, t_ms});
  f.nsamples = 1;
  return f;
}

}  // namespace lat::test
