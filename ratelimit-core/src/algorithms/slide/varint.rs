//! LEB128 varints and the encoding of one exact-log entry.
//!
//! A *varint* (LEB128) writes an integer 7 bits per byte, least significant group first, with
//! the high bit of each byte set when more bytes follow: values below 128 take one byte, below
//! 16 384 two. An *entry* of the older-entries buffer (see `log.rs`) is
//! `varint(cost) varint(gap)`, where `gap` is the time in ms to the next newer entry; typical
//! entries (cost < 128, gaps < 16 s) thus take 2–3 bytes.

/// Bytes `v` takes as a varint.
pub(super) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Writes `v` as LEB128 at `pos` (bytes beyond `buf` are dropped); returns the end position.
fn put_varint(buf: &mut [u8], mut pos: usize, mut v: u64) -> usize {
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if let Some(slot) = buf.get_mut(pos) {
            *slot = if v == 0 { low } else { low | 0x80 };
        }
        pos = pos.saturating_add(1);
        if v == 0 {
            return pos;
        }
    }
}

/// Writes one log entry `varint(cost) varint(gap)` at `pos`; returns the end position.
pub(super) fn put_entry(buf: &mut [u8], pos: usize, cost: u64, gap: u64) -> usize {
    let pos = put_varint(buf, pos, cost);
    put_varint(buf, pos, gap)
}

/// Reads the varint at `pos`: `(value, next pos)`, or `None` if it is cut off or overflows
/// 64 bits.
fn get_varint(buf: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = *buf.get(pos)?;
        pos += 1;
        let part = u64::from(byte & 0x7f);
        if shift > 63 || (shift == 63 && part > 1) {
            return None;
        }
        v |= part << shift;
        if byte & 0x80 == 0 {
            return Some((v, pos));
        }
        shift += 7;
    }
}

/// Decodes the entry at `pos` (before `end`): `(cost, gap to the next newer entry, next pos)`.
pub(super) fn decode_entry(buf: &[u8], pos: usize, end: usize) -> Option<(u64, u64, usize)> {
    let (cost, pos) = get_varint(buf, pos)?;
    let (gap, pos) = get_varint(buf, pos)?;
    (pos <= end).then_some((cost, gap, pos))
}

/// A decoded gap as a time difference (saturating; only a corrupt buffer holds a larger one).
pub(super) fn gap_i64(gap: u64) -> i64 {
    i64::try_from(gap).unwrap_or(i64::MAX)
}
