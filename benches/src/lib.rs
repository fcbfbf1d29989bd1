//! Shared helpers for the benchmarks live in the bench targets themselves; this library is empty.
