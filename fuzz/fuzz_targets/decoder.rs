//! The state decoder (RDB load, `RESTORE`, `RL.RESTORE`): the input bytes are one encoded
//! limiter. Properties: nothing panics; whatever decodes re-encodes byte for byte (so
//! `decode(encode(x)) == x`), validates, and can be peeked (remaining ≤ limit) and described
//! at any instant: 0, `MAX_AT_MS`, its own last update and reset instants, and one derived
//! from the input. Mirrors `exercise` in `ratelimit-core/src/fuzz_tests.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelimit_core::args::MAX_AT_MS;
use ratelimit_core::codec::{decode, encode};
use ratelimit_core::limiter::Limiter;

fuzz_target!(|data: &[u8]| {
    let Ok(limiter) = decode(data) else { return };
    assert_eq!(encode(&limiter), data, "byte for byte");
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
        exercise(&limiter, now);
    }
});

fn exercise(limiter: &Limiter, now: i64) {
    assert_eq!(limiter.validate(), Ok(()));
    assert_eq!(decode(&encode(limiter)).as_ref(), Ok(limiter));
    let d = limiter.peek(now);
    assert!(d.remaining <= d.limit, "{d:?} at {now} for {limiter:?}");
    let _ = limiter.describe();
    let _ = limiter.reset_at_ms();
    let _ = limiter.heap_bytes();
}
