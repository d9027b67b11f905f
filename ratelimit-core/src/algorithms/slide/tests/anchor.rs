//! The sliding window's `ANCHOR` and `FLOOR` options: a bucket grid anchored at the first
//! hit, and a floor that admits what the limit admits at the grid's boundaries (unit and
//! property tests; the shared models and helpers are the parent module's).

use super::*;

/// limits' `RedisStorage` sliding window counter, as its two Lua scripts run on Redis, at
/// integer ms: a current and a previous counter key, each `(count, expires_at)`, alive while
/// its PTTL is above 0. An acquisition of `amount` at `t`:
/// `amount > limit` → refused; if the current key is alive with a PTTL below `P`, it is renamed
/// to the previous key and a current key `0` is set to expire `P` after it (the shift); then
/// admitted iff `⌊prev·prev_pttl/P⌋ + cur + amount ≤ limit`, adding `amount` to the current
/// key (created with `PX 2P` when missing).
///
/// `writes_on_refusal`: the scripts shift even for an acquisition they refuse (and on every
/// read); the module changes nothing on a refused request. Without it, this is the same
/// algorithm with refusals (and reads) leaving the keys as they were.
#[derive(Debug, Clone, Default)]
struct LimitsModel {
    p: i64,
    current: Option<(u64, i64)>,
    previous: Option<(u64, i64)>,
    writes_on_refusal: bool,
}

type Counter = Option<(u64, i64)>;

impl LimitsModel {
    /// The keys as the scripts see them at `t`, after the shift (not stored).
    fn shifted(&self, t: i64) -> (Counter, Counter) {
        let alive = |k: Counter| k.filter(|&(_, expires)| expires > t);
        let (current, previous) = (alive(self.current), alive(self.previous));
        match current {
            Some((count, expires)) if expires - t < self.p => {
                (Some((0, expires + self.p)), Some((count, expires)))
            }
            _ => (current, previous),
        }
    }

    fn acquire(&mut self, t: i64, limit: u64, amount: u64) -> bool {
        if amount > limit {
            return false;
        }
        let (current, previous) = self.shifted(t);
        let weighted = previous
            .map_or(0, |(c, e)| (c as i128 * (e - t) as i128 / self.p as i128) as u64)
            + current.map_or(0, |(c, _)| c);
        if weighted + amount > limit {
            if self.writes_on_refusal {
                (self.current, self.previous) = (current, previous);
            }
            return false;
        }
        self.previous = previous;
        self.current = Some(match current {
            Some((c, e)) => (c + amount, e),
            None => (amount, t + 2 * self.p),
        });
        true
    }
}

