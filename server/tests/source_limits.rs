//! Limits on what feeds hlbook. The ingest side of each limit (a line over `ingest.max_line_bytes`, a line of a
//! block implausibly far ahead) is tested on canned sources in `ingest::input_tests`; a NATS source never holds
//! more than one line over the cap's worth of parts (`ingest::nats::source`). The end-to-end test with a hostile
//! peer claiming a 2 GiB line was the TCP relay's framing, retired with it.

#[test]
fn the_settings_default_to_the_limits_ingest_defaults_to() {
    let (c, l) = (hlbook::config::IngestConfig::default(), hlbook::ingest::limits::Limits::default());
    assert_eq!(
        (c.max_line_bytes, c.max_height_jump, c.race_max_parked_blocks, c.max_pending_bytes),
        (l.max_line_bytes, l.max_height_jump, l.race_max_parked_blocks, l.max_pending_bytes)
    );
}
