//! `Counter`: a monotonic count that one thread bumps and anyone reads. It wraps the atomic so that callers can
//! only add to it, mirror a total kept elsewhere, and read it (never pick an ordering): counters are read for `/metrics` and
//! `/status`, where relaxed ordering is enough, and a counter that went down would break Prometheus rates.
//! `counters!` defines a struct of them in one place: each counter's field, exported name and help.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    /// Mirrors a running total that another owner keeps (a source's own counters), so it only goes up too.
    pub fn set(&self, total: u64) {
        self.0.store(total, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// One counter as the exporters see it: its name, its help (the field's doc comment) and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    pub name: &'static str,
    pub help: &'static str,
    pub value: u64,
}

/// Defines a struct of `Counter`s, each defined once: its field, its exported name (the field's, unless given
/// with `as "name"`) and its help (the doc comment, which `/metrics` serves); `also { .. }` adds private fields
/// that are not counters. `to_list` gives every counter in
/// order for `/health`, `/status` and `/metrics`, so no exporter keeps a table of its own.
macro_rules! counters {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( #[doc = $help:literal] $(#[doc = $more:literal])* $field:ident $(as $export:literal)?, )*
        }
        $( also { $( $(#[$fmeta:meta])* $other:ident: $ty:ty, )* } )?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $name {
            $( #[doc = $help] $(#[doc = $more])* pub $field: $crate::state::counter::Counter, )*
            $( $( $(#[$fmeta])* $other: $ty, )* )?
        }

        impl $name {
            /// Every counter, in definition order.
            pub fn to_list(&self) -> Vec<$crate::state::counter::Named> {
                vec![$( $crate::state::counter::Named {
                    name: $crate::state::counter::counters!(@name $field $($export)?),
                    help: $crate::state::counter::counters!(@help $help $($more)*),
                    value: self.$field.get(),
                }, )*]
            }
        }
    };
    (@name $field:ident) => { stringify!($field) };
    (@name $field:ident $export:literal) => { $export };
    (@help $help:literal $($more:literal)*) => { concat!($help $(, $more)*).trim_ascii() };
}

pub(crate) use counters;

#[cfg(test)]
mod tests {
    use super::{Counter, Named};

    crate::state::counter::counters! {
        struct Two {
            /// Things seen.
            seen,
            /// Things kept,
            /// over two lines.
            kept as "things_kept",
        }
    }

    #[test]
    fn counts_up() {
        let c = Counter::default();
        c.inc();
        c.add(4);
        assert_eq!(c.get(), 5);
    }

    #[test]
    fn a_table_names_each_counter_once() {
        let t = Two::default();
        t.kept.add(3);
        let list = t.to_list();
        assert_eq!(list[0], Named { name: "seen", help: "Things seen.", value: 0 });
        assert_eq!(list[1], Named { name: "things_kept", help: "Things kept, over two lines.", value: 3 });
    }
}
