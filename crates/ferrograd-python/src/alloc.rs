//! The extension's allocator: mimalloc for small blocks, the system allocator for large ones.
//!
//! Every op makes several small short-lived objects (buffer, storage, tensor, tape record);
//! mimalloc serves them in a fraction of glibc's time. Large buffers stay with the system
//! allocator, which refuses an impossible request (so the engine raises `MemoryError`) where
//! mimalloc would reserve it and let the kernel kill the process on first touch. Memory the
//! extension hands to numpy is freed by the extension, so allocators never mix.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// Blocks up to this size come from mimalloc.
const SMALL: usize = 64 << 10;

/// mimalloc aligns every block to this (blocks under 16 bytes to 8).
const MI_ALIGN: usize = 16;

/// Whether mimalloc's plain entry points satisfy `layout`'s alignment: its aligned ones (which
/// the `mimalloc` crate always calls) cost a few percent of a tiny op.
fn plain(layout: &Layout) -> bool {
    layout.align() <= MI_ALIGN && layout.align() <= layout.size()
}

struct Split;

#[global_allocator]
static ALLOC: Split = Split;

// SAFETY: every block is freed (and resized) by the allocator that made it: the layout a
// block is freed or resized with has the size it was allocated with, which picks the same
// side of `SMALL`; a resize across the boundary moves the block.
unsafe impl GlobalAlloc for Split {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() <= SMALL {
            if plain(&layout) {
                mi::mi_malloc(layout.size()) as *mut u8
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() <= SMALL {
            if plain(&layout) {
                mi::mi_zalloc(layout.size()) as *mut u8
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() <= SMALL {
            mi::mi_free(ptr as *mut c_void)
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (layout.size() <= SMALL, new_size <= SMALL) {
            (true, true) if plain(&layout) && layout.align() <= new_size => {
                mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            }
            (true, true) => {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
            (false, false) => System.realloc(ptr, layout, new_size),
            _ => {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}
