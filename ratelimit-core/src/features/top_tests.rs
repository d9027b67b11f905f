//! `top.rs`: the Space-Saving summary against exact counts, windows, caps, tags.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::grammar::top::MAX_ROWS;

const W: i64 = 60_000;
/// An instant at the start of a window.
const T0: i64 = 1_800_000_000_000 / W * W;

/// Every counter is found through the table and the table points only at live counters; the
/// buckets from `least` have strictly increasing counts, each lists exactly the counters of its
/// count, linked both ways; the counts add up to the refusals counted.
fn check_invariants(s: &Summary) {
    let taken = s.table.iter().filter(|&&slot| slot != NONE).count();
    assert_eq!(taken, s.counters.len());
    for (index, c) in s.counters.iter().enumerate() {
        assert_eq!(s.find(c.hash, c.tag(), c.key()), (c.slot as usize, Some(index)));
        assert_eq!(s.buckets[c.bucket as usize].count, c.count);
    }
    let (mut b, mut prev_bucket, mut seen, mut last_count) = (s.least, NONE, 0, 0);
    while b != NONE {
        let bucket = s.buckets[b as usize];
        assert_eq!(bucket.prev, prev_bucket);
        assert!(bucket.count > last_count, "bucket counts increase");
        let (mut c, mut prev) = (bucket.first, NONE);
        assert_ne!(c, NONE, "no empty bucket is linked");
        while c != NONE {
            let counter = &s.counters[c as usize];
            assert_eq!((counter.bucket, counter.prev), (b, prev));
            seen += 1;
            prev = c;
            c = counter.next;
        }
        assert_eq!(bucket.last, prev);
        last_count = bucket.count;
        prev_bucket = b;
        b = bucket.next;
    }
    assert_eq!(seen, s.counters.len());
    assert_eq!(s.counters.iter().map(|c| c.count).sum::<u64>(), s.total);
}

fn key(n: u32) -> Vec<u8> {
    format!("k:{n}").into_bytes()
}

/// A skewed stream: Zipf-like heavy keys (`1000 / (x + 1)`) mixed with a uniform tail.
fn skewed_key() -> impl Strategy<Value = u32> {
    prop_oneof![3 => (0u32..1000).prop_map(|x| 1000 / (x + 1)), 1 => 1000u32..1400]
}

fn exact(stream: &[u32]) -> HashMap<Vec<u8>, u64> {
    let mut counts = HashMap::new();
    for n in stream {
        *counts.entry(key(*n)).or_insert(0) += 1;
    }
    counts
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// One window: every key refused more than N/k times is reported; every reported count
    /// overestimates by at most E ≤ N/k; every unreported key was refused at most E times.
    #[test]
    fn one_window_meets_the_space_saving_bounds(
        stream in proptest::collection::vec(skewed_key(), 1..1500),
        k in 1usize..40,
    ) {
        let mut top = TopKeys::new(k, W);
        for (i, n) in stream.iter().enumerate() {
            top.record(b"", &key(*n), T0 + i as i64);
        }
        check_invariants(&top.current);
        let n = stream.len() as u64;
        let stats = top.stats(T0 + W - 1);
        prop_assert_eq!(stats.refusals, n);
        prop_assert!(stats.error_bound <= n / k as u64);
        prop_assert!(stats.tracked <= k as u64);
        let rows = top.top(T0 + W - 1, usize::MAX, None);
        let reported: HashMap<Vec<u8>, u64> =
            rows.iter().map(|r| (r.key.clone(), r.refused)).collect();
        for (key, f) in exact(&stream) {
            match reported.get(&key) {
                Some(&c) => prop_assert!(f <= c && c <= f + stats.error_bound, "{f} vs {c}"),
                None => {
                    prop_assert!(f <= stats.error_bound);
                    prop_assert!(f * k as u64 <= n, "a heavy hitter is missing");
                }
            }
        }
        for pair in rows.windows(2) {
            prop_assert!(row_order(&pair[0], &pair[1]) != std::cmp::Ordering::Greater);
        }
    }

    /// Two windows read together: every key refused more than N/k times in both is reported,
    /// and every reported count is within E_prev + E_cur (≤ N/k) of the exact count.
    #[test]
    fn two_windows_meet_the_combined_bounds(
        first in proptest::collection::vec(skewed_key(), 0..800),
        second in proptest::collection::vec(skewed_key(), 0..800),
        k in 1usize..30,
    ) {
        let mut top = TopKeys::new(k, W);
        for n in &first {
            top.record(b"", &key(*n), T0 + 5);
        }
        for n in &second {
            top.record(b"", &key(*n), T0 + W + 5);
        }
        check_invariants(&top.current);
        check_invariants(&top.previous);
        let both: Vec<u32> = first.iter().chain(&second).copied().collect();
        let n = both.len() as u64;
        let stats = top.stats(T0 + W + 10);
        prop_assert_eq!(stats.refusals, n);
        prop_assert!(stats.error_bound <= n / k as u64);
        let reported: HashMap<Vec<u8>, u64> = top
            .top(T0 + W + 10, usize::MAX, None)
            .into_iter()
            .map(|r| (r.key, r.refused))
            .collect();
        for (key, f) in exact(&both) {
            match reported.get(&key) {
                Some(&c) => prop_assert!(
                    c + stats.error_bound >= f && c <= f + stats.error_bound,
                    "{f} vs {c} (E {})", stats.error_bound
                ),
                None => prop_assert!(f * k as u64 <= n, "a heavy hitter is missing"),
            }
        }
    }

    /// The table and heap stay consistent through any mix of hits and take-overs.
    #[test]
    fn structure_stays_consistent(
        stream in proptest::collection::vec(0u32..64, 1..600),
        k in 1usize..20,
    ) {
        let mut top = TopKeys::new(k, W);
        for (i, n) in stream.iter().enumerate() {
            top.record(b"", &key(*n), T0 + i as i64);
            if i % 37 == 0 {
                check_invariants(&top.current);
            }
        }
        check_invariants(&top.current);
    }
}