proptest! {
    /// `BUCKETS b` with `ANCHOR` and/or `FLOOR` equals the brute-force model (an anchored grid
    /// from the first admitted call of a fresh limiter, `⌊used⌋` compared), field for field,
    /// also under limit changes and `FLOOR` switched on and off; retry is exact.
    #[test]
    fn anchor_and_floor_match_reference(
        (b, w) in prop_oneof![(1u64..5, 1u64..30), (5u64..13, 1u64..8)],
        anchor in any::<bool>(),
        start in 0i64..1_000_000,
        ops in proptest::collection::vec((calls(70, 5, 4), 1u64..9, any::<bool>()), 1..12),
    ) {
        let window = b * w;
        let ops = ops.into_iter().flat_map(|(batch, limit, floor)| {
            batch.into_iter().map(move |op| (with(limit, window, b, anchor, floor), op.gap, op.cost))
        });
        let mut m = if anchor { BucketModel::anchored(window, b) } else { BucketModel::new(window, b) };
        check_against_model(&mut m, clocked(start, ops), |d, _, c, got| retry_is_exact(d, c, got))?;
    }

    /// `BUCKETS 1 ANCHOR FLOOR` is limits' sliding window counter: every acquisition is
    /// admitted exactly when limits' scripts admit it, and the counters `RL.INFO` shows
    /// (`window_counts` = `[previous, current]`, `window_start_ms`) are limits' keys after its
    /// shift, their PTTLs `window_start_ms + 2P − now` and `+ 3P − now`. Checked against the
    /// scripts without their writes on refusals (the module changes nothing on a refused
    /// request), and against the scripts as they are until those writes first matter: a
    /// refused acquisition shifted a window that then admitted nothing, keeping limits' grid
    /// alive where the module's limiter has reset (so the next hit starts a new grid).
    #[test]
    fn anchor_floor_is_limits_sliding_window_counter(
        limit in 1u64..10,
        p in 1i64..40,
        start in 0i64..1_000_000,
        ops in proptest::collection::vec((0i64..100, 1u64..12), 1..60),
    ) {
        let params = with(limit, p as u64, 1, true, true);
        let mut module = Sim::new();
        let mut limits = LimitsModel { p, ..LimitsModel::default() };
        let mut scripts = LimitsModel { writes_on_refusal: true, ..limits.clone() };
        let mut in_step = true;
        let mut now = start;
        for (gap, amount) in ops {
            // Gaps of 0 … 2.5 windows, often at the ms a window ends or starts.
            now += gap * p / 40 + if gap % 7 == 0 { 1 } else { 0 };
            if in_step && scripts.shifted(now) != limits.shifted(now) {
                // The scripts' keys part from the module's only here: a window they shifted
                // on a refusal, which admitted nothing since (a current key of 0, maybe
                // shifted again into an empty previous one), outlives the window before it,
                // where the module's limiter has reset.
                let (current, previous) = scripts.shifted(now);
                prop_assert_eq!(limits.shifted(now), (None, None), "at {}", now);
                let empty = current.is_some_and(|k| k.0 == 0) && previous.is_none_or(|k| k.0 == 0);
                prop_assert!(empty, "at {}", now);
                prop_assert!(live(module.state.as_ref(), now).is_none(), "at {}", now);
                in_step = false;
            }
            let got = module.call(&params, now, amount).allowed;
            prop_assert_eq!(got, limits.acquire(now, limit, amount), "at {}", now);
            let as_is = scripts.acquire(now, limit, amount);
            if in_step {
                prop_assert_eq!(got, as_is, "at {}", now);
            }
            // What `RL.INFO` shows against limits' keys after the shift.
            let (current, previous) = limits.shifted(now);
            match live(module.state.as_ref(), now) {
                None => prop_assert_eq!((current, previous), (None, None)),
                Some(s) => {
                    let (counts, start_ms) = s.window_at(now, true).buckets.unwrap();
                    let previous_ttl = start_ms + 2 * p - now;
                    if let Some((count, expires)) = previous {
                        prop_assert_eq!((counts[0], expires - now), (count, previous_ttl));
                    } else {
                        // limits' previous key is gone once its PTTL reaches 0 (its weight).
                        prop_assert!(counts[0] == 0 || previous_ttl == 0);
                    }
                    prop_assert_eq!(counts[1], current.map_or(0, |k| k.0));
                    prop_assert_eq!(current.map(|k| k.1 - now), Some(start_ms + 3 * p - now));
                }
            }
        }
    }
}

#[test]
fn anchored_grid_starts_at_the_first_hit() {
    // 4 sub-windows of 250 ms from the first hit at T0 + 123: (o + k·250, o + (k+1)·250].
    let o = T0 + 123;
    let p = with(10, 1000, 4, true, false);
    let mut d = Sim::new();
    assert_eq!(reply(&d.call(&p, o, 6)), [1, 10, 4, 0, 1250]);
    let s = d.state.clone().unwrap();
    assert_eq!(s.origin_ms(), Some(o));
    let fields = s.info_fields();
    for field in [("buckets", 4), ("anchor", 1), ("floor", 0), ("origin_ms", o), ("used", 6)] {
        assert!(fields.contains(&field), "{field:?} {fields:?}");
    }
    // Still the first sub-window at o + 250 (right-closed), the second from o + 251.
    assert_eq!(s.window_at(o + 250, true).buckets, Some((vec![0, 0, 0, 0, 6], o - 1000)));
    d.call(&p, o + 251, 1);
    assert_eq!(
        d.state.as_ref().unwrap().window_at(o + 251, true).buckets,
        Some((vec![0, 0, 0, 6, 1], o - 750))
    );
    // The first sub-window counts in full until o + 1000 and is weighted after: at o + 1001,
    // 6·249/250 + 1 = 6.976 (no FLOOR: 3 more do not fit, 2 do).
    assert_eq!(d.peek(&p, o + 1000, 0).remaining, 3);
    assert_eq!(d.peek(&p, o + 1001, 0).remaining, 3);
    assert!(!d.peek(&p, o + 1001, 4).allowed);
    // The epoch's grid would not know the first hit: T0 + 123 is 123 ms into a sub-window.
    let mut e = Sim::new();
    e.call(&bucketed(10, 1000, 4), o, 6);
    assert_eq!(e.peek(&bucketed(10, 1000, 4), o + 878, 0).remaining, 4);
    assert_eq!(d.peek(&p, o + 878, 0).remaining, 3);
}

