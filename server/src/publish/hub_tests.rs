use super::*;
use crate::book::Books;
use crate::publish::frame::Audit;

fn hub() -> Hub {
    Hub::new(Arc::new(Shared::new(Books::default(), std::time::Duration::from_secs(10))), 16, 1 << 20)
}

fn l2(coin: &str, levels: usize) -> Want {
    Want::L2(L2Key { coin: Coin::from(coin), params: L2Params::new(Some(3), None, levels).unwrap() })
}

#[test]
fn wanted_follows_each_coins_own_subscriptions_and_forgets_the_last_one() {
    let hub = hub();
    let wants = [l2("BTC", 20), l2("BTC", 5), Want::Bbo("BTC".into()), Want::Trades("ETH".into())];
    let slot = hub.add(&wants[0]).unwrap();
    assert!(Arc::ptr_eq(&slot, &hub.add(&wants[0]).unwrap()), "one slot per shape, shared");
    for w in &wants[1..] {
        hub.add(w);
    }
    let w = hub.wanted();
    let btc = &w.coins["BTC"];
    assert_eq!(btc.l2.len(), 1, "one aggregation serves both depths");
    assert_eq!(btc.l2[0].depths.iter().map(|d| d.n_levels).collect::<Vec<_>>(), [5, 20], "deepest last");
    assert!(btc.bbo.is_some() && !btc.trades && w.coins["ETH"].trades);

    hub.remove(&wants[0], None);
    assert_eq!(hub.wanted().coins["BTC"].l2[0].depths.len(), 2, "one subscriber of the 20-level shape is left");
    for w in &wants {
        hub.remove(w, None);
    }
    assert_eq!((hub.coins_wanted(), hub.wanted().coins.len()), (0, 0), "nothing is kept for coins nobody wants");
    hub.remove(&wants[3], None);
    assert_eq!(hub.coins_wanted(), 0, "removing what is not there changes nothing");
}

#[test]
fn a_slots_frames_are_numbered_in_the_slot_so_a_gap_is_a_replaced_frame() {
    let (a, b) = (Slot::default(), Slot::default());
    let seq = |s: &Slot| s.frame.load().as_ref().map(|f| f.seq);
    a.put(b"{}".to_vec(), Audit::default());
    b.put(b"{}".to_vec(), Audit::default());
    a.put(b"{}".to_vec(), Audit::default());
    assert_eq!((seq(&a), seq(&b)), (Some(2), Some(1)), "another slot's frames leave no gap in this one");
}

#[test]
fn a_subscription_change_reports_only_its_own_coin() {
    let hub = hub();
    for coin in ["BTC", "ETH", "SOL"] {
        hub.add(&l2(coin, 20));
    }
    let first = hub.take_shape_changes();
    assert_eq!(first.coins.len(), 3);
    assert!(!first.mids);
    assert!(hub.take_shape_changes().is_empty(), "taken once");
    hub.add(&Want::Bbo("ETH".into()));
    hub.add(&l2("BTC", 20));
    let c = hub.take_shape_changes();
    assert_eq!(
        c.coins.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["ETH"],
        "a second subscriber of a shape changes no shape"
    );
    hub.add(&Want::Mids(None));
    hub.remove(&l2("SOL", 20), None);
    let c = hub.take_shape_changes();
    assert!(c.mids && c.coins.len() == 1 && c.coins.contains("SOL"));
    assert!(hub.shared().first_coins().contains("ETH") && !hub.shared().first_coins().contains("SOL"));
}

#[test]
fn one_client_ips_lingering_user_streams_are_bounded_and_other_streams_still_linger() {
    let hub = hub().with_resume_window(std::time::Duration::from_secs(60), 2);
    let (a, b): (std::net::IpAddr, std::net::IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let user = |n: u8| crate::node::event::HexBytes([n; 20]);
    let orders = |n: u8| Want::User { user: user(n), channel: UserChannel::Orders, aggregate_by_time: false };
    for n in 1..=3 {
        hub.add(&orders(n));
        hub.remove(&orders(n), Some(a));
    }
    hub.add(&orders(4));
    hub.remove(&orders(4), Some(b));
    let followed = [1, 2, 3, 4].map(|n| hub.users.follows(user(n)));
    assert_eq!(followed, [true, true, false, true], "a's third user stops at once; b's lingers");
    let btc = Want::Trades("BTC".into());
    hub.add(&btc);
    hub.remove(&btc, Some(a));
    assert!(hub.wanted().coins["BTC"].trades, "coin streams linger whoever left them");
}
