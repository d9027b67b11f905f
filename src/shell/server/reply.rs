//! Writing replies: the five-integer decision, field maps, errors.

use std::ffi::CString;
use std::os::raw::{c_char, c_long};

use redis_module::raw::RedisModuleCtx;

use crate::shell::server::api::Api;
use ratelimit_core::grammar::request::PerKey;

/// Starts an array reply of `len` elements (the next `len` replies fill it).
pub fn array(api: &Api, ctx: *mut RedisModuleCtx, len: usize) {
    let len = c_long::try_from(len).unwrap_or(c_long::MAX);
    // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
    // client's reply callback's); the server copies what it is given.
    unsafe { (api.reply_with_array)(ctx, len) };
}

/// Replies with an integer.
pub fn long(api: &Api, ctx: *mut RedisModuleCtx, value: i64) {
    // SAFETY: as in `array`.
    unsafe { (api.reply_with_long_long)(ctx, value) };
}

/// Replies with a bulk string (binary safe).
pub fn bulk(api: &Api, ctx: *mut RedisModuleCtx, bytes: &[u8]) {
    // SAFETY: as in `array`; the server copies the `bytes.len()` bytes at `bytes`.
    unsafe { (api.reply_with_string_buffer)(ctx, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
}

/// Replies with an array of integers (the `RL.*` and `CL.THROTTLE` layouts).
pub fn integers(api: &Api, ctx: *mut RedisModuleCtx, values: &[i64]) {
    array(api, ctx, values.len());
    for v in values {
        long(api, ctx, *v);
    }
}

/// Replies with `RL.ALL`'s layout: six integers, then an array of one five-integer array per
/// key.
pub fn all(api: &Api, ctx: *mut RedisModuleCtx, head: &[i64; 6], details: &PerKey<[i64; 5]>) {
    array(api, ctx, head.len() + 1);
    for v in head {
        long(api, ctx, *v);
    }
    array(api, ctx, details.len());
    for detail in details.iter() {
        integers(api, ctx, detail);
    }
}

/// Replies with `RL.ACQUIRE`'s layout: five integers and the lease id (nil when refused).
pub fn lease(api: &Api, ctx: *mut RedisModuleCtx, values: &[i64; 5], id: Option<&[u8]>) {
    array(api, ctx, 6);
    for v in values {
        long(api, ctx, *v);
    }
    match id {
        // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
        // client's reply callback's); the server copies what it is given.
        Some(id) => unsafe {
            (api.reply_with_string_buffer)(ctx, id.as_ptr().cast::<c_char>(), id.len());
        },
        None => null(api, ctx),
    }
}

/// Replies with an error. `text` must start with its error code (`ERR`, `WRONGTYPE`);
/// control characters become spaces so the reply stays one protocol line.
pub fn error(api: &Api, ctx: *mut RedisModuleCtx, text: &str) {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let c_text = CString::new(clean).unwrap_or_else(|_| CString::from(c"ERR internal error"));
    // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
    // client's reply callback's); the server copies what it is given.
    unsafe { (api.reply_with_error)(ctx, c_text.as_ptr()) };
}

pub fn null(api: &Api, ctx: *mut RedisModuleCtx) {
    // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
    // client's reply callback's); the server copies what it is given.
    unsafe { (api.reply_with_null)(ctx) };
}

pub fn ok(api: &Api, ctx: *mut RedisModuleCtx) {
    // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
    // client's reply callback's); the server copies what it is given.
    unsafe { (api.reply_with_simple_string)(ctx, c"OK".as_ptr()) };
}

/// A field value in an `RL.INFO` map.
pub enum FieldValue<'a> {
    Int(i64),
    Text(&'a str),
    /// Binary-safe bytes (a key).
    Bytes(&'a [u8]),
    /// A flat array `id expires_ms id expires_ms …` (a lease key's `leases`).
    Leases(&'a [(Vec<u8>, i64)]),
    /// An array of counts (a bucketed sliding window's `window_counts`).
    Counts(&'a [u64]),
}

/// Replies with a map (RESP3) that Redis flattens to an array of pairs for RESP2 clients.
pub fn fields(api: &Api, ctx: *mut RedisModuleCtx, pairs: &[(&str, FieldValue<'_>)]) {
    // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
    // client's reply callback's); the server copies what it is given.
    let text = |s: &str| unsafe {
        (api.reply_with_string_buffer)(ctx, s.as_ptr().cast::<c_char>(), s.len());
    };
    // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
    // client's reply callback's); the server copies what it is given.
    unsafe { (api.reply_with_map)(ctx, pairs.len() as c_long) };
    for (name, value) in pairs {
        text(name);
        match value {
            // SAFETY: `ctx` is the live context of the call being answered (a command's, or a
            // blocked client's reply callback's); the server copies what it is given.
            FieldValue::Int(v) => unsafe {
                (api.reply_with_long_long)(ctx, *v);
            },
            FieldValue::Text(s) => text(s),
            // SAFETY: `ctx` is the live context of the call being answered (a command's, or a
            // blocked client's reply callback's); the server copies what it is given.
            FieldValue::Bytes(b) => unsafe {
                (api.reply_with_string_buffer)(ctx, b.as_ptr().cast::<c_char>(), b.len());
            },
            FieldValue::Counts(counts) => {
                array(api, ctx, counts.len());
                for count in counts.iter() {
                    let count = i64::try_from(*count).unwrap_or(i64::MAX);
                    // SAFETY: `ctx` is the live context of the call being answered (a command's, or
                    // a blocked client's reply callback's); the server copies what it is given.
                    unsafe { (api.reply_with_long_long)(ctx, count) };
                }
            }
            FieldValue::Leases(leases) => {
                array(api, ctx, leases.len() * 2);
                for (id, expires_ms) in leases.iter() {
                    // SAFETY: `ctx` is the live context of the call being answered (a command's, or
                    // a blocked client's reply callback's); the server copies what it is given.
                    unsafe {
                        (api.reply_with_string_buffer)(ctx, id.as_ptr().cast::<c_char>(), id.len());
                        (api.reply_with_long_long)(ctx, *expires_ms);
                    }
                }
            }
        }
    }
}
