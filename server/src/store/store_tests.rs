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

#[test]
fn a_users_twap_slices_are_its_newest_fills_with_a_twap_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (user, other) = ([7u8; 20], [8u8; 20]);
    let fill = |tid: u64, twap: Option<u64>| {
        let twap = twap.map_or("null".to_string(), |t| t.to_string());
        format!(r#"{{"coin":"BTC","px":"1.0","sz":"1.0","side":"B","time":{tid},"oid":1,"tid":{tid},"twapId":{twap}}}"#)
    };
    let w = store.db.begin_write().unwrap();
    for h in 1..=10u64 {
        // Every third block holds one of the user's slices; the other user's fill is a slice every time.
        let (mine, theirs) = (fill(h, (h % 3 == 0).then_some(500 + h)), fill(100 + h, Some(9)));
        let fills = [(&user, mine.as_str()), (&other, theirs.as_str())];
        fills_tables::put_block(&w, h, 1_778_000_000_000 + h as i64, fills, [&user, &other]).unwrap();
    }
    w.commit().unwrap();
    let a = Address::parse("0x0707070707070707070707070707070707070707").unwrap();
    let ids = |max: usize| -> Vec<Option<u64>> {
        store.user_twap_slices(&a, u64::MAX, max).unwrap().iter().map(|f| fills::twap_id(f)).collect()
    };
    assert_eq!(ids(10), [Some(503), Some(506), Some(509)], "the user's slices only, oldest first");
    assert_eq!(ids(2), [Some(506), Some(509)], "the newest");
    assert_eq!(store.user_twap_slices(&a, 9, 10).unwrap().len(), 2, "blocks below 9 only");
}
