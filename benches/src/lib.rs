//! What more than one benchmark needs to run the real binaries: a kill-on-drop child and the path of a release
//! binary beside the bench binary. The benchmarks themselves live in `benches/` (criterion and harness-less);
//! they reuse the tests' capture helpers (`server/tests/common`) by path, so locating and unpacking the mainnet
//! capture is written once.

use std::path::{Path, PathBuf};
use std::process::Child;

/// A child process killed (and reaped) when dropped, so a failed run leaves no simulator writing.
#[derive(Debug)]
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// A release binary of the `hlbook` package (`hlbook`, `hlsim`), in the target dir above the bench binary.
pub fn release_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let bin = exe.parent().and_then(Path::parent).expect("target dir").join(name);
    assert!(bin.is_file(), "{} missing: run `cargo build --release -p hlbook --bins` first", bin.display());
    bin
}
