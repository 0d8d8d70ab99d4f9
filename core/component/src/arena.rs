//! The guest's allocator: a bump arena for the stateless calls, the system allocator otherwise.
//!
//! `prepare` turns a request of a few hundred kilobytes (a Claude Code conversation, sent again
//! every turn) into tens of thousands of short-lived strings, values and vectors, and drops them
//! all before it returns. In wasm, allocating and freeing them one by one with dlmalloc was a
//! tenth of the call's time. Inside [`scope`] an allocation is instead the next aligned piece of
//! one region (a pointer bump), freeing it only counts it back (and gives the space back when it
//! was the last piece, so a growing vector usually grows in place), and the region is reused
//! from its start by the next scope.
//!
//! Reuse is safe because it is conditional: the region restarts only when every piece handed
//! out from it has been freed (a count of live pieces, which the pieces' `dealloc` calls bring
//! down, including the ones the canonical ABI's post-return makes for a call's results). A piece
//! kept past its call (nothing in the core does that: it has no statics) would only stop the
//! reuse: later scopes bump on past it, and once the region is full, allocate from the system.
//! Translator streams never use the region: their state lives as long as the stream.
//!
//! A wasm component has one thread (no shared memory), so the state below is never touched
//! concurrently; the atomics are plain loads and stores there.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// The region's size. Only the pages a call writes become resident; a call that needs more
/// goes on in the system allocator.
const REGION_BYTES: usize = 8 << 20;

/// Start and end of the region (0 until the first scope takes it from the system allocator).
static START: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);
/// Where the next piece may start.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Pieces handed out and not yet freed.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Whether allocations come from the region now.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Runs `call` with its allocations in the region (see the module docs).
///
/// `call` must not call a WASI import that returns a list or a string (environment, files,
/// random bytes): the canonical ABI could allocate the result in the region through
/// `cabi_realloc`, and wasi-libc then give it to its own `free`, which does not know the
/// region. The core calls none (it has no host capabilities; its hash maps are seeded without
/// `get-random-bytes`).
pub(crate) fn scope<R>(call: impl FnOnce() -> R) -> R {
    if START.load(Relaxed) == 0 {
        take_region();
    }
    if LIVE.load(Relaxed) == 0 {
        NEXT.store(START.load(Relaxed), Relaxed);
    }
    ACTIVE.store(true, Relaxed);
    let result = call();
    ACTIVE.store(false, Relaxed);
    result
}

fn take_region() {
    let Ok(layout) = Layout::from_size_align(REGION_BYTES, 16) else {
        return;
    };
    // SAFETY: the layout has a non-zero size. The region is never freed.
    let start = unsafe { System.alloc(layout) } as usize;
    if start != 0 {
        START.store(start, Relaxed);
        NEXT.store(start, Relaxed);
        END.store(start + REGION_BYTES, Relaxed);
    }
}

fn in_region(ptr: *mut u8) -> bool {
    let at = ptr as usize;
    at >= START.load(Relaxed) && at < END.load(Relaxed)
}

/// The next piece of the region for `layout`, if the region is in use and has room.
fn bump(layout: Layout) -> Option<*mut u8> {
    if !ACTIVE.load(Relaxed) {
        return None;
    }
    let start = NEXT
        .load(Relaxed)
        .checked_next_multiple_of(layout.align())?;
    let end = start.checked_add(layout.size())?;
    if start == 0 || end > END.load(Relaxed) {
        return None;
    }
    NEXT.store(end, Relaxed);
    LIVE.fetch_add(1, Relaxed);
    Some(start as *mut u8)
}

/// The allocator of the component (`lib.rs` installs it).
pub(crate) struct CallArena;

// SAFETY: pieces of the region are disjoint while live (NEXT only moves back over the last
// piece when it is freed or resized, and to the start only when no piece is live); everything
// else is the system allocator's. The target has one thread.
unsafe impl GlobalAlloc for CallArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match bump(layout) {
            Some(piece) => piece,
            // SAFETY: forwarded as given.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_region(ptr) {
            LIVE.fetch_sub(1, Relaxed);
            if ptr as usize + layout.size() == NEXT.load(Relaxed) {
                NEXT.store(ptr as usize, Relaxed);
            }
            return;
        }
        // SAFETY: a block the system allocator handed out, forwarded as given.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !in_region(ptr) {
            // SAFETY: a block the system allocator handed out, forwarded as given.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let at = ptr as usize;
        if at + layout.size() == NEXT.load(Relaxed)
            && at
                .checked_add(new_size)
                .is_some_and(|end| end <= END.load(Relaxed))
        {
            // The last piece: it grows or shrinks where it is.
            NEXT.store(at + new_size, Relaxed);
            return ptr;
        }
        // SAFETY: `realloc`'s contract makes this a valid layout of a non-zero size.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as `alloc`; the old piece is copied and then freed.
        unsafe {
            let moved = self.alloc(new_layout);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            moved
        }
    }
}
