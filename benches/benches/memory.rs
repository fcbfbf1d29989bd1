//! Bytes per resting order: heap bytes held by the books after loading the capture's 51k-order snapshot,
//! counted by a wrapping global allocator, divided by the order count.

#[path = "../../server/tests/common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use hlbook::book::snapshot::load_books;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[allow(clippy::float_arithmetic)]
fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let Some(cap) = common::unpack() else { return };
    let before = LIVE.load(Ordering::Relaxed);
    let books = load_books(&cap.snapshot).expect("snapshot loads");
    let held = LIVE.load(Ordering::Relaxed) - before;
    let orders = books.order_count();
    println!(
        "memory/bytes_per_resting_order: {:.1} B ({held} B held for {orders} orders)",
        held as f64 / orders as f64
    );
    drop(books);
}
