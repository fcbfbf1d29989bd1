//! Test helpers: locating the mainnet capture and unpacking it into a temp node dir.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

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
        eprintln!("SKIPPED: mainnet capture not found at {} (set HL_FIXTURES to its folder)", dir.display());
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
