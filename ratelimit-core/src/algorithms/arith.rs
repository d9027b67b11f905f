//! Exact integer arithmetic helpers shared by the algorithms.
//!
//! Every quantity a user can give is at most 10^12 and every time at most ~2.5·10^14 ms, so
//! products of two or three of them fit in `u128` (≈3.4·10^38) without overflow.

/// `⌈a / b⌉` for `b > 0`; `b == 0` yields `u128::MAX` instead of panicking.
#[inline]
pub fn ceil_div(a: u128, b: u128) -> u128 {
    if b == 0 {
        return u128::MAX;
    }
    let (quotient, remainder) = div_rem(a, b);
    quotient + u128::from(remainder != 0)
}

/// `⌊a / b⌋` for `b > 0`; `b == 0` yields `u128::MAX` instead of panicking.
#[inline]
pub fn floor_div(a: u128, b: u128) -> u128 {
    if b == 0 {
        return u128::MAX;
    }
    div_rem(a, b).0
}

/// Quotient and remainder (`b > 0`; `b == 0` counts as 1), in one 64-bit division when both
/// fit (the common case: a 128-bit division is a library call several times as long).
#[inline]
pub fn div_rem(a: u128, b: u128) -> (u128, u128) {
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) if b != 0 => (u128::from(a / b), u128::from(a % b)),
        _ => (a / b.max(1), a % b.max(1)),
    }
}

/// Milliseconds elapsed from `earlier` to `later`, 0 if `later` is not after `earlier`.
pub fn elapsed_ms(earlier: i64, later: i64) -> u128 {
    u128::try_from(i128::from(later) - i128::from(earlier)).unwrap_or(0)
}

/// Narrows an exact value to `u64`, saturating.
pub fn saturate_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `t + d` for an instant `t` and a non-negative duration `d`, saturating at `i64::MAX`.
pub fn add_ms(t: i64, d: u128) -> i64 {
    i64::try_from(i128::from(t).saturating_add(i128::try_from(d).unwrap_or(i128::MAX)))
        .unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_and_floor_division() {
        assert_eq!(ceil_div(0, 7), 0);
        assert_eq!(ceil_div(7, 7), 1);
        assert_eq!(ceil_div(8, 7), 2);
        assert_eq!(floor_div(13, 7), 1);
        assert_eq!(ceil_div(1, 0), u128::MAX);
        assert_eq!(floor_div(1, 0), u128::MAX);
    }

    #[test]
    fn divisions_agree_with_128_bit_ones() {
        let values =
            [0u128, 1, 2, 7, 1 << 32, u128::from(u64::MAX), 1 << 64, (1 << 64) + 3, u128::MAX];
        for a in values {
            for b in values.into_iter().filter(|b| *b != 0) {
                assert_eq!(floor_div(a, b), a / b, "{a} / {b}");
                assert_eq!(ceil_div(a, b), a / b + u128::from(a % b != 0), "{a} / {b}");
            }
        }
    }

    #[test]
    fn elapsed_never_negative() {
        assert_eq!(elapsed_ms(10, 5), 0);
        assert_eq!(elapsed_ms(5, 10), 5);
        assert_eq!(elapsed_ms(i64::MIN, i64::MAX), u128::from(u64::MAX));
    }

    #[test]
    fn add_saturates() {
        assert_eq!(add_ms(5, 10), 15);
        assert_eq!(add_ms(i64::MAX - 1, 10), i64::MAX);
        assert_eq!(add_ms(0, u128::MAX), i64::MAX);
    }
}
