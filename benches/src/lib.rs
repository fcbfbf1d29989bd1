//! Benchmarks of hlbook live in `benches/` (criterion); this crate has no library code of its own.
//! They reuse the tests' capture helpers (`server/tests/common`) by path, so locating and unpacking the
//! mainnet capture is written once.
