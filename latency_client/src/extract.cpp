// simdjson On-Demand extraction of channel, exchange times, coins and audit stamps; see extract.hpp.
#include "extract.hpp"

#include <simdjson.h>

namespace lat {

namespace od = simdjson::ondemand;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::L2Book: return "l2Book";
    case Kind::Trades: return "trades";
    case Kind::Bbo: return "bbo";
    case Kind::AllMids: return "allMids";
    case Kind::Pong: return "pong";
    case Kind::SubAck: return "subscriptionResponse";
    case Kind::Error: return "error";
    case Kind::Notice: return "notice";
    case Kind::Other: return "other";
    case Kind::Bad: return "bad";
  }
  return "?";
}

const char* channel_name(int ch) {
  static const char* names[] = {"l2Book", "trades", "bbo"};
  return (ch >= 0 && ch < kNumChannels) ? names[ch] : "?";
}

int channel_from_name(std::string_view s) {
  if (s == "l2Book") return kL2Book;
  if (s == "trades") return kTrades;
  if (s == "bbo") return kBbo;
  return -1;
}

struct Extractor::Impl {
  od::parser parser;
};

Extractor::Extractor() : impl_(new Impl) {}
Extractor::~Extractor() { delete impl_; }

namespace {

Sample& next_sample(Frame& f) {
  if (f.nsamples == f.samples.size()) f.samples.emplace_back();
  return f.samples[f.nsamples++];
}

// Reads {"coin":..., "time":...} from an object in any key order. Returns false on a missing/mistyped field.
// With `snapshot`, the object's other keys are read too for `"isSnapshot":true` (the rest of the object is
// skipped by the parser anyway on the way to `audit`, so this costs little).
bool read_coin_time(od::object obj, Sample& s, bool* snapshot = nullptr) {
  bool have_coin = false, have_time = false;
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    if (key == "coin") {
      std::string_view c;
      if (field.value().get_string().get(c)) return false;
      s.coin.assign(c.data(), c.size());
      have_coin = true;
    } else if (key == "time") {
      int64_t t;
      if (field.value().get_int64().get(t)) return false;
      s.time_ms = t;
      have_time = true;
    } else if (snapshot && key == "isSnapshot") {
      bool b = false;
      if (field.value().get_bool().get(b) == simdjson::SUCCESS) *snapshot = b;
    }
    if (!snapshot && have_coin && have_time) return true;  // skip the rest (px, users...) without parsing it
  }
  return have_coin && have_time;
}

bool read_int(od::value v, int64_t& out) { return v.get_int64().get(out) == simdjson::SUCCESS; }

// The stamps and the chain fields; keys it does not know are skipped whatever their type (a newer server's).
bool read_audit(od::object obj, Audit& a, Chain& c) {
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    od::value v;
    if (field.value().get(v)) return false;
    bool ok = true;
    if (key == "height") ok = read_int(v, a.height);
    else if (key == "block_ns") ok = read_int(v, a.block_ns);
    else if (key == "node_ns") ok = read_int(v, a.node_ns);
    else if (key == "read_ns") ok = read_int(v, a.read_ns);
    else if (key == "applied_ns") ok = read_int(v, a.applied_ns);
    else if (key == "published_ns") ok = read_int(v, a.published_ns);
    else if (key == "sent_ns") ok = read_int(v, a.sent_ns);
    else if (key == "sub") ok = read_int(v, c.sub);
    else if (key == "n") {
      ok = read_int(v, c.n) && c.n >= 1;
      c.present = ok;
    }
    else if (key == "prev") ok = read_int(v, c.prev);
    else if (key == "conflated") ok = read_int(v, c.conflated) && c.conflated >= 0;
    else if (key == "snapshot") ok = v.get_bool().get(c.snapshot) == simdjson::SUCCESS;
    else if (key == "lost") {
      // [first, last]
      od::array arr;
      ok = v.get_array().get(arr) == simdjson::SUCCESS;
      int64_t h[2] = {0, 0};
      int i = 0;
      for (auto el : arr) {
        if (!ok || i == 2) {
          ok = false;
          break;
        }
        ok = el.get_int64().get(h[i++]) == simdjson::SUCCESS;
      }
      ok = ok && i == 2 && h[0] > 0 && h[0] <= h[1];
      c.lost_first = h[0];
      c.lost_last = h[1];
    }
    if (!ok) return false;
  }
  a.present = true;
  return true;
}

