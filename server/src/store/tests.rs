use super::*;

#[test]
fn a_store_opens_once_and_readers_wait_for_heights() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let again = Store::open(dir.path()).unwrap_err();
    assert!(again.contains("cannot open the store"), "{again}");
    assert_eq!(store.height(), 0);
    assert!(!store.wait_for(1, Duration::from_millis(1)));
    let s = store.clone();
    let waiter = std::thread::spawn(move || s.wait_for(5, Duration::from_secs(600)));
    store.committed(5);
    assert!(waiter.join().unwrap());
    assert_eq!(store.coverage(), Coverage { first_ms: i64::MAX, ..Coverage::default() });
    assert_eq!(store.status_json()["state"], "opening");
}
