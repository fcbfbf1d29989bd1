// Hot-path field extraction from one WebSocket text frame, with simdjson On-Demand.
//
// Only the fields latency needs are touched: `channel`, then `data.time`/`data.coin` (l2Book, bbo) or each
// trade's `time`/`coin` (trades), the optional top-level `audit` object (server opened with ?audit=1) and
// `replayed` (a resumed subscription's frames sent again).
// Everything else (levels, px, users...) is skipped by the parser, never materialised. Any parse failure
// yields Kind::Bad; callers count it and carry on.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lat {

// Notice: the server's own news on channel hlbookNotice (a loss of blocks), with its text in `error`.
enum class Kind { L2Book, Trades, Bbo, AllMids, Pong, SubAck, Error, Notice, Other, Bad };
const char* kind_name(Kind k);

// Channels that carry exchange times; index into per-channel arrays.
enum Channel : int { kL2Book = 0, kTrades = 1, kBbo = 2, kNumChannels = 3 };
const char* channel_name(int ch);
int channel_from_name(std::string_view s);  // -1 if not one of the three

// The server's audit object. A stamp it does not have is left out (older servers sent 0): both read as 0 here,
// and stats.cpp samples no stage with a 0 or out-of-order end.
struct Audit {
  bool present = false;
  int64_t height = 0, block_ns = 0, node_ns = 0, read_ns = 0, applied_ns = 0, published_ns = 0, sent_ns = 0;
};

// The audit object's place in its subscription's chain (docs/api.md "Audit fields"). `present` when it carried
// `n`; prev, lost_first/lost_last are 0 when left out.
struct Chain {
  bool present = false;
  int64_t sub = 0, n = 0, prev = 0;
  bool snapshot = false;
  int64_t conflated = 0;
  int64_t lost_first = 0, lost_last = 0;
};

struct Sample {
  std::string coin;  // capacity is reused across frames by the caller's Frame object
  int64_t time_ms = 0;
};

struct Frame {
  Kind kind = Kind::Bad;
  std::vector<Sample> samples;  // l2Book/bbo: 1; trades: one per trade
  size_t nsamples = 0;          // valid entries in samples (the vector is reused, never shrunk)
  Audit audit;
  Chain chain;
  bool is_snapshot = false;       // data.isSnapshot was true
  bool replayed = false;          // top-level "replayed":true: sent again for a resumed subscription
  std::vector<std::string> mids;  // allMids keys, only filled when want_mids
  std::string error;              // Kind::Error, Kind::Notice: the data string
  int ack_channel = -1;           // Kind::SubAck: the acknowledged subscription's channel (-1: other/unknown)
};

// Reusable per-thread extractor (owns the simdjson parser).
class Extractor {
 public:
  Extractor();
  ~Extractor();
  Extractor(const Extractor&) = delete;
  Extractor& operator=(const Extractor&) = delete;

  // `data` must have at least `capacity - len >= 64` readable bytes after `len` (simdjson padding);
  // use the string_view overload when that cannot be guaranteed (it copies).
  Kind parse(const char* data, size_t len, size_t capacity, Frame& out, bool want_mids = false);
  Kind parse(std::string_view frame, Frame& out, bool want_mids = false);

 private:
  struct Impl;  // holds the simdjson parser (keeps simdjson.h out of this header)
  Impl* impl_;
  std::string scratch_;
};

}  // namespace lat
