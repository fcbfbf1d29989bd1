//! Reading the node's text as the tests compare it, with none of hlbook's parsers: decimals in one spelling and
//! node timestamps as epoch milliseconds. Shared by the tests that check hlbook's frames against hlsim's files.

use serde_json::Value;

/// Exact decimal text in one spelling: no trailing fraction zeros, no leading zeros, no "-0".
pub fn norm(v: &Value) -> String {
    let s = v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}"));
    let (neg, digits) = s.strip_prefix('-').map_or((false, s), |d| (true, d));
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let (int, frac) = (int.trim_start_matches('0'), frac.trim_end_matches('0'));
    let int = if int.is_empty() { "0" } else { int };
    let body = if frac.is_empty() { int.to_string() } else { format!("{int}.{frac}") };
    if neg && body != "0" { format!("-{body}") } else { body }
}

/// Days from 1970-01-01 to a date.
fn days_since_epoch(y: i64, m: usize, d: i64) -> i64 {
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let months = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let years: i64 = (1970..y).map(|y| if leap(y) { 366 } else { 365 }).sum();
    years + months[..m - 1].iter().sum::<i64>() + i64::from(m > 2 && leap(y)) + d - 1
}

/// Milliseconds since the epoch (truncated) of a node time `YYYY-MM-DDTHH:MM:SS[.fraction]`, UTC.
pub fn millis(t: &Value) -> i64 {
    let t = t.as_str().unwrap_or_else(|| panic!("not a time: {t}"));
    let (date, time) = t.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let c: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ms: i64 = format!("{:0<3}", &frac[..frac.len().min(3)]).parse().unwrap();
    let days = days_since_epoch(d[0], d[1] as usize, d[2]);
    ((days * 24 + c[0]) * 60 + c[1]) * 60_000 + c[2] * 1000 + ms
}
