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

#[test]
fn a_store_with_fills_in_the_old_layout_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::create(dir.path().join(FILE)).unwrap();
        let w = db.begin_write().unwrap();
        let old = redb::TableDefinition::<(&[u8; 20], u64, u32), &[u8]>::new("fills_20260505");
        w.open_table(old).unwrap().insert((&[1u8; 20], 5, 0), b"{}".as_slice()).unwrap();
        w.commit().unwrap();
    }
    let e = Store::open(dir.path()).unwrap_err();
    assert!(e.contains("schema 1") && e.contains("move the store's folder away"), "{e}");
    let fresh = tempfile::tempdir().unwrap();
    drop(Store::open(fresh.path()).unwrap());
    let again = Store::open(fresh.path()).unwrap();
    assert_eq!(again.meta("schema"), Some(schema::SCHEMA), "a new store says its layout and opens again");
}
