//! Exact fixed-point numbers for prices and sizes.
//!
//! The node writes prices and sizes as decimal strings ("81308.0", "0.00033"). We keep them as integers
//! counting 10^-8 units: Hyperliquid itself never uses more than 8 decimals for a price or a size, so every node
//! string maps to exactly one `Fixed`, and sums stay exact. Formatting is canonical (trailing zeros dropped, at
//! least one fractional digit), which is how the node writes numbers, so parse → format is lossless for node
//! output (checked over every number of the mainnet capture in the tests).

use std::fmt;

/// Fractional digits kept.
pub const SCALE_DIGITS: u32 = 8;
/// `Fixed` units in 1.0.
pub const ONE: u64 = 100_000_000;

/// A non-negative decimal with 8 fractional digits, stored as integer units of 10^-8.
#[derive(Copy, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fixed(pub u64);

/// An exact sum of `Fixed` values (a level's size): wider so that no realistic book can overflow it.
#[derive(Copy, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FixedSum(pub u128);

/// Why a decimal string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("empty decimal")]
    Empty,
    #[error("invalid character {0:?} in decimal")]
    BadChar(char),
    #[error("more than {SCALE_DIGITS} significant fractional digits")]
    TooPrecise,
    #[error("decimal out of range")]
    Overflow,
}

impl Fixed {
    pub const ZERO: Fixed = Fixed(0);

    /// Parses an unsigned decimal string (`"81308.0"`, `"0.00033"`, `"12"`). No sign, no exponent.
    pub fn parse(s: &str) -> Result<Fixed, DecimalError> {
        Fixed::parse_bytes(s.as_bytes())
    }

    /// `parse` of bytes: a fast reader takes the digits straight from the line.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Fixed, DecimalError> {
        if bytes.is_empty() {
            return Err(DecimalError::Empty);
        }
        let (int_part, frac_part) = match bytes.iter().position(|&b| b == b'.') {
            Some(dot) => (&bytes[..dot], &bytes[dot + 1..]),
            None => (bytes, &bytes[..0]),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DecimalError::Empty);
        }
        let mut int: u64 = 0;
        for &b in int_part {
            let d = digit(b)?;
            int = int.checked_mul(10).and_then(|v| v.checked_add(d)).ok_or(DecimalError::Overflow)?;
        }
        let mut frac: u64 = 0;
        for (i, &b) in frac_part.iter().enumerate() {
            let d = digit(b)?;
            if i < SCALE_DIGITS as usize {
                frac = frac * 10 + d;
            } else if d != 0 {
                return Err(DecimalError::TooPrecise);
            }
        }
        let shown = frac_part.len().min(SCALE_DIGITS as usize) as u32;
        frac *= 10u64.pow(SCALE_DIGITS - shown);
        int.checked_mul(ONE).and_then(|v| v.checked_add(frac)).map(Fixed).ok_or(DecimalError::Overflow)
    }

    /// Canonical decimal text, e.g. `81308.0`.
    pub fn to_text(self) -> DecimalText {
        DecimalText::new(u128::from(self.0))
    }
}

impl FixedSum {
    pub const ZERO: FixedSum = FixedSum(0);

    pub fn add(&mut self, v: Fixed) {
        self.0 += u128::from(v.0);
    }

    pub fn sub(&mut self, v: Fixed) {
        self.0 -= u128::from(v.0);
    }

    pub fn to_text(self) -> DecimalText {
        DecimalText::new(self.0)
    }
}

impl From<Fixed> for FixedSum {
    fn from(v: Fixed) -> Self {
        FixedSum(u128::from(v.0))
    }
}

fn digit(b: u8) -> Result<u64, DecimalError> {
    if b.is_ascii_digit() { Ok(u64::from(b - b'0')) } else { Err(DecimalError::BadChar(char::from(b))) }
}

/// A formatted decimal on the stack (no allocation): `as_str()` borrows it.
#[derive(Clone, Copy)]
pub struct DecimalText {
    buf: [u8; 48],
    start: u8,
}

