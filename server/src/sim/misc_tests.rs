//! hlsim's misc_events against the node format reader, the stream reader and its own accounts: every line parses
//! with nothing skipped, every block is read once in order, every payment moved the accounts by exactly what the
//! files say, and turning the stream on leaves the book streams as they were.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::node::misc::{MiscKind, misc_dir, parse_misc_line};
use crate::node::paths::hour_files_under;
use crate::node::{Fixed, Mode};
use crate::sim::Sim;
use crate::sim::tests::small_args;

const BLOCKS: u64 = 60;

fn misc_lines(dir: &Path, mode: Mode) -> Vec<String> {
    let files = hour_files_under(&dir.join(misc_dir(mode)).join("hourly"), 0).unwrap();
    files
        .iter()
        .flat_map(|f| std::fs::read_to_string(&f.path).unwrap().lines().map(String::from).collect::<Vec<_>>())
        .collect()
}

fn micro(v: Fixed) -> i64 {
    assert_eq!(v.0 % 100, 0, "USDC has 6 decimals");
    (v.0 / 100) as i64
}

fn amount(delta: &Value, key: &str) -> i64 {
    micro(Fixed::parse(delta[key].as_str().unwrap()).unwrap())
}

/// What the files say each (user, dex) was paid, micro-USDC; and the ledger kinds seen.
fn paid(lines: &[String]) -> (BTreeMap<(String, String), i64>, BTreeMap<String, usize>) {
    let (mut paid, mut kinds) = (BTreeMap::new(), BTreeMap::new());
    let mut pay = |user: &str, dex: &str, v: i64| *paid.entry((user.to_string(), dex.to_string())).or_insert(0) += v;
    for l in lines {
        let parsed = parse_misc_line(l).unwrap();
        assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
        for ev in parsed.events {
            match ev.kind {
                MiscKind::Fundings(fs) => {
                    *kinds.entry("funding".into()).or_insert(0) += fs.len();
                    for f in fs {
                        let v = micro(f.usdc.abs);
                        let dex = f.coin.split_once(':').map_or("", |(d, _)| d);
                        pay(&f.user.to_string(), dex, if f.usdc.negative { -v } else { v });
                    }
                }
                MiscKind::Ledger(u) => {
                    *kinds.entry(u.kind.into()).or_insert(0) += 1;
                    let d: Value = serde_json::from_str(&u.delta).unwrap();
                    let a = u.users[0].to_string();
                    match u.kind {
                        "deposit" => pay(&a, "", amount(&d, "usdc")),
                        "withdraw" => pay(&a, "", -amount(&d, "usdc") - amount(&d, "fee")),
                        "internalTransfer" => {
                            pay(&a, "", -amount(&d, "usdc"));
                            pay(&u.users[1].to_string(), "", amount(&d, "usdc"));
                        }
                        "accountClassTransfer" => {
                            let v = amount(&d, "usdc");
                            pay(&a, "", if d["toPerp"] == Value::Bool(true) { v } else { -v });
                        }
                        other => panic!("hlsim wrote {other}"),
                    }
                }
                MiscKind::Ignored(k) => panic!("hlsim wrote {k}"),
            }
        }
    }
    (paid, kinds)
}

fn check_mode(mode: Mode) {
    let tmp = tempfile::tempdir().unwrap();
    let mut on = small_args(&tmp.path().join("on"), mode);
    on.write_misc_events = true;
    on.funding_every_blocks = 5;
    let mut a = Sim::new(&on).unwrap();
    let mut b = Sim::new(&small_args(&tmp.path().join("off"), mode)).unwrap();
    let strip = |s: &Sim| -> Vec<Vec<u8>> {
        s.last_block()
            .streams
            .iter()
            .map(|s| s.data.iter().copied().filter(|c| !c.is_ascii_digit()).collect())
            .collect()
    };
    for _ in 0..BLOCKS {
        a.step().unwrap();
        b.step().unwrap();
        assert_eq!(strip(&a), strip(&b), "the misc stream must not change the book streams");
    }
    let lines = misc_lines(&tmp.path().join("on"), mode);
    assert!(lines.iter().all(|l| !l.is_empty()));
    if mode == Mode::ByBlock {
        assert_eq!(lines.len() as u64, BLOCKS, "one line per block");
    }
    assert!(misc_lines(&tmp.path().join("off"), mode).is_empty());
    let (paid, kinds) = paid(&lines);
    for k in ["funding", "deposit", "withdraw", "internalTransfer", "accountClassTransfer"] {
        assert!(kinds.get(k).is_some_and(|&n| n > 0), "{mode:?}: no {k} in {kinds:?}");
    }
    let (sa, sb) = (a.shared.state.lock(), b.shared.state.lock());
    for (i, user) in sa.market.users.iter().enumerate() {
        for dex in ["", "xyz"] {
            // A user nobody has touched yet holds the starting deposit.
            let usdc = |s: &crate::sim::ChainState| {
                s.market.accounts.get(i as u32).map_or(crate::sim::accounts::DEPOSIT, |acct| acct.usdc(dex))
            };
            let want = paid.get(&(user.clone(), dex.to_string())).copied().unwrap_or(0);
            assert_eq!(usdc(&sa) - usdc(&sb), want, "{user} on dex {dex:?}");
        }
    }
}

