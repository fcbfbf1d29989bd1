// Field extraction on real-shaped frames of every channel, audit-augmented frames, and malformed input.
#include <gtest/gtest.h>

#include <random>

#include "extract.hpp"

using namespace lat;

TEST(Extract, L2Book) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(R"({"channel":"l2Book","data":{"coin":"BTC","time":1790232236546,"levels":[
  [{"px":"84143.0","sz":"10.25923","n":36},{"px":"84142.0","sz":"1.65875","n":7}],
  [{"px":"84144.0","sz":"50.66449","n":18},{"px":"84150.0","sz":"0.00711","n":2}]]}})", f);
  ASSERT_EQ(k, Kind::L2Book);
  ASSERT_EQ(f.nsamples, 1u);
  EXPECT_EQ(f.samples[0].coin, "BTC");
  EXPECT_EQ(f.samples[0].time_ms, 1790232236546);
  EXPECT_FALSE(f.audit.present);
}

TEST(Extract, L2BookTimeAfterLevelsAndKeysReordered) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(R"({"data":{"levels":[[],[]],"time":17,"coin":"ETH"},"channel":"l2Book"})", f);
  ASSERT_EQ(k, Kind::L2Book);
  EXPECT_EQ(f.samples[0].coin, "ETH");
  EXPECT_EQ(f.samples[0].time_ms, 17);
}

TEST(Extract, TradesSeveral) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(R"({"channel":"trades","data":[
   {"coin":"BTC","side":"A","px":"84143.0","sz":"0.00036","time":1790232216193,"hash":"0x7ab6","tid":1045359869404765,"users":["0xb","0xs"]},
   {"coin":"BTC","side":"B","px":"84144.0","sz":"0.1","time":1790232216194,"hash":"0x7ab7","tid":2,"users":["0xb","0xs"]},
   {"coin":"BTC","side":"B","px":"84145.0","sz":"0.2","time":1790232216195,"hash":"0x7ab8","tid":3,"users":["0xb","0xs"]}]})",
                    f);
  ASSERT_EQ(k, Kind::Trades);
  ASSERT_EQ(f.nsamples, 3u);
  EXPECT_EQ(f.samples[0].time_ms, 1790232216193);
  EXPECT_EQ(f.samples[2].time_ms, 1790232216195);
  EXPECT_EQ(f.samples[1].coin, "BTC");
  // The Frame is reused: a smaller frame afterwards must not leak old samples.
  ASSERT_EQ(ex.parse(R"({"channel":"trades","data":[{"coin":"ETH","time":5}]})", f), Kind::Trades);
  EXPECT_EQ(f.nsamples, 1u);
  EXPECT_EQ(f.samples[0].coin, "ETH");
  ASSERT_EQ(ex.parse(R"({"channel":"trades","data":[]})", f), Kind::Trades);
  EXPECT_EQ(f.nsamples, 0u);
}

TEST(Extract, Bbo) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(
      R"({"channel":"bbo","data":{"coin":"SOL","time":1790232236000,"bbo":[{"px":"1","sz":"2","n":1},null]}})", f);
  ASSERT_EQ(k, Kind::Bbo);
  EXPECT_EQ(f.samples[0].coin, "SOL");
  EXPECT_EQ(f.samples[0].time_ms, 1790232236000);
}

TEST(Extract, AllMidsKeys) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(R"({"channel":"allMids","data":{"mids":{"BTC":"84143.5","ETH":"3001.25","@107":"1.0"}}})", f, true);
  ASSERT_EQ(k, Kind::AllMids);
  EXPECT_EQ(f.mids, (std::vector<std::string>{"BTC", "ETH", "@107"}));
  EXPECT_EQ(ex.parse(R"({"channel":"allMids","data":{"mids":{"BTC":"1"}}})", f), Kind::AllMids);
  EXPECT_TRUE(f.mids.empty());  // not requested on the hot path
}