impl DecimalText {
    fn new(units: u128) -> DecimalText {
        // u128 division is a slow library call; every realistic value fits u64.
        let (int, frac) = match u64::try_from(units) {
            Ok(u) => (u128::from(u / ONE), u % ONE),
            Err(_) => (units / u128::from(ONE), (units % u128::from(ONE)) as u64),
        };
        // Written right to left: the 8 fraction digits, trailing zeros dropped (at least one kept), the dot, then
        // the integer part.
        let mut buf = [0u8; 48];
        let mut pos = buf.len();
        let mut f = frac;
        let mut keep = false;
        for i in 0..SCALE_DIGITS {
            let d = (f % 10) as u8;
            f /= 10;
            keep |= d != 0 || i == SCALE_DIGITS - 1;
            if keep {
                pos -= 1;
                buf[pos] = b'0' + d;
            }
        }
        pos -= 1;
        buf[pos] = b'.';
        if let Ok(mut small) = u64::try_from(int) {
            loop {
                pos -= 1;
                buf[pos] = b'0' + (small % 10) as u8;
                small /= 10;
                if small == 0 {
                    break;
                }
            }
        } else {
            let mut big = int;
            loop {
                pos -= 1;
                buf[pos] = b'0' + (big % 10) as u8;
                big /= 10;
                if big == 0 {
                    break;
                }
            }
        }
        DecimalText { buf, start: pos as u8 }
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits and '.' are ever written.
        std::str::from_utf8(&self.buf[usize::from(self.start)..]).unwrap_or("")
    }
}

impl fmt::Display for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_text().as_str())
    }
}

impl fmt::Debug for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fixed({self})")
    }
}

impl fmt::Display for FixedSum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_text().as_str())
    }
}

impl fmt::Debug for FixedSum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FixedSum({self})")
    }
}

impl fmt::Debug for DecimalText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Fixed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.to_text().as_str())
    }
}

impl serde::Serialize for FixedSum {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.to_text().as_str())
    }
}

/// Accepts both borrowed and transient strings, so it works with `from_str` and `from_reader` alike.
impl<'de> serde::Deserialize<'de> for Fixed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Fixed;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a decimal string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Fixed, E> {
                Fixed::parse(s).map_err(|e| E::custom(format_args!("{e}: {s:?}")))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(s: &str) -> String {
        Fixed::parse(s).expect(s).to_string()
    }

    #[test]
    fn parses_and_formats_node_strings_losslessly() {
        for s in ["81308.0", "0.00033", "0.0", "0.1804", "0.00000001", "184467440737.0", "1.5"] {
            assert_eq!(round_trip(s), s);
        }
    }

    #[test]
    fn exact_units() {
        assert_eq!(Fixed::parse("81308.0").unwrap(), Fixed(8_130_800_000_000));
        assert_eq!(Fixed::parse("0.00033").unwrap(), Fixed(33_000));
        assert_eq!(Fixed::parse("12").unwrap(), Fixed(12 * ONE));
        assert_eq!(Fixed::parse(".5").unwrap(), Fixed(ONE / 2));
        assert_eq!(Fixed::parse("0.100000000000").unwrap(), Fixed(ONE / 10));
    }

    #[test]
    fn integers_gain_a_dot_zero() {
        assert_eq!(round_trip("12"), "12.0");
        assert_eq!(round_trip("0.18000"), "0.18");
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(Fixed::parse(""), Err(DecimalError::Empty));
        assert_eq!(Fixed::parse("."), Err(DecimalError::Empty));
        assert_eq!(Fixed::parse("-1.0"), Err(DecimalError::BadChar('-')));
        assert_eq!(Fixed::parse("1e5"), Err(DecimalError::BadChar('e')));
        assert_eq!(Fixed::parse("1.2.3"), Err(DecimalError::BadChar('.')));
        assert_eq!(Fixed::parse("0.000000001"), Err(DecimalError::TooPrecise));
        assert_eq!(Fixed::parse("99999999999999999999"), Err(DecimalError::Overflow));
        assert_eq!(Fixed::parse("184467440738.0"), Err(DecimalError::Overflow));
    }

    #[test]
    fn sums_are_exact_and_wide() {
        let mut s = FixedSum::ZERO;
        for _ in 0..3 {
            s.add(Fixed::parse("0.1").unwrap());
        }
        assert_eq!(s.to_string(), "0.3");
        let mut big = FixedSum::ZERO;
        for _ in 0..1000 {
            big.add(Fixed(u64::MAX));
        }
        big.sub(Fixed(u64::MAX));
        assert_eq!(big.0, 999 * u128::from(u64::MAX));
        assert_eq!(big.to_string(), "184282973296358.42063385");
    }
}
