//! The state decoder (RDB load, `RESTORE`, `RL.RESTORE`): the input bytes are one encoded key
//! value (a limiter, and a ban in format version 2). Properties: nothing panics; whatever
//! decodes re-encodes byte for byte (so `decode(encode(x)) == x`), validates, packs, and can
//! be peeked (remaining ≤ limit), described and judged at any instant: 0, `MAX_AT_MS`, its
//! own last update and reset instants, and one derived from the input. Mirrors `exercise` in
//! `ratelimit-core/src/testing/fuzz_tests.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelimit_core::algorithms::ban::Ban;
use ratelimit_core::algorithms::limiter::Limiter;
use ratelimit_core::grammar::args::MAX_AT_MS;
use ratelimit_core::steps::inspect::{describe_key, peek_key};
use ratelimit_core::steps::refund::refund_key;
use ratelimit_core::store::codec::{decode_value, encode_value};
use ratelimit_core::store::packed::PackedLimiter;

fuzz_target!(|data: &[u8]| {
    let Ok((limiter, ban)) = decode_value(data) else { return };
    assert_eq!(encode_value(&limiter, ban), data, "byte for byte");
    // FNV-1a of the input: an instant anywhere in 0..=MAX_AT_MS that the fuzzer can steer.
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let derived = i64::try_from(hash % (MAX_AT_MS as u64 + 1)).expect("below MAX_AT_MS");
    let around = |t: i64| t.clamp(0, MAX_AT_MS);
    for now in [
        0,
        MAX_AT_MS,
        derived,
        around(limiter.updated_ms()),
        around(limiter.reset_at_ms().saturating_sub(1)),
        around(limiter.reset_at_ms()),
    ] {
        exercise(&limiter, ban, now);
    }
});

fn exercise(limiter: &Limiter, ban: Option<Ban>, now: i64) {
    assert_eq!(limiter.validate(), Ok(()));
    assert_eq!(decode_value(&encode_value(limiter, ban)), Ok((limiter.clone(), ban)));
    let d = limiter.peek(now);
    assert!(d.remaining <= d.limit, "{d:?} at {now} for {limiter:?}");
    let _ = limiter.describe();
    let _ = limiter.reset_at_ms();
    let _ = limiter.heap_bytes();
    let mut packed = PackedLimiter::with_ban(limiter.clone(), ban);
    assert!(peek_key(Some(&packed), now).is_none_or(|r| r[2] <= r[1]));
    let _ = describe_key(Some(&packed), now);
    let _ = refund_key(Some(&mut packed), 1, now);
    packed.view(|l| assert_eq!(l.validate(), Ok(())));
}