TEST(Extract, ControlChannels) {
  Extractor ex;
  Frame f;
  EXPECT_EQ(ex.parse(R"({"channel":"pong"})", f), Kind::Pong);
  EXPECT_EQ(ex.parse(R"({"channel":"subscriptionResponse","data":{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","nSigFigs":null,"mantissa":null}}})", f), Kind::SubAck);
  EXPECT_EQ(ex.parse(R"({"channel":"error","data":"Already subscribed: {\"type\":\"l2Book\"}"})", f), Kind::Error);
  EXPECT_EQ(ex.parse(R"({"channel":"post","data":{"id":1}})", f), Kind::Other);
  EXPECT_EQ(ex.parse(R"({"channel":"hlbookNotice","data":"hlbook: this connection fell behind; x"})", f), Kind::Notice);
  EXPECT_EQ(f.error, "hlbook: this connection fell behind; x");
  EXPECT_EQ(f.nsamples, 0u);
}

TEST(Extract, AuditAugmented) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(R"({"channel":"l2Book","data":{"coin":"BTC","time":1000,"levels":[[],[]]},"audit":{"height":77,"block_ns":1000000000,"node_ns":1002000000,"read_ns":1003000000,"applied_ns":1003100000,"published_ns":1003200000,"sent_ns":1003300000}})", f);
  ASSERT_EQ(k, Kind::L2Book);
  ASSERT_TRUE(f.audit.present);
  EXPECT_EQ(f.audit.height, 77);
  EXPECT_EQ(f.audit.block_ns, 1000000000);
  EXPECT_EQ(f.audit.node_ns, 1002000000);
  EXPECT_EQ(f.audit.read_ns, 1003000000);
  EXPECT_EQ(f.audit.applied_ns, 1003100000);
  EXPECT_EQ(f.audit.published_ns, 1003200000);
  EXPECT_EQ(f.audit.sent_ns, 1003300000);
  // audit before data, trades
  k = ex.parse(R"({"audit":{"height":1,"block_ns":5,"node_ns":6,"read_ns":7,"applied_ns":8,"published_ns":9,"sent_ns":10},"channel":"trades","data":[{"coin":"ETH","time":3},{"coin":"ETH","time":4}]})", f);
  ASSERT_EQ(k, Kind::Trades);
  EXPECT_EQ(f.nsamples, 2u);
  EXPECT_TRUE(f.audit.present);
  EXPECT_EQ(f.audit.sent_ns, 10);
  // next frame without audit resets it
  ex.parse(R"({"channel":"bbo","data":{"coin":"BTC","time":1,"bbo":[null,null]}})", f);
  EXPECT_FALSE(f.audit.present);
}