#[test]
fn by_block_misc_events_parse_and_move_the_accounts_exactly() {
    check_mode(Mode::ByBlock);
}

#[test]
fn streaming_misc_events_parse_and_move_the_accounts_exactly() {
    check_mode(Mode::Streaming);
}

/// Over hlsim's files in both modes: every block with events is handed out once, in order, with all its events
/// (counted here from the raw JSON, not with the reader's parser).
#[test]
fn reads_every_hlsim_block_once_in_both_modes() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = small_args(tmp.path(), mode);
        args.write_misc_events = true;
        args.funding_every_blocks = 4;
        let mut sim = Sim::new(&args).unwrap();
        let mut r = crate::ingest::side::MiscReader::new(tmp.path(), mode, 0);
        let mut got = Vec::new();
        for _ in 0..40 {
            sim.step().unwrap();
            r.poll(&mut |b| got.push((b.height, b.events.len()))).unwrap();
        }
        let mut want: Vec<(u64, usize)> = Vec::new();
        let files = crate::node::paths::hour_files_under(&tmp.path().join(misc_dir(mode)).join("hourly"), 0).unwrap();
        for f in files {
            for l in std::fs::read_to_string(&f.path).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let (h, n) = (v["block_number"].as_u64().unwrap(), v["events"].as_array().unwrap().len());
                match want.last_mut() {
                    Some((last, k)) if *last == h => *k += n,
                    _ => want.push((h, n)),
                }
            }
        }
        if mode == Mode::Streaming {
            want.pop(); // The last block is complete only once a later one appears.
        }
        assert!(want.iter().map(|w| w.1).sum::<usize>() > 10, "{mode:?}: too few events to mean anything");
        assert_eq!(got, want, "{mode:?}");
        assert_eq!(r.counters().bad_lines + r.counters().duplicates + r.counters().gaps, 0);
    }
}

/// `--restart-at`: the recorded blocks' misc lines are written again byte for byte, and the reader hands each
/// block out once, counting the repeats.
#[test]
fn a_restart_reemits_misc_lines_and_the_reader_drops_them() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = small_args(tmp.path(), mode);
        args.write_misc_events = true;
        args.funding_every_blocks = 1;
        let h0 = args.start_height;
        (args.restart_at, args.restart_back) = (Some(h0 + 6), 3);
        let mut sim = Sim::new(&args).unwrap();
        for _ in 0..9 {
            sim.step().unwrap();
        }
        let lines = misc_lines(tmp.path(), mode);
        let at = |h: u64| -> Vec<&String> {
            lines.iter().filter(|l| l.contains(&format!("\"block_number\":{h},"))).collect()
        };
        let mut repeated = 0;
        for h in h0 + 4..=h0 + 6 {
            let ls = at(h);
            let (first, again) = ls.split_at(ls.len() / 2);
            assert!(ls.len() % 2 == 0 && first == again, "{mode:?}: block {h} not re-emitted identically");
            repeated += again.len() as u64;
        }
        assert!(repeated > 0, "{mode:?}: nothing re-emitted");
        let mut r = crate::ingest::side::MiscReader::new(tmp.path(), mode, 0);
        let mut got = Vec::new();
        r.poll(&mut |b| got.push(b.height)).unwrap();
        let last = if mode == Mode::Streaming { h0 + 7 } else { h0 + 8 };
        let events_in = |h: u64| at(h).iter().any(|l| !l.ends_with("\"events\":[]}"));
        let want: Vec<u64> = (h0..=last).filter(|&h| mode == Mode::ByBlock || events_in(h)).collect();
        assert_eq!(got, want, "{mode:?}");
        assert_eq!(r.counters().duplicates, repeated, "{mode:?}");
    }
}
