//! L2 views of a book: price levels aggregated to the official API's precisions, and their JSON.
//!
//! Input is the book's level list with running totals, best first, so a build costs O(levels returned). With
//! `nSigFigs`, a level at price P falls in a bucket of width `mantissa × 10^(digits(P) − nSigFigs)`, where
//! digits(P) = floor(log10 P) + 1 (the integer digits for P ≥ 1; zero or negative below 1, so tiny prices keep
//! their significant figures). Bids round down, asks up (away from the spread). Bucket prices are monotonic along
//! the best-first order, so a bucket is complete as soon as the next one starts and aggregation stops one bucket
//! past the requested depth. All arithmetic is on integer 10^-8 units.

use crate::node::{Fixed, FixedSum, Side};

/// One L2 level: price, total size, order count.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LevelAgg {
    pub px: Fixed,
    pub sz: FixedSum,
    pub n: u32,
}

/// The official precisions: full, nSigFigs 5/4/3/2, and nSigFigs 5 with mantissa 2 or 5.
pub const VARIANTS: [(Option<u8>, Option<u8>); 7] = [
    (None, None),
    (Some(5), None),
    (Some(4), None),
    (Some(3), None),
    (Some(2), None),
    (Some(5), Some(2)),
    (Some(5), Some(5)),
];

/// Most levels per side a client may ask for.
pub const MAX_LEVELS: usize = 100;

/// A validated L2 shape.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct L2Params {
    pub n_sig_figs: Option<u8>,
    /// Normalised: mantissa 1 is stored as `None`.
    pub mantissa: Option<u8>,
    pub n_levels: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum L2ParamError {
    #[error("nSigFigs must be 2, 3, 4, 5 or null, got {0}")]
    SigFigs(u8),
    #[error("mantissa must be 1, 2 or 5, got {0}")]
    Mantissa(u8),
    #[error("mantissa is only allowed with nSigFigs 5")]
    MantissaWithoutFive,
    #[error("nLevels must be between 1 and {MAX_LEVELS}, got {0}")]
    Levels(usize),
}

impl L2Params {
    pub fn new(n_sig_figs: Option<u8>, mantissa: Option<u8>, n_levels: usize) -> Result<L2Params, L2ParamError> {
        if let Some(s) = n_sig_figs
            && !(2..=5).contains(&s)
        {
            return Err(L2ParamError::SigFigs(s));
        }
        let mantissa = match mantissa {
            None | Some(1) => None,
            Some(m @ (2 | 5)) if n_sig_figs == Some(5) => Some(m),
            Some(2 | 5) => return Err(L2ParamError::MantissaWithoutFive),
            Some(m) => return Err(L2ParamError::Mantissa(m)),
        };
        if !(1..=MAX_LEVELS).contains(&n_levels) {
            return Err(L2ParamError::Levels(n_levels));
        }
        Ok(L2Params { n_sig_figs, mantissa, n_levels })
    }

    /// Full precision with `n_levels`.
    pub fn full(n_levels: usize) -> L2Params {
        L2Params { n_sig_figs: None, mantissa: None, n_levels: n_levels.clamp(1, MAX_LEVELS) }
    }
}

/// Aggregates best-first `levels` of one side into `out` (cleared first, reused across calls).
pub fn aggregate(
    side: Side,
    levels: impl Iterator<Item = LevelAgg>,
    params: &L2Params,
    tick: Option<Fixed>,
    out: &mut Vec<LevelAgg>,
) {
    out.clear();
    let Some(sig) = params.n_sig_figs else {
        out.extend(levels.take(params.n_levels));
        return;
    };
    let mantissa = u64::from(params.mantissa.unwrap_or(1));
    for level in levels {
        // Levels come best first, and a bucket holds every price between its edge and the first level that fell
        // in it, so the bucket is only recomputed once a price leaves it.
        if let Some(last) = out.last_mut()
            && match side {
                Side::Bid => level.px >= last.px,
                Side::Ask => level.px <= last.px,
            }
        {
            last.sz.0 += level.sz.0;
            last.n += level.n;
            continue;
        }
        if out.len() == params.n_levels {
            return;
        }
        out.push(LevelAgg { px: bucket(side, level.px, sig, mantissa, tick), ..level });
    }
}