TEST(Extract, AuditChainAndSnapshots) {
  Extractor ex;
  Frame f;
  auto k = ex.parse(R"({"channel":"l2Book","data":{"coin":"BTC","time":1,"levels":[[],[]]},"audit":{"height":90,"block_ns":1,"sub":2,"n":41,"prev":87,"conflated":2,"future":{"x":[1]}}})", f);
  ASSERT_EQ(k, Kind::L2Book);
  EXPECT_EQ(f.audit.height, 90);
  ASSERT_TRUE(f.chain.present);
  EXPECT_EQ(f.chain.sub, 2);
  EXPECT_EQ(f.chain.n, 41);
  EXPECT_EQ(f.chain.prev, 87);
  EXPECT_EQ(f.chain.conflated, 2);
  EXPECT_FALSE(f.chain.snapshot);
  EXPECT_EQ(f.chain.lost_first, 0);
  k = ex.parse(R"({"channel":"trades","data":[{"coin":"ETH","time":3}],"audit":{"height":9,"sub":1,"n":1,"snapshot":true}})", f);
  ASSERT_EQ(k, Kind::Trades);
  EXPECT_TRUE(f.chain.present && f.chain.snapshot);
  EXPECT_EQ(f.chain.prev, 0);  // absent on the first frame
  k = ex.parse(R"({"channel":"trades","data":[{"coin":"ETH","time":3}],"audit":{"lost":[5,8],"height":9,"sub":1,"n":3,"prev":4}})", f);
  ASSERT_EQ(k, Kind::Trades);
  EXPECT_EQ(f.chain.lost_first, 5);
  EXPECT_EQ(f.chain.lost_last, 8);
  EXPECT_FALSE(f.chain.snapshot);  // reset between frames
  // Stamps only (an older server): no chain.
  ex.parse(R"({"channel":"bbo","data":{"coin":"BTC","time":1,"bbo":[null,null]},"audit":{"height":3,"block_ns":1}})", f);
  EXPECT_TRUE(f.audit.present);
  EXPECT_FALSE(f.chain.present);
  // isSnapshot in the data object, in any place.
  ex.parse(R"({"channel":"l2Book","data":{"coin":"BTC","isSnapshot":true,"time":1,"levels":[[],[]]}})", f);
  EXPECT_TRUE(f.is_snapshot);
  ex.parse(R"({"channel":"l2Book","data":{"coin":"BTC","time":1,"levels":[[],[]],"isSnapshot":true}})", f);
  EXPECT_TRUE(f.is_snapshot);
  ex.parse(R"({"channel":"l2Book","data":{"coin":"BTC","time":1,"levels":[[],[]]}})", f);
  EXPECT_FALSE(f.is_snapshot);
  for (const char* bad : {R"({"channel":"l2Book","data":{"coin":"BTC","time":1},"audit":{"n":0}})",
                          R"({"channel":"l2Book","data":{"coin":"BTC","time":1},"audit":{"n":"1"}})",
                          R"({"channel":"l2Book","data":{"coin":"BTC","time":1},"audit":{"lost":[5]}})",
                          R"({"channel":"l2Book","data":{"coin":"BTC","time":1},"audit":{"lost":[8,5]}})",
                          R"({"channel":"l2Book","data":{"coin":"BTC","time":1},"audit":{"lost":[1,2,3]}})",
                          R"({"channel":"l2Book","data":{"coin":"BTC","time":1},"audit":{"snapshot":1}})"})
    EXPECT_EQ(ex.parse(bad, f), Kind::Bad) << bad;
}

TEST(Extract, MalformedIsBad) {
  Extractor ex;
  Frame f;
  const char* bad[] = {
      "",
      "   ",
      "{",
      "[]",
      "null",
      "42",
      R"({"channel":"l2Book"})",
      R"({"channel":"l2Book","data":{"coin":"BTC","time":"123","levels":[[],[]]}})",
      R"({"channel":"l2Book","data":{"coin":7,"time":123}})",
      R"({"channel":"l2Book","data":{"coin":"BTC"}})",
      R"({"channel":"l2Book","data":[1,2]})",
      R"({"channel":"trades","data":{"coin":"BTC","time":1}})",
      R"({"channel":"trades","data":[{"coin":"BTC","time":1},5]})",
      R"({"channel":"trades","data":[{"coin":"BTC"}]})",
      R"({"channel":5})",
      R"({"channel":"l2Book","data":{"coin":"BTC","time":1,"levels":[[{"px":)",
      R"({"channel":"l2Book","data":{"coin":"BTC","ti)",
      R"({"channel":"bbo","data":{"coin":"BTC","time":1.5,"bbo":[null,null]}})",
      R"({"channel":"l2Book","data":{"coin":"BTC","time":1,"levels":[]},"audit":{"height":"x"}})",
      R"({"channel":"l2Book","data":{"coin":"BTC","time":1,"levels":[]},"audit":[]})",
      R"({"channel":"allMids","data":{"mids":[1]}})",
  };
  for (const char* s : bad) {
    EXPECT_EQ(ex.parse(s, f, true), Kind::Bad) << s;
    EXPECT_EQ(f.nsamples, 0u) << s;
  }
  // Binary garbage of many lengths and seeds: must never crash; whatever it yields has no samples unless valid.
  std::mt19937 rng(7);
  for (int n = 0; n < 2000; ++n) {
    std::string g(rng() % 300, '\0');
    for (auto& c : g) c = static_cast<char>(rng());
    auto k = ex.parse(g, f, true);
    EXPECT_EQ(k, Kind::Bad);
  }
  // And still works afterwards.
  EXPECT_EQ(ex.parse(R"({"channel":"bbo","data":{"coin":"BTC","time":1,"bbo":[null,null]}})", f), Kind::Bbo);
}
