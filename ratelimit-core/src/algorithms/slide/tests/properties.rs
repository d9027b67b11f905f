//! Property tests of the sliding window against the brute-force models of the parent module:
//! exact mode equals the explicit event list, buckets stay within their bound, corrupt states
//! saturate, and the window read (`window_at`) matches the reference formulas.

use super::*;

proptest! {
    /// Exact mode equals the explicit event list, field for field; no window ever holds more
    /// than the limit; retry and reset are exact.
    #[test]
    fn exact_matches_reference(
        limit in prop_oneof![1u64..8, 8u64..40],
        window in 1u64..120,
        start in 0i64..1_000_000,
        ops in calls(60, 4, 50),
    ) {
        let p = exact(limit, window);
        let mut admitted = Vec::new();
        let calls = clocked(start, ops.into_iter().map(|op| (p, op.gap, op.cost)));
        check_against_model(&mut ExactModel::default(), calls, |d, m, c, got| {
            if got.allowed && c.cost > 0 {
                admitted.push((m.updated, c.cost));
            }
            retry_is_exact(d, c, got)?;
            if let Some(s) = &d.state {
                prop_assert!(s.entry_count() as u64 <= limit);
                prop_assert!(s.heap_bytes() <= 16 * s.entry_count() + STATE_BYTES);
                let at = s.reset_at_ms();
                prop_assert!(d.peek(&p, at, limit).allowed);
                prop_assert!(!d.peek(&p, at - 1, limit).allowed || at - 1 < s.updated_ms);
            }
            Ok(())
        })?;
        prop_assert!(max_in_window(&admitted, window as i64) <= limit);
    }

    /// Window and limit changes between calls (exact mode) equal the explicit event list: kept
    /// whole, judged against the new limit, shorter windows drop entries.
    #[test]
    fn exact_parameter_changes_match_reference(
        start in 0i64..1_000_000,
        ops in proptest::collection::vec((calls(80, 4, 2), 1u64..8, 1u64..150), 1..25),
    ) {
        let ops = ops.into_iter().flat_map(|(batch, limit, window)| {
            batch.into_iter().map(move |op| (exact(limit, window), op.gap, op.cost))
        });
        check_against_model(&mut ExactModel::default(), clocked(start, ops), |_, _, _, _| Ok(()))?;
    }

    /// Bucketed mode equals an independent per-event weighting with ms-by-ms scans, also
    /// under limit changes.
    #[test]
    fn buckets_match_reference(
        (b, w) in prop_oneof![(1u64..5, 1u64..30), (5u64..13, 1u64..8)],
        start in 0i64..1_000_000,
        ops in proptest::collection::vec((calls(70, 5, 4), 1u64..9), 1..12),
    ) {
        let window = b * w;
        let ops = ops.into_iter().flat_map(|(batch, limit)| {
            batch.into_iter().map(move |op| (bucketed(limit, window, b), op.gap, op.cost))
        });
        let mut m = BucketModel::new(window, b);
        check_against_model(&mut m, clocked(start, ops), |d, _, c, got| retry_is_exact(d, c, got))?;
    }

    /// With fixed parameters, `BUCKETS b` never admits more than `2·limit − ⌈limit·b/window⌉`
    /// in any interval of `window` ms, on the epoch's grid or an anchored one; under `FLOOR`
    /// at most `2·limit − ⌊limit·b/window⌋` (one permit more when `w` does not divide `limit`).
    #[test]
    fn buckets_over_admission_is_bounded(
        limit in 1u64..12,
        b in 1u64..6,
        w in 1u64..40,
        anchor in any::<bool>(),
        floor in any::<bool>(),
        start in 0i64..1_000_000,
        ops in calls(50, 6, 80),
    ) {
        let window = b * w;
        let p = with(limit, window, b, anchor, floor);
        let bound = if floor { 2 * limit - limit * b / window } else { bucket_bound(limit, window, b) };
        let mut d = Sim::new();
        let mut now = start;
        let mut admitted = Vec::new();
        for op in ops {
            now = (now + op.gap.abs()).max(0);
            if d.call(&p, now, op.cost).allowed && op.cost > 0 {
                admitted.push((now, op.cost));
            }
        }
        prop_assert!(max_in_window(&admitted, window as i64) <= bound);
    }

    /// The constructed worst case reaches the bound for any parameters.
    #[test]
    fn buckets_bound_is_tight(limit in 1u64..MAX_COUNT, b in 1u64..=1000, w in 2u64..1_000_000, m in 0i64..1_000_000) {
        let window = b * w;
        prop_assume!(window <= MAX_DURATION_MS);
        let p = bucketed(limit, window, b);
        let w = w as i64;
        let first = (m + 1) * w - 1;
        let second = (m + b as i64 + 1) * w - 2;
        let extra = limit - limit.div_ceil(w as u64);
        let e = evaluate(None, &p, first, limit);
        prop_assert!(e.decision.allowed);
        let s = e.next.unwrap();
        let e2 = evaluate(Some(&s), &p, second, extra);
        prop_assert!(e2.decision.allowed);
        prop_assert!(!evaluate(Some(&s), &p, second, extra + 1).decision.allowed);
        prop_assert_eq!(limit + extra, bucket_bound(limit, window, b));
    }

    /// Any switch of mode, `b`, window or limit: never more permits at the conversion instant
    /// than the stored state had under its own parameters; stored states stay valid; after the
    /// first admission under new parameters, calls match a reference model of what is stored.
    #[test]
    fn mode_changes_are_conservative(
        start in 0i64..1_000_000,
        segments in proptest::collection::vec(
            (0usize..10, 1u64..10, calls(90, 5, 8)), 1..10),
    ) {
        // (window, BUCKETS, ANCHOR, FLOOR)
        let shapes: [(u64, Option<u64>, bool, bool); 10] = [
            (60, None, false, false),
            (120, None, false, false),
            (60, Some(1), false, false),
            (60, Some(4), false, false),
            (120, Some(3), false, false),
            (120, Some(120), false, false),
            (60, Some(1), true, false),
            (60, Some(4), true, true),
            (120, Some(3), false, true),
            (120, Some(4), true, false),
        ];
        let mut d = Sim::new();
        let mut model: Option<Model> = None;
        let mut model_shape = usize::MAX;
        let mut now = start;
        for (shape, limit, batch) in segments {
            let (window, b, anchor, floor) = shapes[shape];
            let p = SlideParams::new(limit, window, b, MAX_COUNT).unwrap().with_options(anchor, floor).unwrap();
            if shape != model_shape {
                model = None;
            }
            model_shape = shape;
            for op in batch {
                now = (now + op.gap).max(0);
                let stored = live(d.state.as_ref(), now).cloned();
                if let Some(s) = stored.as_ref().filter(|s| !s.same_shape(&p)) {
                    model = None;
                    let t = now.max(s.updated_ms);
                    // A shorter window drops what falls outside it (module docs, parameter changes): the baseline is
                    // the stored state judged under the shorter window where that is defined.
                    let (used_old, scale) = match Model::of(s) {
                        Model::Exact(m) => (count_in(&m.events, m.window.min(window as i64), t) as u128, 1),
                        Model::Buckets(_) if window < s.window_ms => (0, 1),
                        Model::Buckets(_) => reference_used(s, t),
                    };
                    let remaining_new = d.peek(&p, now, 0).remaining as u128;
                    // Under FLOOR the new limiter compares whole permits: `limit − ⌊used⌋`.
                    let slack = if floor { scale - 1 } else { 0 };
                    let bound = (u128::from(limit) * scale + slack).saturating_sub(used_old) / scale;
                    prop_assert!(remaining_new <= bound, "{} > {}", remaining_new, bound);
                }
                let expected = model.as_mut().map(|m| m.decide(&p, now, op.cost));
                let got = d.call(&p, now, op.cost);
                if let Some(expected) = expected {
                    prop_assert_eq!(got, expected);
                }
                if model.is_none() && got.allowed && op.cost > 0 {
                    model = Some(Model::of(d.state.as_ref().unwrap()));
                }
                if let Some(s) = &d.state {
                    if s.mode == SlideMode::Exact {
                        prop_assert!(s.stored_total() <= s.limit);
                    }
                }
            }
        }
    }

    /// Conversions keep what they carry in the window at least as long, at any later instant
    /// up to the new window: exact → buckets counts every carried entry while it would count.
    #[test]
    fn exact_to_buckets_counts_at_least_the_log(
        limit in 1u64..20,
        b in 1u64..6,
        w in 1u64..30,
        start in 0i64..1_000_000,
        ops in calls(40, 3, 30),
        probe in 0i64..200,
    ) {
        let window = b * w;
        let e = exact(limit, window);
        let mut d = Sim::new();
        d.call(&e, start, 1);
        let mut now = start;
        for op in ops {
            now = (now + op.gap.abs()).max(0);
            d.call(&e, now, op.cost);
        }
        prop_assume!(d.state.is_some());
        let s = d.state.clone().unwrap();
        let t = now.max(s.updated_ms);
        let Some(conv) = convert(&s, &bucketed(limit, window, b), t) else {
            prop_assert!(live(Some(&s), t).is_none());
            return Ok(());
        };
        let at = t + probe % (window as i64);
        let Model::Buckets(bm) = Model::of(&conv) else { unreachable!() };
        let entries: Vec<_> = s.entries().collect();
        // Entries that still count at `at` (exact) vs the converted estimate at `at`, while the
        // current sub-window is still counted in full.
        if at < (t / w as i64 + b as i64) * w as i64 {
            let exact_used = count_in(&entries, window as i64, at) as u128 * bm.w as u128;
            prop_assert!(bm.used_w(&bm.events, at) >= exact_used);
        }
        let exact_now = count_in(&entries, window as i64, t) as u128 * bm.w as u128;
        prop_assert_eq!(bm.used_w(&bm.events, t), exact_now);
    }

    /// Arbitrary (corrupt) states: validate, evaluate and the iterators never panic.
    #[test]
    fn corrupt_states_never_panic(
        limit in prop_oneof![Just(0u64), 1u64..20, Just(u64::MAX)],
        window in prop_oneof![Just(0u64), 1u64..200, Just(u64::MAX), Just(MAX_DURATION_MS)],
        buckets in prop_oneof![4 => Just(0u16), 4 => 1u16..8, 1 => Just(u16::MAX)],
        updated in prop_oneof![Just(i64::MIN), -5i64..1000, Just(i64::MAX)],
        word in prop_oneof![Just(0u64), 1u64..30, Just(u64::MAX)],
        heap in proptest::collection::vec(any::<u8>(), 0..80),
        header in any::<bool>(),
        now in 0i64..2000,
        cost in 0u64..30,
    ) {
        let mut heap = heap;
        if header && heap.len() >= HEADER {
            let len = heap.len();
            write_header(&mut heap, &Header { oldest_ms: updated.saturating_sub(3), used: 5, head: HEADER, end: len });
        }
        let mut s = SlideState { limit, window_ms: window, mode: SlideMode::from_buckets(buckets), updated_ms: updated, buffer: SlideBuffer { word, heap: heap.into_boxed_slice() } };
        let _ = s.validate();
        let _ = s.entries().take(1000).count();
        let _ = s.counters().take(1000).count();
        let _ = s.reset_at_ms();
        let _ = s.stored_total();
        for p in [exact(5, 100), bucketed(5, 100, 4), bucketed(5, 60, 3)] {
            let e = evaluate(Some(&s), &p, now, cost);
            if let Some(n) = e.next {
                let _ = n.validate();
            }
            let _ = evaluate_in_place(&mut s.clone(), &p, now, cost, true);
        }
        let own = s.params();
        let _ = evaluate_in_place(&mut s, &own, now, cost, true);
    }
}

