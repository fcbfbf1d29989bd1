//! Interning of the short strings and order flavours that repeat on every line.
//!
//! A line holds hundreds of events naming the same few coins and statuses; interning turns each into an `Arc`
//! clone instead of an allocation. The sets are capped so that hostile or unusual input (say a stream of distinct
//! coin names) cannot grow them without bound: past the cap values are still correct, just no longer shared.

use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::event::{Coin, OrderFlavor};

/// Distinct values kept per set.
const CAP: usize = 1 << 16;

/// The interning tables of one parser.
#[derive(Debug, Default)]
pub struct Interner {
    strs: FxHashSet<Arc<str>>,
    flavors: FxHashSet<Arc<OrderFlavor>>,
}

impl Interner {
    /// A shared copy of `s` (coin names, statuses).
    pub fn str(&mut self, s: &str) -> Coin {
        if let Some(v) = self.strs.get(s) {
            return v.clone();
        }
        let v: Arc<str> = Arc::from(s);
        insert_capped(&mut self.strs, &v);
        v
    }

    pub fn flavor(&mut self, f: OrderFlavor) -> Arc<OrderFlavor> {
        if let Some(v) = self.flavors.get(&f) {
            return v.clone();
        }
        let v = Arc::new(f);
        insert_capped(&mut self.flavors, &v);
        v
    }
}

fn insert_capped<T: ?Sized + Eq + Hash>(set: &mut FxHashSet<Arc<T>>, v: &Arc<T>) {
    if set.len() < CAP {
        set.insert(v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_equal_strings() {
        let mut i = Interner::default();
        let a = i.str("BTC");
        let b = i.str("BTC");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*i.str("@107"), "@107");
        let f1 = i.flavor(OrderFlavor::system_default());
        let f2 = i.flavor(OrderFlavor::system_default());
        assert!(Arc::ptr_eq(&f1, &f2));
    }

    #[test]
    fn cap_keeps_values_correct() {
        let mut i = Interner::default();
        for n in 0..CAP + 10 {
            assert_eq!(&*i.str(&n.to_string()), n.to_string());
        }
        assert_eq!(i.strs.len(), CAP);
    }
}
