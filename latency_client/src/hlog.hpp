// `--hlog FILE`: interval histograms in the HdrHistogram log format (version 1.3, V2 compressed histograms), so
// runs can be merged and re-plotted with the standard tools (HistogramLogProcessor, hdr-plot).
//
// Written by hand from the format's specification: Debian packages no C++ HdrHistogram, and the encoder is small.
// Our Histogram's buckets are exactly HdrHistogram's for lowest discernible value 1 and 3 significant digits
// (2048 unit sub-buckets, then 1024 per power of two), so every count maps to one HdrHistogram index unchanged.
// Values are microseconds; the Interval_Max column is in milliseconds (use -outputValueUnitRatio 1000 to plot ms).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "config.hpp"
#include "histogram.hpp"
#include "stats.hpp"

namespace lat {

// The "HISTF..." base64 text of one histogram (V2 compressed encoding; zlib stream of stored blocks).
std::string hdr_encode_base64(const Histogram& h);
// HdrHistogram's counts index of a value (lowest discernible 1, 3 significant digits); exposed for tests.
size_t hdr_counts_index(uint64_t v);

class HlogWriter {
 public:
  // Opens (truncates) the file and writes the header; false when it cannot be written.
  bool open(const std::string& path, double start_unix_s);
  // One interval line: tag, [t0, t1] in Unix seconds. Empty histograms are skipped.
  void interval(const std::string& tag, double t0_unix_s, double t1_unix_s, const Histogram& h);
  bool ok() const { return f_.good(); }

 private:
  std::ofstream f_;
  double start_ = 0;
};

// One window: per requested channel, tag <channel> (receive - exchange time) and, with --audit, <channel>.added
// (node write -> client receive).
void write_hlog_window(HlogWriter& w, double t0_unix_s, double t1_unix_s, const Stats& s, const Config& cfg);

}  // namespace lat