#[test]
fn extreme_corrupt_states_saturate() {
    let huge = [u64::MAX.to_le_bytes(), u64::MAX.to_le_bytes()].concat();
    for window in [u64::MAX, i64::MAX as u64, MAX_DURATION_MS] {
        for updated in [i64::MIN, -1, 0, T0, i64::MAX] {
            let mut s = SlideState {
                limit: u64::MAX,
                window_ms: window,
                mode: SlideMode::from_buckets(1),
                updated_ms: updated,
                buffer: SlideBuffer { word: u64::MAX, heap: huge.clone().into_boxed_slice() },
            };
            let _ = s.validate();
            let _ = s.reset_at_ms();
            for p in [
                exact(MAX_COUNT, MAX_DURATION_MS),
                bucketed(MAX_COUNT, MAX_DURATION_MS, 1),
                bucketed(1, 1, 1),
            ] {
                for now in [0, T0, crate::grammar::args::MAX_AT_MS] {
                    for cost in [0, 1, MAX_COUNT] {
                        let _ = evaluate(Some(&s), &p, now, cost);
                        let _ = evaluate_in_place(&mut s.clone(), &s.params(), now, cost, true);
                    }
                }
            }
            s.mode = SlideMode::Exact;
            let mut heap = huge.clone();
            heap.extend_from_slice(&[0xff; 16]);
            let len = heap.len();
            write_header(
                &mut heap,
                &Header { oldest_ms: i64::MIN, used: u64::MAX, head: HEADER, end: len },
            );
            s.buffer.heap = heap.into_boxed_slice();
            let _ = s.validate();
            let _ = s.entries().count();
            for now in [0, T0, crate::grammar::args::MAX_AT_MS] {
                let _ = evaluate(Some(&s), &exact(MAX_COUNT, MAX_DURATION_MS), now, 1);
                let own = s.params();
                let _ = evaluate_in_place(&mut s.clone(), &own, now, 1, true);
            }
        }
    }
}

