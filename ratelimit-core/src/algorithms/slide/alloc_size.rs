//! The allocator's size classes, so that a buffer's length is also what it really occupies.
//!
//! jemalloc (Redis' allocator) rounds every request up to a *size class*: multiples of 16
//! bytes up to 128, then four classes per doubling (160, 192, 224, 256, 320, …). A buffer
//! allocated at exactly a class size wastes nothing, and its length is what
//! [`SlideState::heap_bytes`](super::SlideState::heap_bytes) reports to `MEMORY USAGE`.

/// jemalloc's size class for a request of `n` bytes (16-byte steps up to 128, then four
/// classes per doubling).
pub(super) fn size_class(n: usize) -> usize {
    if n <= 128 {
        return n.div_ceil(16).max(1).saturating_mul(16);
    }
    let k = usize::BITS - 1 - (n - 1).leading_zeros(); // 2^k < n ≤ 2^(k+1), k ≥ 7
    let step = 1usize << (k - 2);
    n.div_ceil(step).saturating_mul(step)
}
