//! Any bytes into every line parser and the snapshot reader: errors are fine, panics are bugs.
#![no_main]

use hlbook::node::{NodeParser, Stream};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parser = NodeParser::new();
    for stream in Stream::ALL {
        let _ = parser.parse(stream, &text);
    }
    let _ = hlbook::node::snapshot::read_snapshot(data, |_| {});
});