/// The window at `t` by the reference formulas: `(used rounded down, oldest, buckets)` as
/// [`WindowAt`] reports them.
fn reference_window(s: &SlideState, t: i64) -> WindowAt {
    match Model::of(s) {
        Model::Exact(m) => {
            let inside: Vec<_> = m.events.iter().filter(|(ts, _)| *ts > t - m.window).collect();
            WindowAt {
                used: count_in(&m.events, m.window, t),
                oldest_ms: inside.first().map(|e| e.0),
                buckets: None,
            }
        }
        Model::Buckets(m) => {
            let o = m.origin;
            let i = m.index(o, t);
            let r = (t - m.first_ms(o, i)).clamp(0, m.w - 1);
            let counts: Vec<u64> = (i - m.b..=i)
                .map(|j| m.events.iter().filter(|(ts, _)| m.index(o, *ts) == j).map(|e| e.1).sum())
                .collect();
            // The documented start: the first ms, or on an anchored grid the instant before it.
            let start = |j: i64| m.first_ms(o, j) - i64::from(m.anchor);
            let oldest = (i - m.b..=i)
                .zip(&counts)
                .find(|(j, c)| **c > 0 && (*j > i - m.b || m.w - r - 1 > 0))
                .map(|(j, _)| start(j));
            let used = (m.used_w(&m.events, t) / m.w as u128) as u64;
            WindowAt { used, oldest_ms: oldest, buckets: Some((counts, start(i - m.b))) }
        }
    }
}

