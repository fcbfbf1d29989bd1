use clap::Parser;

// mimalloc, not glibc's malloc: under a long soak (every channel, mainnet load) glibc's per-thread arenas kept
// growing by ~1.5 MB a minute after warm-up (frames of many sizes made on the publisher's threads and freed on the
// connections'), while mimalloc returns freed pages to the system; docs/benchmarks.md "Soak".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    match hlbook::cli::run(hlbook::cli::Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