/// The bucket price of `px`: rounded down (bids) or up (asks) to a multiple of its bucket width.
pub fn bucket(side: Side, px: Fixed, sig: u8, mantissa: u64, tick: Option<Fixed>) -> Fixed {
    let w = width(px, sig, mantissa, tick);
    let down = px.0 - px.0 % w;
    match side {
        Side::Bid => Fixed(down),
        Side::Ask if down == px.0 => Fixed(down),
        Side::Ask => Fixed(down.saturating_add(w)),
    }
}

/// Bucket width in 10^-8 units: `mantissa × 10^(digits(P) − sig)`, at least one unit and at least the tick.
fn width(px: Fixed, sig: u8, mantissa: u64, tick: Option<Fixed>) -> u64 {
    // In units of 10^-8, digits(P) = unit_digits − 8, so the width is mantissa × 10^(unit_digits − sig) units.
    let unit_digits = px.0.checked_ilog10().map_or(1, |d| d + 1) as i32;
    let exp = unit_digits - i32::from(sig);
    // Below one unit (only possible under 10^-3 with 5 figures) the grid is the unit itself.
    let w = if exp < 0 { 1 } else { 10u64.saturating_pow(exp as u32).saturating_mul(mantissa) };
    w.max(tick.map_or(1, |t| t.0))
}

/// `[[bids…],[asks…]]` in the official level shape: `{"px":"84143.0","sz":"10.25923","n":36}`.
pub fn write_levels_json(out: &mut Vec<u8>, bids: &[LevelAgg], asks: &[LevelAgg]) {
    write_levels_marked(out, bids, asks, &mut LevelMarks::default());
}

/// Where each side's levels sit in written JSON: the offset just inside the side's `[`, and the offset just after
/// each level's `}`. A shallower depth's levels are a prefix of each side (`publish::l2_frames` cuts them out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelMarks {
    pub open: [usize; 2],
    pub ends: [Vec<usize>; 2],
}

/// `write_levels_json`, recording in `marks` (cleared first) where each level ends.
pub fn write_levels_marked(out: &mut Vec<u8>, bids: &[LevelAgg], asks: &[LevelAgg], marks: &mut LevelMarks) {
    out.push(b'[');
    for (i, side) in [bids, asks].into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        marks.open[i] = out.len();
        marks.ends[i].clear();
        for (j, l) in side.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            // Hand-assembled (no `fmt` machinery): this runs for every level of every frame.
            out.extend_from_slice(b"{\"px\":\"");
            out.extend_from_slice(l.px.to_text().as_str().as_bytes());
            out.extend_from_slice(b"\",\"sz\":\"");
            out.extend_from_slice(l.sz.to_text().as_str().as_bytes());
            out.extend_from_slice(b"\",\"n\":");
            out.extend_from_slice(itoa::Buffer::new().format(l.n).as_bytes());
            out.push(b'}');
            marks.ends[i].push(out.len());
        }
        out.push(b']');
    }
    out.push(b']');
}

/// The official l2Book data object: `{"coin":"BTC","time":…,"levels":[…]}`.
pub fn write_l2_book_json(out: &mut Vec<u8>, coin: &str, time_ms: i64, bids: &[LevelAgg], asks: &[LevelAgg]) {
    write_l2_book_marked(out, coin, time_ms, bids, asks, &mut LevelMarks::default());
}

/// `write_l2_book_json`, recording in `marks` where each level ends.
pub fn write_l2_book_marked(
    out: &mut Vec<u8>,
    coin: &str,
    time_ms: i64,
    bids: &[LevelAgg],
    asks: &[LevelAgg],
    marks: &mut LevelMarks,
) {
    out.extend_from_slice(b"{\"coin\":");
    // serde_json escapes the coin name; writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, coin);
    out.extend_from_slice(b",\"time\":");
    out.extend_from_slice(itoa::Buffer::new().format(time_ms).as_bytes());
    out.extend_from_slice(b",\"levels\":");
    write_levels_marked(out, bids, asks, marks);
    out.push(b'}');
}

#[cfg(test)]
#[path = "l2_tests.rs"]
mod tests;