// Acks and errors are rare, so these read a little more: which subscription an ack is for (missing acks are a
// health signal) and the error text (the server's "fell behind ... lost blocks" notices are).
Kind parse_ack(od::object& root, Frame& out) {
  std::string_view type;
  if (root.find_field_unordered("data").find_field_unordered("subscription").find_field_unordered("type").get_string().get(
          type) == simdjson::SUCCESS)
    out.ack_channel = channel_from_name(type);
  return Kind::SubAck;
}

Kind parse_error(od::object& root, Frame& out) {
  std::string_view text;
  if (root.find_field_unordered("data").get_string().get(text) == simdjson::SUCCESS) out.error.assign(text);
  return Kind::Error;
}

Kind parse_doc(od::document& doc, std::string_view raw, Frame& out, bool want_mids) {
  od::object root;
  if (doc.get_object().get(root)) return Kind::Bad;
  std::string_view channel;
  if (root.find_field_unordered("channel").get_string().get(channel)) return Kind::Bad;

  Kind kind;
  if (channel == "l2Book") kind = Kind::L2Book;
  else if (channel == "trades") kind = Kind::Trades;
  else if (channel == "bbo") kind = Kind::Bbo;
  else if (channel == "allMids") kind = Kind::AllMids;
  else if (channel == "pong") return Kind::Pong;
  else if (channel == "subscriptionResponse") return parse_ack(root, out);
  else if (channel == "error") return parse_error(root, out);
  else if (channel == "hlbookNotice") {
    parse_error(root, out);
    return Kind::Notice;
  }
  else return Kind::Other;

  od::value data;
  if (root.find_field_unordered("data").get(data)) return Kind::Bad;
  if (kind == Kind::AllMids) {
    if (!want_mids) return kind;
    od::object mids;
    if (data.find_field_unordered("mids").get_object().get(mids)) return Kind::Bad;
    for (auto field : mids) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return Kind::Bad;
      out.mids.emplace_back(key);
    }
    return kind;
  }
  if (kind == Kind::Trades) {
    od::array arr;
    if (data.get_array().get(arr)) return Kind::Bad;
    for (auto el : arr) {
      od::object t;
      if (el.get_object().get(t)) return Kind::Bad;
      if (!read_coin_time(t, next_sample(out))) return Kind::Bad;
    }
  } else {
    od::object obj;
    if (data.get_object().get(obj)) return Kind::Bad;
    if (!read_coin_time(obj, next_sample(out), &out.is_snapshot)) return Kind::Bad;
  }
  // Optional top-level audit object (only present with ?audit=1).
  od::value audit;
  auto err = root.find_field_unordered("audit").get(audit);
  if (err == simdjson::SUCCESS) {
    od::object ao;
    if (audit.get_object().get(ao) || !read_audit(ao, out.audit, out.chain)) return Kind::Bad;
  } else if (err != simdjson::NO_SUCH_FIELD) {
    return Kind::Bad;
  }
  // Looked up only when the text names it: a live frame (nearly all of them) must not pay for the unordered
  // lookup wrapping round to the start of the frame. A data string "replayed" only costs that lookup.
  if (raw.find("\"replayed\"") != std::string_view::npos) {
    od::value replayed;
    err = root.find_field_unordered("replayed").get(replayed);
    if (err == simdjson::SUCCESS) {
      if (replayed.get_bool().get(out.replayed)) return Kind::Bad;
    } else if (err != simdjson::NO_SUCH_FIELD) {
      return Kind::Bad;
    }
  }
  return kind;
}

}  // namespace

Kind Extractor::parse(const char* data, size_t len, size_t capacity, Frame& out, bool want_mids) {
  out.kind = Kind::Bad;
  out.nsamples = 0;
  out.audit = Audit{};
  out.chain = Chain{};
  out.is_snapshot = false;
  out.replayed = false;
  out.mids.clear();
  out.error.clear();
  out.ack_channel = -1;
  if (len == 0) return out.kind;
  od::document doc;
  if (impl_->parser.iterate(data, len, capacity).get(doc)) return out.kind;
  Kind k = parse_doc(doc, std::string_view(data, len), out, want_mids);
  if (k == Kind::Bad) out.nsamples = 0;
  out.kind = k;
  return k;
}

Kind Extractor::parse(std::string_view frame, Frame& out, bool want_mids) {
  scratch_.assign(frame.data(), frame.size());
  size_t len = scratch_.size();
  scratch_.append(simdjson::SIMDJSON_PADDING, '\0');
  return parse(scratch_.data(), len, scratch_.size(), out, want_mids);
}

}  // namespace lat
