//! Node timestamps.
//!
//! `block_time` and `local_time` are UTC civil times with nanoseconds and no zone suffix
//! (`2026-05-05T17:39:13.024084407`). We keep them as nanoseconds since the Unix epoch: cheap to subtract for
//! latency, and `block_time / 1e6` is the millisecond `time` of the official API.

use time::PrimitiveDateTime;
use time::format_description::FormatItem;
use time::macros::format_description;

/// Nanoseconds since the Unix epoch, UTC.
pub type UnixNanos = i64;

const NODE_TIME: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond]");
const NODE_TIME_WHOLE: &[FormatItem<'static>] = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");

/// Parses a node timestamp; a fraction of 1 to 9 digits, or none, is accepted.
pub fn parse_node_time(s: &str) -> Result<UnixNanos, time::error::Parse> {
    let t = PrimitiveDateTime::parse(s, NODE_TIME).or_else(|_| PrimitiveDateTime::parse(s, NODE_TIME_WHOLE))?;
    // i64 nanoseconds cover 1677..2262, far beyond any block.
    Ok(t.assume_utc().unix_timestamp_nanos() as i64)
}

/// Milliseconds, as the official API's `time` fields.
pub fn nanos_to_millis(t: UnixNanos) -> i64 {
    t.div_euclid(1_000_000)
}

/// Formats nanoseconds the way the node writes times (`2026-05-05T17:39:13.024084407`).
pub fn format_node_time(t: UnixNanos) -> String {
    match time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(t)) {
        Ok(dt) => {
            let (y, mo, d) = (dt.year(), u8::from(dt.month()), dt.day());
            let (h, mi, s, ns) = (dt.hour(), dt.minute(), dt.second(), dt.nanosecond());
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ns:09}")
        }
        Err(_) => String::new(),
    }
}

/// Current wall-clock time.
pub fn now_nanos() -> UnixNanos {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_node_times() {
        let t = parse_node_time("2026-05-05T17:39:13.024084407").unwrap();
        assert_eq!(t, 1_778_002_753_024_084_407);
        assert_eq!(nanos_to_millis(t), 1_778_002_753_024);
        assert_eq!(parse_node_time("2026-05-05T17:39:13.5").unwrap(), 1_778_002_753_500_000_000);
        assert_eq!(parse_node_time("2026-05-05T17:39:13").unwrap(), 1_778_002_753_000_000_000);
        assert!(parse_node_time("2026-05-05 17:39:13").is_err());
        assert!(parse_node_time("").is_err());
        assert_eq!(format_node_time(t), "2026-05-05T17:39:13.024084407");
        assert_eq!(parse_node_time(&format_node_time(1_778_002_753_500_000_000)).unwrap(), 1_778_002_753_500_000_000);
    }
}
