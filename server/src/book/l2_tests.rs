use super::*;

/// Levels (price, size), each one order; sizes are distinct so every merge is visible in the sums.
fn levels(side: Side, v: &[(&str, &str)]) -> Vec<LevelAgg> {
    let mut out: Vec<LevelAgg> = v
        .iter()
        .map(|(p, s)| LevelAgg { px: Fixed::parse(p).unwrap(), sz: Fixed::parse(s).unwrap().into(), n: 1 })
        .collect();
    out.sort_by_key(|l| l.px);
    if side == Side::Bid {
        out.reverse();
    }
    out
}

fn agg(side: Side, input: &[LevelAgg], sig: Option<u8>, m: Option<u8>, n: usize) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    aggregate(side, input.iter().copied(), &L2Params::new(sig, m, n).unwrap(), None, &mut out);
    out.iter().map(|l| (l.px.to_string(), l.sz.to_string(), l.n)).collect()
}

fn exp(v: &[(&str, &str, u32)]) -> Vec<(String, String, u32)> {
    v.iter().map(|(p, s, n)| (p.to_string(), s.to_string(), *n)).collect()
}

const BOUNDARY: [(&str, &str); 7] = [
    ("99990.0", "1.0"),
    ("99995.0", "2.0"),
    ("99999.0", "3.0"),
    ("100000.0", "4.0"),
    ("100001.0", "5.0"),
    ("100005.0", "6.0"),
    ("100010.0", "7.0"),
];

// Widths: 5-digit prices 10^(5−s), 6-digit prices 10^(6−s), times the mantissa.
#[test]
fn bids_across_a_power_of_ten() {
    let b = levels(Side::Bid, &BOUNDARY);
    let full = agg(Side::Bid, &b, None, None, 100);
    assert_eq!(full[0], ("100010.0".into(), "7.0".into(), 1));
    assert_eq!(full.len(), 7);
    // s5: widths 1 and 10. 100005, 100001, 100000 → 100000.
    let s5 = [
        ("100010.0", "7.0", 1),
        ("100000.0", "15.0", 3),
        ("99999.0", "3.0", 1),
        ("99995.0", "2.0", 1),
        ("99990.0", "1.0", 1),
    ];
    assert_eq!(agg(Side::Bid, &b, Some(5), None, 100), exp(&s5));
    // s4: widths 10 and 100. 6-digit → 100000; 99999, 99995, 99990 → 99990.
    assert_eq!(agg(Side::Bid, &b, Some(4), None, 100), exp(&[("100000.0", "22.0", 4), ("99990.0", "6.0", 3)]));
    // s3: widths 100 and 1000.
    assert_eq!(agg(Side::Bid, &b, Some(3), None, 100), exp(&[("100000.0", "22.0", 4), ("99900.0", "6.0", 3)]));
    // s2: widths 1000 and 10000.
    assert_eq!(agg(Side::Bid, &b, Some(2), None, 100), exp(&[("100000.0", "22.0", 4), ("99000.0", "6.0", 3)]));
    // s5 m2: widths 2 and 20. 100010 → 100000 (100010 mod 20 = 10); 99999 → 99998; 99995 → 99994.
    let m2 = [("100000.0", "22.0", 4), ("99998.0", "3.0", 1), ("99994.0", "2.0", 1), ("99990.0", "1.0", 1)];
    assert_eq!(agg(Side::Bid, &b, Some(5), Some(2), 100), exp(&m2));
    // s5 m5: widths 5 and 50. 99999, 99995 → 99995.
    let m5 = [("100000.0", "22.0", 4), ("99995.0", "5.0", 2), ("99990.0", "1.0", 1)];
    assert_eq!(agg(Side::Bid, &b, Some(5), Some(5), 100), exp(&m5));
}

#[test]
fn asks_across_a_power_of_ten() {
    let a = levels(Side::Ask, &BOUNDARY);
    assert_eq!(agg(Side::Ask, &a, None, None, 2), exp(&[("99990.0", "1.0", 1), ("99995.0", "2.0", 1)]));
    // s5: 100001, 100005, 100010 round up to 100010.
    let s5 = [
        ("99990.0", "1.0", 1),
        ("99995.0", "2.0", 1),
        ("99999.0", "3.0", 1),
        ("100000.0", "4.0", 1),
        ("100010.0", "18.0", 3),
    ];
    assert_eq!(agg(Side::Ask, &a, Some(5), None, 100), exp(&s5));
    // s4: 99995, 99999 → 100000 (width 10); 6-digit width 100: 100001.. → 100100.
    let s4 = [("99990.0", "1.0", 1), ("100000.0", "9.0", 3), ("100100.0", "18.0", 3)];
    assert_eq!(agg(Side::Ask, &a, Some(4), None, 100), exp(&s4));
    // s3: 5-digit width 100 → 100000; 6-digit width 1000 → 101000.
    assert_eq!(agg(Side::Ask, &a, Some(3), None, 100), exp(&[("100000.0", "10.0", 4), ("101000.0", "18.0", 3)]));
    // s2: width 1000 → 100000; width 10000 → 110000.
    assert_eq!(agg(Side::Ask, &a, Some(2), None, 100), exp(&[("100000.0", "10.0", 4), ("110000.0", "18.0", 3)]));
    // s5 m2: 99995 → 99996; 99999 → 100000; 6-digit width 20 → 100020.
    let m2 = [("99990.0", "1.0", 1), ("99996.0", "2.0", 1), ("100000.0", "7.0", 2), ("100020.0", "18.0", 3)];
    assert_eq!(agg(Side::Ask, &a, Some(5), Some(2), 100), exp(&m2));
    // s5 m5: 99999 → 100000; 6-digit width 50 → 100050.
    let m5 = [("99990.0", "1.0", 1), ("99995.0", "2.0", 1), ("100000.0", "7.0", 2), ("100050.0", "18.0", 3)];
    assert_eq!(agg(Side::Ask, &a, Some(5), Some(5), 100), exp(&m5));
}

