//! How an end-to-end test says it cannot run here, so a skip is never mistaken for a pass.
//!
//! A skip prints `SKIPPED: test: why` and appends the same to `$HLBOOK_SKIP_LOG`, which `make rust-test` lists
//! (with a count) when the run ends: cargo hides a passing test's output, and a skipped test passes. Under
//! `HLBOOK_NO_SKIPS=1` (CI, which has the capture and every tool installed) a skip fails the test instead.

#![allow(dead_code)]

use std::io::Write;

/// Says why the calling test does not run (call it, then return).
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let bin = std::env::args().next().unwrap_or_default();
    let krate = std::path::Path::new(&bin).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    // Test binaries are named `name-HASH`.
    let krate = krate.rsplit_once('-').map_or(krate.as_str(), |(k, _)| k).to_string();
    assert!(
        std::env::var("HLBOOK_NO_SKIPS").as_deref() != Ok("1"),
        "{krate}::{test} would skip, which HLBOOK_NO_SKIPS=1 forbids: {why}"
    );
    eprintln!("SKIPPED: {krate}::{test}: {why}");
    if let Some(log) = std::env::var_os("HLBOOK_SKIP_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log)
    {
        let _ = writeln!(f, "{krate}::{test}: {why}");
    }
}
