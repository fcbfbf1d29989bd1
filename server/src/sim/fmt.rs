//! Writing numbers, times and ids exactly as the node does, straight into byte buffers (no `format!` on the hot
//! path: at `--rate 10` a block holds ~100k status objects).
//!
//! Decimals: integer part, a dot, the fraction without trailing zeros but at least one digit (`81308.0`,
//! `0.1804`). Times: UTC civil time with 9 fraction digits and no zone (`2026-05-05T17:39:13.024084407`).

/// Appends `units / 10^dec` in the node's decimal form.
pub fn decimal(out: &mut Vec<u8>, units: u64, dec: u32) {
    let scale = 10u64.pow(dec);
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(units / scale).as_bytes());
    out.push(b'.');
    let mut frac = units % scale;
    if frac == 0 {
        out.push(b'0');
        return;
    }
    let mut digits = dec;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    let s = b.format(frac);
    out.extend(std::iter::repeat_n(b'0', digits as usize - s.len()));
    out.extend_from_slice(s.as_bytes());
}

/// Signed variant of [`decimal`] (fees, positions, pnl).
pub fn signed_decimal(out: &mut Vec<u8>, units: i64, dec: u32) {
    if units < 0 {
        out.push(b'-');
    }
    decimal(out, units.unsigned_abs(), dec);
}

/// The decimal as a `String` (tests, snapshot tweaks).
pub fn decimal_string(units: u64, dec: u32) -> String {
    let mut v = Vec::new();
    decimal(&mut v, units, dec);
    String::from_utf8(v).unwrap_or_default()
}

pub fn uint(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a node timestamp for `nanos` since the Unix epoch.
pub fn node_time(out: &mut Vec<u8>, nanos: i64) {
    let secs = nanos.div_euclid(1_000_000_000);
    let frac = nanos.rem_euclid(1_000_000_000) as u64;
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400) as u64;
    pad(out, y as u64, 4);
    out.push(b'-');
    pad(out, m, 2);
    out.push(b'-');
    pad(out, d, 2);
    out.push(b'T');
    pad(out, sod / 3600, 2);
    out.push(b':');
    pad(out, sod / 60 % 60, 2);
    out.push(b':');
    pad(out, sod % 60, 2);
    out.push(b'.');
    pad(out, frac, 9);
}

/// (YYYYMMDD, hour) of a Unix time in nanoseconds, as hour files are named.
pub fn date_hour(nanos: i64) -> (u32, u8) {
    let secs = nanos.div_euclid(1_000_000_000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    ((y as u32) * 10_000 + (m as u32) * 100 + d as u32, (secs.rem_euclid(86_400) / 3600) as u8)
}

fn pad(out: &mut Vec<u8>, v: u64, width: usize) {
    let mut b = itoa::Buffer::new();
    let s = b.format(v);
    out.extend(std::iter::repeat_n(b'0', width.saturating_sub(s.len())));
    out.extend_from_slice(s.as_bytes());
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `0x` + lowercase hex of `bytes`.
pub fn hex_string(bytes: &[u8]) -> String {
    format!("0x{}", faster_hex::hex_string(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(units: u64, d: u32) -> String {
        decimal_string(units, d)
    }

    #[test]
    fn decimals_match_the_node() {
        assert_eq!(dec(81_308, 0), "81308.0");
        assert_eq!(dec(18_040, 5), "0.1804");
        assert_eq!(dec(61_488, 5), "0.61488");
        assert_eq!(dec(30, 5), "0.0003");
        assert_eq!(dec(0, 5), "0.0");
        assert_eq!(dec(100_000, 5), "1.0");
        let mut v = Vec::new();
        signed_decimal(&mut v, -804, 6);
        assert_eq!(v, b"-0.000804");
    }

    #[test]
    fn times_match_the_node() {
        let t = crate::node::time::parse_node_time("2026-05-05T17:39:13.024084407").unwrap();
        let mut v = Vec::new();
        node_time(&mut v, t);
        assert_eq!(std::str::from_utf8(&v).unwrap(), "2026-05-05T17:39:13.024084407");
        assert_eq!(date_hour(t), (20260505, 17));
        let leap = crate::node::time::parse_node_time("2024-02-29T00:00:00.000000001").unwrap();
        v.clear();
        node_time(&mut v, leap);
        assert_eq!(std::str::from_utf8(&v).unwrap(), "2024-02-29T00:00:00.000000001");
    }
}