// Around 0.0001234: digits(P) = −3, so widths are 10^(−3−s) = 10^(5−s) units of 10^-8.
const TINY: [(&str, &str); 6] = [
    ("0.00012301", "1.0"),
    ("0.0001234", "2.0"),
    ("0.00012345", "3.0"),
    ("0.00012349", "4.0"),
    ("0.00012999", "5.0"),
    ("0.00013001", "6.0"),
];

#[test]
fn tiny_prices_keep_their_significant_figures() {
    let b = levels(Side::Bid, &TINY);
    let a = levels(Side::Ask, &TINY);
    assert_eq!(agg(Side::Bid, &b, Some(5), None, 100).len(), 6, "s5 is the unit grid here");
    assert_eq!(agg(Side::Ask, &a, Some(5), None, 100).len(), 6);
    // s4: width 10 units (0.0000001).
    let s4b = [("0.00013", "6.0", 1), ("0.0001299", "5.0", 1), ("0.0001234", "9.0", 3), ("0.000123", "1.0", 1)];
    assert_eq!(agg(Side::Bid, &b, Some(4), None, 100), exp(&s4b));
    let s4a = [
        ("0.0001231", "1.0", 1),
        ("0.0001234", "2.0", 1),
        ("0.0001235", "7.0", 2),
        ("0.00013", "5.0", 1),
        ("0.0001301", "6.0", 1),
    ];
    assert_eq!(agg(Side::Ask, &a, Some(4), None, 100), exp(&s4a));
    // s3: width 100 units.
    assert_eq!(
        agg(Side::Bid, &b, Some(3), None, 100),
        exp(&[("0.00013", "6.0", 1), ("0.000129", "5.0", 1), ("0.000123", "10.0", 4)])
    );
    assert_eq!(
        agg(Side::Ask, &a, Some(3), None, 100),
        exp(&[("0.000124", "10.0", 4), ("0.00013", "5.0", 1), ("0.000131", "6.0", 1)])
    );
    // s2: width 1000 units.
    assert_eq!(agg(Side::Bid, &b, Some(2), None, 100), exp(&[("0.00013", "6.0", 1), ("0.00012", "15.0", 5)]));
    assert_eq!(agg(Side::Ask, &a, Some(2), None, 100), exp(&[("0.00013", "15.0", 5), ("0.00014", "6.0", 1)]));
    // s5 m2: width 2 units, every level distinct.
    let m2b = ["0.00013", "0.00012998", "0.00012348", "0.00012344", "0.0001234", "0.000123"];
    assert_eq!(agg(Side::Bid, &b, Some(5), Some(2), 100).iter().map(|l| l.0.as_str()).collect::<Vec<_>>(), m2b);
    let m2a = ["0.00012302", "0.0001234", "0.00012346", "0.0001235", "0.00013", "0.00013002"];
    assert_eq!(agg(Side::Ask, &a, Some(5), Some(2), 100).iter().map(|l| l.0.as_str()).collect::<Vec<_>>(), m2a);
    // s5 m5: width 5 units. 0.00012349 and 0.00012345 → 0.00012345 on the bid side.
    let m5b = [
        ("0.00013", "6.0", 1),
        ("0.00012995", "5.0", 1),
        ("0.00012345", "7.0", 2),
        ("0.0001234", "2.0", 1),
        ("0.000123", "1.0", 1),
    ];
    assert_eq!(agg(Side::Bid, &b, Some(5), Some(5), 100), exp(&m5b));
    let m5a = ["0.00012305", "0.0001234", "0.00012345", "0.0001235", "0.00013", "0.00013005"];
    assert_eq!(agg(Side::Ask, &a, Some(5), Some(5), 100).iter().map(|l| l.0.as_str()).collect::<Vec<_>>(), m5a);
}