#[test]
fn a_new_grid_starts_after_the_limiter_resets() {
    let p = with(5, 100, 1, true, false);
    let mut d = Sim::new();
    d.call(&p, T0, 2);
    // Reset at o + 2P: the first window (o, o + P] has fully left.
    assert_eq!(d.state.as_ref().unwrap().reset_at_ms(), T0 + 200);
    d.call(&p, T0 + 150, 1);
    assert_eq!(d.state.as_ref().unwrap().origin_ms(), Some(T0));
    assert_eq!(d.state.as_ref().unwrap().reset_at_ms(), T0 + 300);
    // Idle beyond the reset: the next admitted call is a new origin.
    d.call(&p, T0 + 300, 1);
    assert_eq!(d.state.as_ref().unwrap().origin_ms(), Some(T0 + 300));
    assert_eq!(d.state.as_ref().unwrap().counters().collect::<Vec<_>>(), vec![0, 1]);
    // Refused or zero-cost calls on a fresh limiter start nothing.
    let mut d = Sim::new();
    d.call(&p, T0, 0);
    d.call(&p, T0, 6);
    assert!(d.state.is_none());
}

#[test]
fn floor_admits_what_limits_admits_at_the_boundaries() {
    // limits: 10 per 1000 ms; 8 at o, then at o + P + 1 the previous window weighs 999/1000:
    // ⌊8·999/1000⌋ = 7, so 3 more fit (without FLOOR 7.992 + 3 > 10: only 2).
    let o = T0 + 77;
    let floor = with(10, 1000, 1, true, true);
    let plain = with(10, 1000, 1, true, false);
    for (p, fits) in [(floor, 3), (plain, 2)] {
        let mut d = Sim::new();
        d.call(&p, o, 8);
        assert!(d.peek(&p, o + 1000, 2).allowed);
        assert!(!d.peek(&p, o + 1000, 3).allowed, "still the first window at o + P");
        assert!(d.peek(&p, o + 1001, fits).allowed);
        assert!(!d.peek(&p, o + 1001, fits + 1).allowed);
    }
    // FLOOR: remaining is limit − ⌊used⌋ − cost; the retry is exact.
    let mut d = Sim::new();
    d.call(&floor, o, 8);
    assert_eq!(reply(&d.call(&floor, o + 1001, 3)), [1, 10, 0, 0, 1999]);
    // Now ⌊8·(999 − r)/1000⌋ + 3 + c ≤ 10: one more needs ⌊8·(999−r)/1000⌋ ≤ 6, r ≥ 125.
    let limited = d.call(&floor, o + 1001, 1);
    assert_eq!(reply(&limited), [0, 10, 0, 125, 1999]);
    assert!(d.peek(&floor, o + 1001 + 125, 1).allowed);
    assert!(!d.peek(&floor, o + 1001 + 124, 1).allowed);
    let mut limits = LimitsModel { p: 1000, ..LimitsModel::default() };
    assert!(limits.acquire(o, 10, 8));
    assert!(limits.acquire(o + 1001, 10, 3));
    assert!(!limits.acquire(o + 1001 + 124, 10, 1));
    assert!(limits.acquire(o + 1001 + 125, 10, 1));
}

#[test]
fn options_need_buckets_and_convert_conservatively() {
    for (anchor, floor, option) in [(true, false, "ANCHOR"), (false, true, "FLOOR")] {
        let e = exact(5, 1000).with_options(anchor, floor).unwrap_err().to_string();
        assert!(e.starts_with(&format!("ERR syntax error: {option} needs BUCKETS")), "{e}");
    }
    assert_eq!(exact(5, 1000).with_options(false, false), Ok(exact(5, 1000)));
    // Epoch grid → anchored: a new grid at now', everything counted carried into its first
    // sub-window (counted in full for a whole window from now': never more permits).
    let base = T0 - T0 % 1000;
    let mut d = Sim::new();
    d.call(&bucketed(10, 1000, 4), base + 100, 3);
    d.call(&bucketed(10, 1000, 4), base + 600, 2);
    let anchored = with(10, 1000, 4, true, false);
    assert_eq!(d.peek(&anchored, base + 900, 0).remaining, 5);
    assert_eq!(reply(&d.call(&anchored, base + 900, 1)), [1, 10, 4, 0, 1250]);
    let s = d.state.clone().unwrap();
    assert_eq!(
        (s.origin_ms(), s.counters().collect::<Vec<_>>()),
        (Some(base + 900), vec![0, 0, 0, 0, 6])
    );
    // FLOOR switched on keeps the counters (same grid), judged with the floor.
    let floored = with(10, 1000, 4, true, true);
    assert_eq!(reply(&d.call(&floored, base + 900, 4)), [1, 10, 0, 0, 1250]);
    assert!(d.state.as_ref().unwrap().mode.floored());
    assert_eq!(d.state.as_ref().unwrap().origin_ms(), Some(base + 900));
    // Anchored → epoch grid and exact: each sub-window at its last ms (o + (j+1)·w).
    let back = convert(d.state.as_ref().unwrap(), &exact(20, 1000), base + 1000).unwrap();
    assert_eq!(back.entries().collect::<Vec<_>>(), vec![(base + 1000, 10)]);
}
