//! Test helpers: locating the mainnet capture and unpacking it into a temp node dir.
#![allow(dead_code)]

#[path = "../skip/mod.rs"]
mod skip_impl;
pub use skip_impl::skip;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hlbook::ingest::tail::block_number;
use hlbook::node::{Mode, Stream};

/// The capture folder: `$HL_FIXTURES`, or `shared/fixtures/hl-mainnet-btc` beside the checkout.
/// `None` (with the reason printed) where neither exists, so the caller can skip.
pub fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("HL_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/hl-mainnet-btc"),
    };
    if dir.join("snapshot_985148181.json.gz").is_file() {
        Some(dir)
    } else {
        skip(&format!("mainnet capture not found at {} (set HL_FIXTURES to its folder)", dir.display()));
        None
    }
}

/// The unpacked capture: the snapshot path and a node data dir holding both modes' files.
pub struct Capture {
    pub snapshot: PathBuf,
    pub node_dir: PathBuf,
    _tmp: tempfile::TempDir,
}

/// Unpacks both archives of the capture into a fresh temp dir (read in place, never copied into the repo).
pub fn unpack() -> Option<Capture> {
    let dir = fixtures()?;
    let tmp = tempfile::tempdir().expect("temp dir");
    for archive in ["by_block_btc_985148182_985148232.tar.gz", "streaming_btc_985148182_985148232.tar.gz"] {
        let file = std::fs::File::open(dir.join(archive)).expect("open archive");
        tar::Archive::new(flate2::read::GzDecoder::new(file)).unpack(tmp.path()).expect("unpack archive");
    }
    Some(Capture { snapshot: dir.join("snapshot_985148181.json.gz"), node_dir: tmp.path().join("hl/data"), _tmp: tmp })
}

/// A digest of every order of every book: oid, side, px, sz, user and place in level.
pub fn l4_digest(books: &hlbook::book::Books) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for coin in books.coin_names() {
        let book = books.coin(&coin).expect("listed coin");
        coin.hash(&mut h);
        for side in [hlbook::node::Side::Bid, hlbook::node::Side::Ask] {
            for (px, level) in book.levels(side) {
                (px, level.n, level.sz).hash(&mut h);
                for (place, o) in book.level_orders(level).enumerate() {
                    (place, o.oid, o.side, o.px, o.sz, o.user).hash(&mut h);
                }
            }
        }
    }
    h.finish()
}

pub const REL: &str = "hourly/20260505/17";

/// Every line of the capture for `mode`, with its stream and block number, in the order the node writes them.
pub fn lines_in_write_order(src: &Path, mode: Mode) -> Vec<(Stream, u64, String)> {
    let mut all = Vec::new();
    for s in Stream::ALL {
        let text = std::fs::read_to_string(src.join(s.dir(mode)).join(REL)).expect("capture file");
        all.extend(text.lines().map(|l| (s, block_number(l.as_bytes()).expect("height"), l.to_string())));
    }
    // Stable: by block, then fills, diffs, statuses, then file order.
    all.sort_by_key(|(s, h, _)| (*h, *s));
    all
}

/// Every streaming line of the capture in the order the node wrote them (by `local_time`, then file order), with
/// its stream and `local_time` (ns since the day began).
pub fn lines_by_local_time(src: &Path) -> Vec<(Stream, i64, String)> {
    let mut all = Vec::new();
    for s in Stream::ALL {
        let text = std::fs::read_to_string(src.join(s.dir(Mode::Streaming)).join(REL)).expect("capture file");
        for l in text.lines() {
            // `{"local_time":"2026-05-05T17:39:15.992777117",...`: the clock part as ns (the node drops trailing
            // zeros of the fraction).
            let clock = l[26..].split('"').next().expect("local_time");
            let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
            let n = |x: &str| x.parse::<i64>().expect("local_time");
            let mut parts = hms.split(':').map(n);
            let (h, m, sec) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
            let at = ((h * 60 + m) * 60 + sec) * 1_000_000_000 + n(&format!("{frac:0<9}"));
            all.push((s, at, l.to_string()));
        }
    }
    all.sort_by_key(|(_, t, _)| *t);
    all
}

/// Writes the capture into `dst` at a steady pace (`pace` per block), each line split across two writes; `corrupt` replaces one (stream, height) line with garbage.
pub fn write_capture(src: &Path, dst: &Path, mode: Mode, corrupt: Option<(Stream, u64)>, pace: Duration) {
    let mut files = std::collections::HashMap::new();
    let mut current = 0;
    for (stream, height, mut line) in lines_in_write_order(src, mode) {
        if corrupt == Some((stream, height)) {
            line = format!("{{\"block_number\":{height},\"events\":[{{\"oops");
        }
        if height != current {
            current = height;
            std::thread::sleep(pace);
        }
        let f = files.entry(stream).or_insert_with(|| {
            let p = dst.join(stream.dir(mode)).join(REL);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::File::create(p).unwrap()
        });
        // A reader may see the first half alone.
        let cut = line.len() / 2;
        f.write_all(&line.as_bytes()[..cut]).unwrap();
        f.flush().unwrap();
        f.write_all(&line.as_bytes()[cut..]).unwrap();
        f.write_all(b"\n").unwrap();
    }
}

/// The replay digest at `height`.
pub fn replay_digest(cap: &Capture, mode: Mode, height: u64) -> u64 {
    let mut books = hlbook::book::snapshot::load_books(&cap.snapshot).expect("snapshot");
    let mut digest = None;
    hlbook::ingest::replay::replay(&mut books, &cap.node_dir, mode, |step| {
        if step.block.height == height {
            digest = Some(l4_digest(step.books));
        }
    })
    .expect("replays");
    digest.expect("height reached")
}