#[test]
fn exact_while_the_counters_suffice() {
    let mut top = TopKeys::new(8, W);
    for (n, times) in [(1, 5), (2, 3), (3, 7)] {
        for _ in 0..times {
            top.record(b"", &key(n), T0 + n as i64);
        }
    }
    let rows = top.top(T0 + 100, 10, None);
    let got: Vec<(Vec<u8>, u64, i64)> =
        rows.into_iter().map(|r| (r.key, r.refused, r.last_refused_ms)).collect();
    assert_eq!(got, vec![(key(3), 7, T0 + 3), (key(1), 5, T0 + 1), (key(2), 3, T0 + 2)],);
    assert_eq!(top.stats(T0 + 100), TopStats { refusals: 15, tracked: 3, error_bound: 0 });
    assert_eq!(top.top(T0 + 100, 2, None).len(), 2);
    assert!(top.top(T0 + 100, 0, None).is_empty());
}

#[test]
fn windows_rotate_and_expire() {
    let mut top = TopKeys::new(8, W);
    top.record(b"", b"a", T0 + 10);
    top.record(b"", b"a", T0 + 20);
    // The next window still shows the previous one.
    top.record(b"", b"b", T0 + W);
    let rows = top.top(T0 + W + 1, 10, None);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].key.as_slice(), rows[0].refused), (b"a".as_slice(), 2));
    // Read one window later: only the window that is now the previous one.
    let rows = top.top(T0 + 2 * W, 10, None);
    assert_eq!(rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>(), vec![b"b".to_vec()]);
    // Two windows later: nothing.
    assert!(top.top(T0 + 3 * W, 10, None).is_empty());
    assert_eq!(top.stats(T0 + 3 * W), TopStats::default());
    // A refusal after a gap of two windows starts over.
    top.record(b"", b"c", T0 + 3 * W);
    let rows = top.top(T0 + 3 * W, 10, None);
    assert_eq!(rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>(), vec![b"c".to_vec()]);
}

#[test]
fn a_clock_stepping_back_counts_in_the_current_window() {
    let mut top = TopKeys::new(8, W);
    top.record(b"", b"a", T0 + W + 5);
    top.record(b"", b"a", T0 + 5);
    let rows = top.top(T0 + W + 6, 10, None);
    assert_eq!((rows[0].refused, rows[0].last_refused_ms), (2, T0 + W + 5));
    // Read before the current window: both windows.
    assert_eq!(top.top(T0, 10, None)[0].refused, 2);
}

#[test]
fn keys_are_binary_and_capped() {
    let mut top = TopKeys::new(8, W);
    let binary = [0u8, 0xff, b'\n', 0x80, 0];
    top.record(b"", &binary, T0);
    let long_a = [b'x'; KEY_CAP + 10];
    let mut long_b = long_a;
    long_b[KEY_CAP + 5] = b'y';
    top.record(b"", &long_a, T0);
    top.record(b"", &long_b, T0);
    top.record(b"", b"", T0);
    let rows = top.top(T0, 10, None);
    assert_eq!(rows[0].key, vec![b'x'; KEY_CAP]);
    assert_eq!(rows[0].refused, 2);
    assert!(rows.iter().any(|r| r.key == binary));
    assert!(rows.iter().any(|r| r.key.is_empty()));
}

