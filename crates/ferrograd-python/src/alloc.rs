//! The extension's allocator: mimalloc for small blocks, the system allocator for large ones.
//!
//! Every op makes several small short-lived objects (buffer, storage, tensor, tape record);
//! mimalloc serves them in a fraction of glibc's time. Large buffers stay with the system
//! allocator, which refuses an impossible request (so the engine raises `MemoryError`) where
//! mimalloc would reserve it and let the kernel kill the process on first touch. Memory the
//! extension hands to numpy is freed by the extension, so allocators never mix.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks up to this size come from mimalloc.
const SMALL: usize = 64 << 10;

struct Split;

#[global_allocator]
static ALLOC: Split = Split;

// SAFETY: every block is freed (and resized) by the allocator that made it: the layout a
// block is freed or resized with has the size it was allocated with, which picks the same
// side of `SMALL`; a resize across the boundary moves the block.
unsafe impl GlobalAlloc for Split {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() <= SMALL {
            MiMalloc.alloc(layout)
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() <= SMALL {
            MiMalloc.alloc_zeroed(layout)
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() <= SMALL {
            MiMalloc.dealloc(ptr, layout)
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (layout.size() <= SMALL, new_size <= SMALL) {
            (true, true) => MiMalloc.realloc(ptr, layout, new_size),
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
