//! Whole-capture replay: snapshot load (uncompressed, as the node writes it) plus all 51 blocks.

#[path = "../../server/tests/common/mod.rs"]
mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use hlbook::book::snapshot::load_books;
use hlbook::ingest::replay::replay;
use hlbook::node::Mode;

fn bench(c: &mut Criterion) {
    let Some(cap) = common::unpack() else { return };
    // The node writes its snapshot uncompressed; measure that, not gunzip.
    let snap = cap.node_dir.join("snapshot.json");
    let mut gz = flate2::read::GzDecoder::new(std::fs::File::open(&cap.snapshot).expect("snapshot"));
    std::io::copy(&mut gz, &mut std::fs::File::create(&snap).expect("temp file")).expect("unpack snapshot");

    let mut g = c.benchmark_group("replay_capture");
    g.sample_size(10);
    g.bench_function("snapshot_load", |b| b.iter(|| load_books(&snap).expect("loads")));
    for mode in [Mode::ByBlock, Mode::Streaming] {
        g.bench_function(format!("snapshot_plus_51_blocks_{mode:?}"), |b| {
            b.iter(|| {
                let mut books = load_books(&snap).expect("loads");
                replay(&mut books, &cap.node_dir, mode, |_| {}).expect("replays");
                books
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
