//! Candles as the publisher serves them: the live candle of every wanted (coin, interval) (`keeper`) and the
//! official candle object they go out as. The arithmetic and the history are the store's (`store::candle`).

pub mod keeper;

use serde::Serialize;

use crate::node::Fixed;
pub use crate::store::candle::{Candle, Interval, Trade};

/// The official candle object.
#[derive(Serialize)]
struct CandleOut<'a> {
    t: i64,
    #[serde(rename = "T")]
    close_time: i64,
    s: &'a str,
    i: &'static str,
    o: Fixed,
    c: Fixed,
    h: Fixed,
    l: Fixed,
    v: String,
    n: u64,
}

fn out<'a>(coin: &'a str, interval: Interval, c: &Candle) -> CandleOut<'a> {
    CandleOut {
        t: c.t,
        close_time: c.close_time,
        s: coin,
        i: interval.as_str(),
        o: c.o,
        c: c.c,
        h: c.h,
        l: c.l,
        v: c.v.to_string(),
        n: c.n,
    }
}

/// `{"t","T","s","i","o","c","h","l","v","n"}`: `s` is the coin as subscribed (the books' own name).
pub fn candle_object(coin: &str, interval: Interval, c: &Candle) -> serde_json::Value {
    serde_json::to_value(out(coin, interval, c)).unwrap_or_default()
}

/// `{"channel":"candle","data":{…}}`.
pub fn candle_frame(coin: &str, interval: Interval, c: &Candle) -> Vec<u8> {
    let mut bytes = b"{\"channel\":\"candle\",\"data\":".to_vec();
    // Serializing a plain struct into a Vec cannot fail.
    serde_json::to_writer(&mut bytes, &out(coin, interval, c)).expect("candle serialize");
    bytes.push(b'}');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::FixedSum;

    #[test]
    fn the_official_object_with_exact_decimals() {
        let t0 = 1_778_002_740_000;
        let c = Candle {
            t: t0,
            close_time: t0 + 59_999,
            o: Fixed(300),
            c: Fixed(200),
            h: Fixed(300),
            l: Fixed(100),
            v: FixedSum(16),
            n: 3,
        };
        let json: serde_json::Value = serde_json::from_slice(&candle_frame("@107", Interval::M1, &c)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"channel": "candle", "data": {"t": t0, "T": t0 + 59_999, "s": "@107", "i": "1m",
                "o": "0.000003", "c": "0.000002", "h": "0.000003", "l": "0.000001", "v": "0.00000016", "n": 3}})
        );
        assert_eq!(candle_object("@107", Interval::M1, &c), json["data"]);
    }
}
