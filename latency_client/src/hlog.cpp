// HdrHistogram V2 encoding, zlib stored blocks, base64 and the interval log lines; see hlog.hpp.
#include "hlog.hpp"

#include <bit>
#include <cstdio>
#include <cstring>

namespace lat {

namespace {

constexpr uint32_t kEncodingCookie = 0x1c849303u | 0x10u;    // V2, 8-byte words
constexpr uint32_t kCompressedCookie = 0x1c849304u | 0x10u;  // V2 compressed
constexpr int kSigDigits = 3;
constexpr uint64_t kHighest = 3'600'000'000ull;  // 1 hour in µs (raised to the max when a value is above)

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}
void put64(std::vector<uint8_t>& b, uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

// ZigZag then LEB128 with at most 9 bytes (the 9th carries 8 bits), as the V2 format defines.
void put_zigzag(std::vector<uint8_t>& b, int64_t value) {
  uint64_t v = (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
  for (int i = 0; i < 8; ++i) {
    if (v < 0x80) {
      b.push_back(static_cast<uint8_t>(v));
      return;
    }
    b.push_back(static_cast<uint8_t>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  b.push_back(static_cast<uint8_t>(v));
}

// A zlib stream (RFC 1950) made of uncompressed deflate blocks (RFC 1951 BTYPE 00): any inflater reads it, and it
// needs no compression library. The payload is a few kB of mostly-run-length-encoded counts anyway.
std::vector<uint8_t> zlib_stored(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out{0x78, 0x01};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(65535, in.size() - pos);
    const bool last = pos + n == in.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<uint8_t>(n));
    out.push_back(static_cast<uint8_t>(n >> 8));
    out.push_back(static_cast<uint8_t>(~n));
    out.push_back(static_cast<uint8_t>(~n >> 8));
    out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(pos), in.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < in.size());
  uint32_t a = 1, b = 0;  // Adler-32
  for (uint8_t c : in) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put32(out, (b << 16) | a);
  return out;
}

std::string base64(const std::vector<uint8_t>& in) {
  static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (in[i] << 16) | (in[i + 1] << 8) | in[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += tbl[(v >> s) & 63];
  }
  if (i < in.size()) {
    const uint32_t v = (in[i] << 16) | (i + 1 < in.size() ? in[i + 1] << 8 : 0);
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += i + 1 < in.size() ? tbl[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace

size_t hdr_counts_index(uint64_t v) {
  // sub_bucket_count 2048 (half 1024), unit magnitude 0: bucket b >= 1 holds [2^(10+b), 2^(11+b)) in steps of 2^b.
  if (v < 2048) return static_cast<size_t>(v);
  const int b = (63 - std::countl_zero(v)) - 10;
  return static_cast<size_t>(b) * 1024 + static_cast<size_t>(v >> b);
}

std::string hdr_encode_base64(const Histogram& h) {
  std::vector<std::pair<size_t, uint64_t>> counts;  // (index, count), increasing
  for (auto [high, n] : h.buckets()) counts.emplace_back(hdr_counts_index(high), n);
  std::vector<uint8_t> payload;
  size_t next = 0;
  for (auto [idx, n] : counts) {
    if (idx > next + 1) put_zigzag(payload, -static_cast<int64_t>(idx - next));
    else if (idx == next + 1) put_zigzag(payload, 0);
    put_zigzag(payload, static_cast<int64_t>(n));
    next = idx + 1;
  }
  std::vector<uint8_t> enc;
  put32(enc, kEncodingCookie);
  put32(enc, static_cast<uint32_t>(payload.size()));
  put32(enc, 0);  // normalizing index offset
  put32(enc, kSigDigits);
  put64(enc, 1);  // lowest discernible value
  put64(enc, std::max<uint64_t>(kHighest, h.max()));
  const double ratio = 1.0;
  uint64_t bits;
  std::memcpy(&bits, &ratio, sizeof bits);
  put64(enc, bits);
  enc.insert(enc.end(), payload.begin(), payload.end());
  const std::vector<uint8_t> z = zlib_stored(enc);
  std::vector<uint8_t> out;
  put32(out, kCompressedCookie);
  put32(out, static_cast<uint32_t>(z.size()));
  out.insert(out.end(), z.begin(), z.end());
  return base64(out);
}

bool HlogWriter::open(const std::string& path, double start_unix_s) {
  f_.open(path, std::ios::trunc);
  if (!f_) return false;
  start_ = start_unix_s;
  char buf[160];
  std::snprintf(buf, sizeof buf, "#[StartTime: %.3f (seconds since epoch)]\n#[BaseTime: %.3f (seconds since epoch)]\n",
                start_unix_s, start_unix_s);
  f_ << "#[Histogram log format version 1.3]\n"
     << "#[latency_stats: values in microseconds; Interval_Max in milliseconds; one tag per channel]\n"
     << buf << "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";
  f_.flush();
  return f_.good();
}

void HlogWriter::interval(const std::string& tag, double t0, double t1, const Histogram& h) {
  if (!h.count()) return;
  char buf[128];
  std::snprintf(buf, sizeof buf, "Tag=%s,%.3f,%.3f,%.3f,", tag.c_str(), t0 - start_, t1 - t0,
                static_cast<double>(h.max()) / 1000.0);
  f_ << buf << hdr_encode_base64(h) << "\n";
  f_.flush();
}

void write_hlog_window(HlogWriter& w, double t0, double t1, const Stats& s, const Config& cfg) {
  for (int ch : cfg.channels) {
    w.interval(channel_name(ch), t0, t1, s.ch[ch].lat);
    if (cfg.audit) w.interval(std::string(channel_name(ch)) + ".added", t0, t1, s.ch[ch].added);
  }
}

}  // namespace lat
