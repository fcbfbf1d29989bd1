//! Lets the benches use the integration tests' process rig (`server/tests/procs`, included by path) as it is:
//! that rig names the binaries with `env!("CARGO_BIN_EXE_hlbook")`, which cargo sets only for the `hlbook`
//! package's own tests. Here they are the binaries of the same profile directory: the release ones under
//! `make bench` (which builds them first), the test build's under `make smoke` (a bench that finds one missing
//! says so).

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let profile_dir = out.ancestors().nth(3).expect("OUT_DIR inside the target directory");
    for bin in ["hlbook", "hlsim"] {
        println!("cargo:rustc-env=CARGO_BIN_EXE_{bin}={}", profile_dir.join(bin).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