proptest! {
    /// `RL.INFO`'s now-dependent window fields equal the reference formulas at any instant
    /// after random traffic, for the exact log and for counters; a limiter that counts for
    /// nothing shows an empty window.
    #[test]
    fn window_at_matches_the_reference(
        shape in 0usize..8,
        limit in 1u64..12,
        start in 0i64..1_000_000,
        ops in calls(60, 4, 30),
        probe in -50i64..400,
    ) {
        let shapes: [(u64, Option<u64>, bool, bool); 8] = [
            (100, None, false, false),
            (100, Some(1), false, false),
            (100, Some(4), false, false),
            (120, Some(3), false, false),
            (7, Some(7), false, false),
            (100, Some(1), true, true),
            (120, Some(4), true, false),
            (60, Some(3), false, true),
        ];
        let (window, b, anchor, floor) = shapes[shape];
        let p = SlideParams::new(limit, window, b, MAX_COUNT).unwrap().with_options(anchor, floor).unwrap();
        let mut d = Sim::new();
        let mut now = start;
        for op in ops {
            now = (now + op.gap).max(0);
            d.call(&p, now, op.cost);
        }
        let Some(s) = d.state.clone() else { return Ok(()) };
        let at = (now + probe).max(0);
        let t = at.max(s.updated_ms);
        let got = s.window_at(at, true);
        prop_assert_eq!(&got, &reference_window(&s, t));
        // `window_used` is `used(t)` rounded down; `remaining` is `limit − used(t)` rounded
        // down (so up to one less when `used(t)` has a fraction), or under `FLOOR` exactly
        // `limit − window_used`.
        let remaining = d.peek(&p, at, 0).remaining;
        let floor_left = limit.saturating_sub(got.used);
        if floor {
            prop_assert_eq!(remaining, floor_left);
        } else {
            prop_assert!(remaining <= floor_left && floor_left <= remaining + 1);
        }
        let empty = s.window_at(at, false);
        prop_assert_eq!(empty.used, 0);
        prop_assert_eq!(empty.oldest_ms, None);
        if let Some((counts, start_ms)) = &empty.buckets {
            prop_assert!(counts.iter().all(|c| *c == 0));
            prop_assert_eq!(Some(start_ms), got.buckets.as_ref().map(|b| &b.1));
        }
    }
}

