//! The benchmarks live in `benches/` (criterion and harness-less). What they share with the tests they include
//! by path: the process rig (`server/tests/procs`: hlsim, hlbook and nats-server started and stopped one way;
//! `build.rs` points it at the release binaries) and the capture helpers (`server/tests/common`), so locating the
//! mainnet capture and starting the real binaries are each written once.