#[test]
fn policies_filter_and_add_up() {
    let mut top = TopKeys::new(8, W);
    top.record(b"api", b"u1", T0);
    top.record(b"api", b"u1", T0 + 1);
    top.record(b"login", b"u1", T0 + 2);
    top.record(b"", b"u2", T0 + 3);
    top.record(b"login", b"u3", T0 + 4);
    let summary = |policy: Option<&[u8]>| -> Vec<(Vec<u8>, u64)> {
        top.top(T0 + 10, 10, policy).into_iter().map(|r| (r.key, r.refused)).collect()
    };
    assert_eq!(summary(Some(b"api")), vec![(b"u1".to_vec(), 2)]);
    assert_eq!(summary(Some(b"login")), vec![(b"u3".to_vec(), 1), (b"u1".to_vec(), 1)]);
    assert!(summary(Some(b"none")).is_empty());
    assert_eq!(summary(None), vec![(b"u1".to_vec(), 3), (b"u3".to_vec(), 1), (b"u2".to_vec(), 1)],);
    // A long policy name is kept to its first TAG_CAP bytes, for recording and filtering.
    let long = [b'p'; TAG_CAP + 3];
    top.record(&long, b"u4", T0);
    assert_eq!(top.top(T0, 10, Some(&long)).len(), 1);
}

#[test]
fn reset_forgets_and_settings_are_clamped() {
    let mut top = TopKeys::new(0, 0);
    assert!(top.has_settings(1, 1));
    assert!(!top.has_settings(2, 1));
    top.record(b"", b"a", T0);
    top.record(b"", b"b", T0);
    assert_eq!(top.top(T0, 10, None).len(), 1);
    top.reset();
    assert!(top.top(T0, 10, None).is_empty());
    top.record(b"", b"c", T0);
    assert_eq!(top.top(T0, 10, None)[0].key, b"c".to_vec());
    assert!(TopKeys::new(MAX_K + 1, W).has_settings(MAX_K, W));
}

#[test]
fn a_take_over_inherits_the_least_count() {
    let mut top = TopKeys::new(2, W);
    for _ in 0..3 {
        top.record(b"", b"a", T0);
    }
    top.record(b"", b"b", T0 + 1);
    top.record(b"", b"c", T0 + 2);
    // "c" took over "b" (count 1): 2, error 1.
    let rows = top.top(T0 + 3, 10, None);
    let got: Vec<(Vec<u8>, u64)> = rows.into_iter().map(|r| (r.key, r.refused)).collect();
    assert_eq!(got, vec![(b"a".to_vec(), 3), (b"c".to_vec(), 2)]);
    assert_eq!(top.stats(T0 + 3).error_bound, 1);
}

#[test]
fn count_reaches_what_two_windows_hold() {
    assert_eq!(MAX_ROWS, 2 * MAX_K as u64);
}

#[test]
fn shadow_and_candidate_refusals_are_read_under_their_policy_only() {
    let mut top = TopKeys::new(16, 60_000);
    top.record(b"free", b"a", 1);
    top.record(&shadow_tag(b"free"), b"b", 1);
    top.record(&candidate_tag(b"free"), b"c", 1);
    top.record(&candidate_tag(b"free"), b"c", 2);
    let keys = |rows: Vec<TopEntry>| rows.into_iter().map(|r| r.key).collect::<Vec<_>>();
    assert_eq!(keys(top.top(3, 10, None)), [b"a".to_vec()], "every key: real refusals only");
    assert_eq!(keys(top.top(3, 10, Some(b"free"))), [b"a".to_vec(), b"b".to_vec()]);
    let candidate = selector(&TopPolicy { name: b"free", candidate: true });
    assert_eq!(keys(top.top(3, 10, Some(&candidate))), [b"c".to_vec()]);
    let policy = selector(&TopPolicy { name: b"free", candidate: false });
    assert_eq!(keys(top.top(3, 10, Some(&policy))), [b"a".to_vec(), b"b".to_vec()]);
    let long = [b'x'; 64];
    top.record(&shadow_tag(&long), b"d", 3);
    assert_eq!(keys(top.top(3, 10, Some(&long))), [b"d".to_vec()], "a 64-byte name's shadow tag");
}
