//! userFills' `aggregateByTime: true`: the fills of one order at one time become one fill.
//!
//! The official rule (info endpoint docs, `userFillsByTime`): "partial fills are combined when a crossing order
//! gets filled by multiple different resting orders; resting orders filled by multiple crossing orders are only
//! aggregated if in the same block". A block has one time, so both are: fills of one user with the same coin,
//! `oid` and `time`. The merged fill is the first one's object (its key order, `tid`, `hash`, `startPosition`,
//! `dir`, `crossed`, `feeToken`, `twapId`, `cloid`…) with `sz`, `fee`, `closedPnl` and `builderFee` summed exactly
//! and `px` the size-weighted average price, rounded half up to 8 decimals. The docs do not give the merge
//! formula; this is hlbook's (docs/api.md).

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::node::Fixed;

/// A fill's `twapId` when it is a TWAP slice's (the node writes `"twapId":null` on every other fill).
pub fn twap_id(fill: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Slice {
        #[serde(rename = "twapId")]
        twap_id: Option<u64>,
    }
    serde_json::from_str::<Slice>(fill).ok()?.twap_id
}

/// A signed decimal as (digits, decimals).
fn signed(s: &str) -> Option<(i128, u32)> {
    let (neg, body) = s.strip_prefix('-').map_or((false, s), |b| (true, b));
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() || frac.len() > 18 || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: i128 = format!("{int}{frac}").parse().ok()?;
    Some((if neg { -v } else { v }, frac.len() as u32))
}

/// The exact sum of decimal strings, with as many decimals as the longest (at least one).
fn sum(values: &[&str]) -> Option<String> {
    let parsed: Vec<(i128, u32)> = values.iter().map(|v| signed(v)).collect::<Option<_>>()?;
    let scale = parsed.iter().map(|p| p.1).max().unwrap_or(0).max(1);
    let mut total: i128 = 0;
    for (v, d) in parsed {
        total = total.checked_add(v.checked_mul(10i128.checked_pow(scale - d)?)?)?;
    }
    let digits = total.unsigned_abs().to_string();
    let digits = format!("{digits:0>width$}", width = scale as usize + 1);
    let (int, frac) = digits.split_at(digits.len() - scale as usize);
    let frac = frac.trim_end_matches('0');
    let sign = if total < 0 { "-" } else { "" };
    Some(format!("{sign}{int}.{}", if frac.is_empty() { "0" } else { frac }))
}

/// The group key of a fill: (coin, oid, time).
fn key(v: &Value) -> Option<(String, u64, i64)> {
    Some((v.get("coin")?.as_str()?.to_string(), v.get("oid")?.as_u64()?, v.get("time")?.as_i64()?))
}

fn text<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k)?.as_str()
}

/// One fill from a group of two or more; `None` if a field is not as the node writes it.
fn merge(group: &[Map<String, Value>]) -> Option<String> {
    let mut out = group[0].clone();
    for field in ["sz", "fee", "closedPnl", "builderFee"] {
        if group.iter().all(|f| f.contains_key(field)) {
            let list: Vec<&str> = group.iter().map(|f| text(f, field)).collect::<Option<_>>()?;
            out.insert(field.to_string(), Value::String(sum(&list)?));
        }
    }
    let (mut notional, mut size) = (0u128, 0u128);
    for f in group {
        let (px, sz) = (Fixed::parse(text(f, "px")?).ok()?, Fixed::parse(text(f, "sz")?).ok()?);
        notional += u128::from(px.0) * u128::from(sz.0);
        size += u128::from(sz.0);
    }
    let avg = u64::try_from((notional + size / 2) / size.max(1)).ok()?;
    out.insert("px".into(), Value::String(Fixed(avg).to_string()));
    serde_json::to_string(&out).ok()
}

/// The fills with each order's fills at one time merged, in the order of each group's first fill.
pub fn aggregate<'a>(fills: &[&'a str]) -> Vec<Cow<'a, str>> {
    let parsed: Vec<Option<Map<String, Value>>> = fills.iter().map(|f| serde_json::from_str(f).ok()).collect();
    let keys: Vec<Option<(String, u64, i64)>> =
        parsed.iter().map(|p| p.as_ref().and_then(|m| key(&Value::Object(m.clone())))).collect();
    let mut out = Vec::with_capacity(fills.len());
    let mut taken = vec![false; fills.len()];
    for i in 0..fills.len() {
        if taken[i] {
            continue;
        }
        taken[i] = true;
        let Some(k) = &keys[i] else {
            out.push(Cow::Borrowed(fills[i]));
            continue;
        };
        let mut members = vec![i];
        for j in i + 1..fills.len() {
            if !taken[j] && keys[j].as_ref() == Some(k) {
                taken[j] = true;
                members.push(j);
            }
        }
        if members.len() == 1 {
            out.push(Cow::Borrowed(fills[i]));
            continue;
        }
        let group: Vec<Map<String, Value>> = members.iter().filter_map(|&m| parsed[m].clone()).collect();
        match merge(&group) {
            Some(m) => out.push(Cow::Owned(m)),
            None => out.extend(members.iter().map(|&m| Cow::Borrowed(fills[m]))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sums_of_signed_decimals() {
        assert_eq!(sum(&["0.010866", "-0.000804"]).as_deref(), Some("0.010062"));
        assert_eq!(sum(&["0.0", "0.0"]).as_deref(), Some("0.0"));
        assert_eq!(sum(&["-1.5", "0.25"]).as_deref(), Some("-1.25"));
        assert_eq!(sum(&["8722.988077", "1"]).as_deref(), Some("8723.988077"));
        assert_eq!(sum(&["1e5"]), None);
    }

    #[test]
    fn one_orders_fills_at_one_time_merge_and_others_stay_verbatim() {
        let f = |oid: u64, time: i64, px: &str, sz: &str, fee: &str, tid: u64| {
            format!(
                r#"{{"coin":"BTC","px":"{px}","sz":"{sz}","side":"B","time":{time},"startPosition":"0.1","dir":"Open Long","closedPnl":"0.0","hash":"0xab","oid":{oid},"crossed":true,"fee":"{fee}","tid":{tid},"feeToken":"USDC","twapId":null}}"#
            )
        };
        let a = f(7, 100, "81308.0", "0.1", "0.01", 1);
        let b = f(8, 100, "81000.0", "0.5", "0.02", 2);
        let c = f(7, 100, "81310.0", "0.3", "0.03", 3);
        let d = f(7, 200, "81320.0", "0.1", "0.01", 4);
        let list = [a.as_str(), b.as_str(), c.as_str(), d.as_str()];
        let got = aggregate(&list);
        assert_eq!(got.len(), 3);
        let merged: Value = serde_json::from_str(&got[0]).unwrap();
        // (81308 × 0.1 + 81310 × 0.3) / 0.4 = 81309.5
        assert_eq!(merged["px"], "81309.5");
        assert_eq!(
            (&merged["sz"], &merged["fee"], &merged["tid"]),
            (&Value::from("0.4"), &Value::from("0.04"), &Value::from(1))
        );
        assert!(
            got[0].starts_with(r#"{"coin":"BTC","px":"81309.5","sz":"0.4","side":"B","time":100,"startPosition""#),
            "{}",
            got[0]
        );
        assert_eq!(
            (&got[1], &got[2]),
            (&Cow::Borrowed(b.as_str()), &Cow::Borrowed(d.as_str())),
            "other orders and times stay as written"
        );
    }
}
