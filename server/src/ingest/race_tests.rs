use super::*;

#[test]
fn digest_ignores_local_time_only() {
    let a = br#"{"local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.02","block_number":7,"events":[1]}"#;
    let b = br#"{"local_time":"2026-05-05T17:39:13.512000001","block_time":"2026-05-05T17:39:13.02","block_number":7,"events":[1]}"#;
    let c = br#"{"local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.02","block_number":7,"events":[2]}"#;
    assert_eq!(digest(a), digest(b));
    assert_ne!(digest(a), digest(c));
}