#[test]
fn window_at_of_a_long_log_reads_only_what_left() {
    // 100 000 entries: the fields come from the header and the entries that left.
    let p = exact(100_000, 200_000);
    let mut state: Option<SlideState> = None;
    for k in 0..100_000i64 {
        match state.as_mut() {
            Some(s) => assert!(evaluate_in_place(s, &p, T0 + 2 * k, 1, true).unwrap().0.allowed),
            None => state = evaluate(None, &p, T0, 1).next,
        }
    }
    let s = state.unwrap();
    assert_eq!(s.stored_total(), 100_000);
    let w = s.window_at(T0 + 200_000 + 10, true);
    // Entries at T0, T0+2, …, T0+10 have left: 6 of them.
    assert_eq!(w, WindowAt { used: 99_994, oldest_ms: Some(T0 + 12), buckets: None });
    assert_eq!(
        s.window_at(T0 + 2 * 99_999 + 200_000, true),
        WindowAt { used: 0, oldest_ms: None, buckets: None }
    );
    let b = bucketed(10, 1000, 1);
    let mut d = Sim::new();
    let base = T0 - T0 % 1000;
    d.call(&b, base + 900, 8);
    d.call(&b, base + 1250, 2);
    let s = d.state.unwrap();
    // At base+1250: [8, 2] from base; 8·749/1000 + 2 = 7.992 → 7.
    assert_eq!(
        s.window_at(base + 1250, true),
        WindowAt { used: 7, oldest_ms: Some(base), buckets: Some((vec![8, 2], base)) }
    );
    // At base+1999 the previous window's weight is 0: its count shows, it no longer counts.
    assert_eq!(
        s.window_at(base + 1999, true),
        WindowAt { used: 2, oldest_ms: Some(base + 1000), buckets: Some((vec![8, 2], base)) }
    );
    assert_eq!(
        s.window_at(base + 2100, true),
        WindowAt {
            used: 1,
            oldest_ms: Some(base + 1000),
            buckets: Some((vec![2, 0], base + 1000))
        }
    );
}
