//! The stored form of a fill object: the node's JSON with its fixed keys and common values as one byte each and
//! hex strings (`hash`, `cloid`, addresses) as their bytes, so about half the size, and exactly the node's bytes
//! back. Every fill object of every user is kept, so this is most of the store.
//!
//! The node writes every fill with the same keys in the same order (`node::fast` reads them by position), so the
//! object is mostly those keys. Encoding is a greedy scan: a known piece becomes a byte of 0x80-0xfe, a quoted
//! `0x` hex string of lowercase digits becomes 0xff, its length and its bytes, anything else is copied. An object
//! that is not plain ASCII is kept as it is. Decoding maps each byte back, so any input round-trips whatever the
//! scan matched.

/// First byte of an encoded value (a verbatim one starts with `{`).
const COMPACT: u8 = 0x01;
/// A `"0x…"` string of lowercase hex follows: its byte count, then the bytes.
const HEX: u8 = 0xff;

/// Known pieces, longest first where one is the start of another. At most 127.
const PIECES: &[&str] = &[
    r#"{"coin":""#,
    r#"","px":""#,
    r#"","sz":""#,
    r#"","side":"B","time":"#,
    r#"","side":"A","time":"#,
    r#","startPosition":""#,
    r#"","dir":"Open Long","closedPnl":""#,
    r#"","dir":"Open Short","closedPnl":""#,
    r#"","dir":"Close Long","closedPnl":""#,
    r#"","dir":"Close Short","closedPnl":""#,
    r#"","dir":"Buy","closedPnl":""#,
    r#"","dir":"Sell","closedPnl":""#,
    r#"","dir":""#,
    r#"","closedPnl":""#,
    r#"","hash":"#,
    r#","oid":"#,
    r#","crossed":true,"fee":""#,
    r#","crossed":false,"fee":""#,
    r#"","tid":"#,
    r#","cloid":"#,
    r#","feeToken":"USDC","twapId":null}"#,
    r#","feeToken":"USDC","twapId":"#,
    r#","feeToken":""#,
    r#","twapId":null}"#,
    r#","twapId":"#,
    r#","builderFee":""#,
    r#","deployerFee":""#,
    r#","liquidation":{"liquidatedUser":"#,
    r#","markPx":""#,
    r#"","method":"market"}"#,
    r#"","method":"backstop"}"#,
    r#".0",""#,
    "0.0",
];

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// A quoted `0x` string of an even number (2 to 254) of lowercase hex digits at the start of `s`: its bytes.
fn hex_at(s: &[u8]) -> Option<(Vec<u8>, usize)> {
    let body = s.strip_prefix(b"\"0x")?;
    let n = body.iter().take_while(|b| hex_digit(**b).is_some()).count();
    if n == 0 || n % 2 == 1 || n > 254 || body.get(n) != Some(&b'"') {
        return None;
    }
    let bytes = body[..n].chunks(2).map(|p| Some(hex_digit(p[0])? << 4 | hex_digit(p[1])?)).collect::<Option<_>>()?;
    Some((bytes, n + 4))
}

/// The stored form of a fill object.
pub fn encode(json: &str) -> Vec<u8> {
    let s = json.as_bytes();
    if !s.iter().all(|b| (0x20..0x7f).contains(b)) {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(s.len() / 2 + 8);
    out.push(COMPACT);
    let mut at = 0;
    while at < s.len() {
        if let Some((k, p)) = PIECES.iter().enumerate().find(|(_, p)| s[at..].starts_with(p.as_bytes())) {
            out.push(0x80 + k as u8);
            at += p.len();
        } else if let Some((bytes, len)) = hex_at(&s[at..]) {
            out.push(HEX);
            out.push(bytes.len() as u8);
            out.extend_from_slice(&bytes);
            at += len;
        } else {
            out.push(s[at]);
            at += 1;
        }
    }
    out
}

/// The fill object back, byte for byte; `None` for bytes `encode` did not make.
pub fn decode(stored: &[u8]) -> Option<String> {
    let Some((&COMPACT, mut rest)) = stored.split_first() else {
        return String::from_utf8(stored.to_vec()).ok();
    };
    let mut out = String::with_capacity(stored.len() * 2);
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        match b {
            HEX => {
                let (&n, tail) = rest.split_first()?;
                let bytes = tail.get(..usize::from(n))?;
                rest = &tail[usize::from(n)..];
                out.push_str("\"0x");
                for x in bytes {
                    out.push_str(&format!("{x:02x}"));
                }
                out.push('"');
            }
            0x80..=0xfe => out.push_str(PIECES.get(usize::from(b - 0x80))?),
            _ => out.push(char::from(b)),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILLS: &[&str] = &[
        r#"{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"B","time":1778002753024,"startPosition":"0.20486","dir":"Open Long","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036451245,"crossed":true,"fee":"0.010866","tid":316059956208702,"feeToken":"USDC","twapId":1790552}"#,
        r#"{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"A","time":1778002753024,"startPosition":"-0.29602","dir":"Open Short","closedPnl":"0.0","hash":"0x2222138cc516e3fe746c0411dd733f02e60086f43205af2ae37c93f6a792430b","oid":412036231803,"crossed":false,"fee":"-0.000804","tid":316059956208702,"cloid":"0x00000000052e29a900002af647791c39","feeToken":"USDC","twapId":null}"#,
        r#"{"coin":"@107","px":"18.62041381","sz":"43.84","side":"A","time":1735969713869,"startPosition":"10659.65434798","dir":"Sell","closedPnl":"8722.988077","hash":"0xAB","oid":59071663721,"crossed":true,"fee":"0.304521","tid":907359904431134,"feeToken":"HYPE","builderFee":"0.01","twapId":null,"liquidation":{"liquidatedUser":"0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5","markPx":"81300.5","method":"market"}}"#,
        r#"{"coin":"xyz:ÜBER","px":"1.0"}"#,
        r#"{"x":"0x123","y":"0x","z":"\u0001"}"#,
        "",
    ];

    #[test]
    fn every_fill_comes_back_byte_for_byte_at_about_half_the_size() {
        for f in FILLS {
            let stored = encode(f);
            assert_eq!(decode(&stored).as_deref(), Some(*f), "{f}");
        }
        let (plain, stored) = (FILLS[1].len(), encode(FILLS[1]).len());
        assert!(stored * 2 < plain, "{stored} of {plain} bytes");
        assert_eq!(decode(&[COMPACT, HEX, 5, 1]), None, "a truncated hex run");
    }
}