#[test]
fn truncates_after_aggregating_from_full_depth() {
    let b = levels(Side::Bid, &BOUNDARY);
    assert_eq!(agg(Side::Bid, &b, Some(4), None, 1), exp(&[("100000.0", "22.0", 4)]));
    assert_eq!(agg(Side::Bid, &b, None, None, 1), exp(&[("100010.0", "7.0", 1)]));
}

#[test]
fn tick_is_the_finest_grid() {
    // Price 12.3 with 5 figures would be a 0.001 grid; a 0.1 tick keeps it at 0.1.
    let b = levels(Side::Bid, &[("12.3", "1.0"), ("12.2", "1.0")]);
    let mut out = Vec::new();
    let p = L2Params::new(Some(5), None, 10).unwrap();
    aggregate(Side::Bid, b.iter().copied(), &p, Some(Fixed::parse("0.5").unwrap()), &mut out);
    assert_eq!(out.iter().map(|l| (l.px.to_string(), l.n)).collect::<Vec<_>>(), vec![("12.0".to_string(), 2)]);
}

#[test]
fn params_are_validated_and_normalised() {
    assert_eq!(L2Params::new(Some(5), Some(1), 20).unwrap().mantissa, None);
    assert_eq!(L2Params::new(Some(6), None, 20), Err(L2ParamError::SigFigs(6)));
    assert_eq!(L2Params::new(Some(1), None, 20), Err(L2ParamError::SigFigs(1)));
    assert_eq!(L2Params::new(Some(4), Some(2), 20), Err(L2ParamError::MantissaWithoutFive));
    assert_eq!(L2Params::new(None, Some(5), 20), Err(L2ParamError::MantissaWithoutFive));
    assert_eq!(L2Params::new(Some(5), Some(3), 20), Err(L2ParamError::Mantissa(3)));
    assert_eq!(L2Params::new(None, None, 0), Err(L2ParamError::Levels(0)));
    assert_eq!(L2Params::new(None, None, 101), Err(L2ParamError::Levels(101)));
    for (s, m) in VARIANTS {
        assert!(L2Params::new(s, m, 100).is_ok());
    }
}

#[test]
fn zero_price_does_not_panic() {
    let z = [LevelAgg { px: Fixed::ZERO, sz: FixedSum::ZERO, n: 1 }];
    for (s, m) in VARIANTS {
        for side in [Side::Bid, Side::Ask] {
            assert_eq!(agg(side, &z, s, m, 5).len(), 1);
        }
    }
}

#[test]
fn json_in_the_official_shape() {
    let mut out = Vec::new();
    write_levels_json(&mut out, &[], &[]);
    assert_eq!(out, b"[[],[]]");
    let b = levels(Side::Bid, &[("84143.0", "10.25923")]);
    let a = levels(Side::Ask, &[("84144.0", "0.5"), ("84150.0", "0.00711")]);
    out.clear();
    write_l2_book_json(&mut out, "BTC", 1790232236546, &b, &a);
    let expected = r#"{"coin":"BTC","time":1790232236546,"levels":[[{"px":"84143.0","sz":"10.25923","n":1}],[{"px":"84144.0","sz":"0.5","n":1},{"px":"84150.0","sz":"0.00711","n":1}]]}"#;
    assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
    out.clear();
    write_l2_book_json(&mut out, "we\"ird\\coin", 1, &[], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["coin"], "we\"ird\\coin");
}

/// The definition, level by level: bucket every level of the full input, merge equal neighbours, truncate.
fn naive(side: Side, input: &[LevelAgg], p: &L2Params) -> Vec<LevelAgg> {
    let mut out: Vec<LevelAgg> = Vec::new();
    for l in input {
        let px = match p.n_sig_figs {
            None => l.px,
            Some(s) => bucket(side, l.px, s, u64::from(p.mantissa.unwrap_or(1)), None),
        };
        match out.last_mut() {
            Some(last) if last.px == px => {
                last.sz.0 += l.sz.0;
                last.n += l.n;
            }
            _ => out.push(LevelAgg { px, ..*l }),
        }
    }
    out.truncate(p.n_levels);
    out
}

proptest::proptest! {
    #[test]
    fn early_stopping_aggregation_equals_the_definition(
        raw in proptest::collection::btree_set(1u64..30_000_000_000_000, 1..300),
        sizes in proptest::collection::vec(1u64..1_000_000_000, 300),
        variant in 0usize..7,
        n_levels in 1usize..=100,
        ask in proptest::bool::ANY,
    ) {
        let side = if ask { Side::Ask } else { Side::Bid };
        let mut input: Vec<LevelAgg> =
            raw.iter().zip(&sizes).map(|(&px, &sz)| LevelAgg { px: Fixed(px), sz: Fixed(sz).into(), n: 1 }).collect();
        if side == Side::Bid {
            input.reverse();
        }
        let (s, m) = VARIANTS[variant];
        let p = L2Params::new(s, m, n_levels).unwrap();
        let mut out = Vec::new();
        aggregate(side, input.iter().copied(), &p, None, &mut out);
        proptest::prop_assert_eq!(out, naive(side, &input, &p));
    }
}
