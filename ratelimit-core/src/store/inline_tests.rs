use super::*;
use crate::algorithms::gcra::{self, GcraParams};
use crate::algorithms::leaky::{self, LeakMode, LeakyParams, NO_DELAY};
use crate::algorithms::lease::{self, LeaseParams};
use crate::algorithms::limiter::{judge, Variant};
use crate::algorithms::period::{self, PeriodParams, UNALIGNED};
use crate::algorithms::slide::{self, SlideParams};
use crate::algorithms::state::{live, Refunded};
use crate::algorithms::token::{self, TokenParams};
use crate::grammar::args::{MAX_AT_MS, MAX_COUNT, MAX_DURATION_MS};
use proptest::prelude::*;

/// A realistic unix-ms instant (2027).
const NOW: i64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

fn index(word: u64) -> usize {
    index_of(word).expect("an inline word")
}

fn count(table: &InlineTable, word: u64) -> u32 {
    table.refs[index(word)].load(Ordering::SeqCst)
}

/// The word of an encode that must succeed.
fn word_of(e: Option<Encoded>) -> u64 {
    e.expect("stored inline").word
}

/// Whether `l` is a step-refill token bucket (the one shape with an extra field).
fn is_step(l: &Limiter) -> bool {
    matches!(l, Limiter::Token(b) if matches!(b.refill, Refill::Step { .. }))
}

/// `e` expands to exactly `want`: every field, and for a sliding log the buffer itself
/// (`SlideState`'s equality compares entries, not buffers). The extra field is there for step
/// buckets (their `origin_ms`, raw) and shapes too wide for one word, and expanding needs it.
fn check_word(table: &InlineTable, e: Encoded, want: &Limiter) -> Result<(), TestCaseError> {
    let word = e.word;
    prop_assert!(is_inline(word));
    // Step buckets carry their origin beside the word; so do shapes too wide for one word,
    // their f1 (see `Layout::f1_extra`).
    if is_step(want) {
        prop_assert!(e.extra.is_some());
    }
    prop_assert_eq!(table.needs_extra(word), e.extra.is_some());
    if let Limiter::Token(b) = want {
        if let Refill::Step { origin_ms } = b.refill {
            prop_assert_eq!(e.extra, Some(origin_ms as u64));
        }
    }
    // The wrong extra (missing, or one the shape has none for) is refused.
    let wrong = if e.extra.is_some() { None } else { Some(0) };
    prop_assert_eq!(table.expand(word, wrong), None);
    let got = table.expand(word, e.extra);
    prop_assert_eq!(got.as_ref(), Some(want));
    if let (Some(Limiter::Slide(a)), Limiter::Slide(b)) = (&got, want) {
        prop_assert_eq!(a.buffer.raw_parts().0, b.buffer.raw_parts().0);
        prop_assert_eq!(a.buffer.word_only(), b.buffer.word_only());
        prop_assert_eq!(a.heap_bytes(), b.heap_bytes());
    }
    Ok(())
}

/// Encodes into a fresh table; `Some` results must expand exactly.
fn fresh_word(l: &Limiter) -> Result<Option<Encoded>, TestCaseError> {
    let mut table = InlineTable::new(1);
    let word = table.encode(l, None);
    if let Some(w) = word {
        check_word(&table, w, l)?;
    }
    Ok(word)
}

// ---------------------------------------------------------------------------------------------
// Realistic states: the real algorithms driven by random calls

/// One call: which parameter set, the clock step (negative: the clock goes back), the cost,
/// and whether it is a refund instead.
type Op = (usize, i64, u64, bool);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let gap = prop_oneof![
        8 => -50i64..300,
        3 => -5_000i64..20_000,
        1 => 0i64..8 * HOUR as i64,
    ];
    let cost = prop_oneof![4 => 0u64..4, 1 => 0u64..30];
    proptest::collection::vec((0usize..3, gap, cost, prop::bool::weighted(0.1)), 1..60)
}

fn start() -> impl Strategy<Value = i64> {
    prop_oneof![3 => NOW..NOW + 1_000_000_000, 1 => 0i64..10_000]
}

/// The states a key goes through under `ops`, as the shell stores them (`judge`, then `next`;
/// refunds of a live state).
fn drive<V: Variant + Clone>(sets: &[V::Params], start: i64, ops: &[Op]) -> Vec<Limiter> {
    drive_from::<V>(None, sets, start, ops)
}

/// [`drive`] from a stored `state` (at or before `start`).
fn drive_from<V: Variant + Clone>(
    mut state: Option<V>,
    sets: &[V::Params],
    start: i64,
    ops: &[Op],
) -> Vec<Limiter> {
    let mut now = start;
    let mut out = Vec::new();
    for &(i, gap, cost, refund) in ops {
        now = now.saturating_add(gap).max(0);
        let Some(p) = sets.get(i % sets.len().max(1)) else { continue };
        if refund {
            let Some(s) = live(state.as_ref(), now) else { continue };
            match s.refund(now, cost) {
                Refunded::To(n) => state = Some(n),
                Refunded::Fresh => state = None,
                Refunded::Nothing => continue,
            }
        } else {
            match judge(state.as_ref(), p, now, cost).next {
                Some(n) => state = Some(n),
                None => continue,
            }
        }
        if let Some(s) = &state {
            out.push(s.clone().into_limiter());
        }
    }
    out
}

/// One key going through `states` in a table of 3 entries, each encode hinted with the key's
/// previous word: every word expands exactly, and the key is inline exactly when a fresh table
/// stores the state inline (a single key never fills the table).
fn one_key(states: &[Limiter]) -> Result<(), TestCaseError> {
    let mut table = InlineTable::new(3);
    let releaser = table.releaser();
    let mut held: Option<u64> = None;
    for l in states {
        let fresh = fresh_word(l)?;
        let encoded = table.encode(l, held);
        prop_assert_eq!(encoded.is_some(), fresh.is_some(), "{:?}", l);
        if let Some(old) = held {
            releaser.release(old);
        }
        held = encoded.map(|e| e.word);
        if let Some(e) = encoded {
            check_word(&table, e, l)?;
            prop_assert_eq!(count(&table, e.word), 1);
        }
        prop_assert_eq!(table.live_entries(), usize::from(held.is_some()));
    }
    Ok(())
}

/// A stored key: its state and its inline word with its extra field (`None`: boxed).
struct Key {
    state: Option<Limiter>,
    word: Option<Encoded>,
}

/// Several keys sharing a small table (so it fills up and slots are reclaimed): after every
/// call every inline key still expands to exactly its state, and once every key is gone no
/// entry is live.
fn many_keys<V: Variant + Clone>(
    sets: &[V::Params],
    start: i64,
    ops: &[(usize, Op)],
) -> Result<(), TestCaseError> {
    let mut table = InlineTable::new(4);
    let releaser = table.releaser();
    let mut keys: Vec<Key> = (0..4).map(|_| Key { state: None, word: None }).collect();
    let mut now = start;
    for &(k, (i, gap, cost, refund)) in ops {
        now = now.saturating_add(gap).max(0);
        let Some(key) = keys.get_mut(k % 4) else { continue };
        let Some(p) = sets.get(i % sets.len().max(1)) else { continue };
        let stored = key.state.as_ref().and_then(V::from_limiter);
        let next = if refund {
            match live(stored, now).map(|s| s.refund(now, cost)) {
                Some(Refunded::To(n)) => Some(Some(n)),
                Some(Refunded::Fresh) => Some(None),
                _ => None,
            }
        } else {
            judge(stored, p, now, cost).next.map(Some)
        };
        let Some(next) = next else { continue };
        let next = next.map(V::into_limiter);
        let word = next.as_ref().and_then(|l| table.encode(l, key.word.map(|e| e.word)));
        if let Some(old) = key.word {
            releaser.release(old.word);
        }
        key.word = word;
        key.state = next;
        for key in &keys {
            if let (Some(w), Some(l)) = (key.word, &key.state) {
                check_word(&table, w, l)?;
            }
        }
        let inline = keys.iter().filter_map(|k| k.word).map(|e| index(e.word));
        let distinct: std::collections::HashSet<usize> = inline.collect();
        prop_assert_eq!(table.live_entries(), distinct.len());
    }
    for key in &keys {
        if let Some(e) = key.word {
            releaser.release(e.word);
        }
    }
    prop_assert_eq!(table.live_entries(), 0);
    Ok(())
}

fn token_params() -> impl Strategy<Value = TokenParams> {
    let capacity = prop_oneof![1u64..=12, 1u64..=1000, Just(100)];
    let rate = prop_oneof![1u64..=5, 1u64..=1000];
    let period = prop_oneof![1u64..=40, prop::sample::select(vec![1000, 60_000, HOUR])];
    (capacity, rate, period, prop::bool::weighted(0.2))
        .prop_filter_map("valid", |(c, r, p, s)| TokenParams::new(c, r, p, s).ok())
}

/// Token parameters mostly with step refill, so that a key's calls switch between step and
/// smooth refill and between periods.
fn step_token_params() -> impl Strategy<Value = TokenParams> {
    let capacity = prop_oneof![1u64..=12, 1u64..=1000, Just(100)];
    let rate = prop_oneof![1u64..=5, 1u64..=1000];
    let period = prop_oneof![1u64..=40, prop::sample::select(vec![1000, 60_000, HOUR])];
    (capacity, rate, period, prop::bool::weighted(0.7))
        .prop_filter_map("valid", |(c, r, p, s)| TokenParams::new(c, r, p, s).ok())
}

/// A busy step bucket at `now` whose grid started long ago (it never refilled to full since).
fn busy_step_bucket(p: &TokenParams, now: i64, back_ms: i64, tokens: u64) -> token::TokenBucket {
    token::TokenBucket {
        capacity: p.capacity,
        rate: p.rate,
        period_ms: p.period_ms,
        tokens: (tokens % (p.capacity + 1)) as i64,
        refill: Refill::Step { origin_ms: now - back_ms },
        updated_ms: now,
    }
}

fn period_params() -> impl Strategy<Value = PeriodParams> {
    let limit = prop_oneof![1u64..=12, 1u64..=1000];
    let period = prop_oneof![1u64..=40, prop::sample::select(vec![1000, 60_000, HOUR, 24 * HOUR])];
    (limit, period, any::<bool>(), any::<i64>()).prop_filter_map("valid", |(l, p, a, o)| {
        let span = i64::try_from(p).unwrap_or(1);
        let align = a.then(|| o.rem_euclid(2 * span - 1) - (span - 1));
        PeriodParams::new(l, p, align).ok()
    })
}

fn leaky_params() -> impl Strategy<Value = LeakyParams> {
    let capacity = prop_oneof![1u64..=12, 1u64..=1000, Just(100)];
    let rate = prop_oneof![1u64..=5, 1u64..=1000];
    let period = prop_oneof![1u64..=40, prop::sample::select(vec![1000, 60_000, HOUR])];
    (capacity, rate, period, any::<u64>(), 0u8..3).prop_filter_map("valid", |(c, r, p, d, m)| {
        let mode = match m {
            0 => LeakMode::Delay(0),
            1 => LeakMode::NoDelay,
            _ => LeakMode::Delay(d % (c + 1)),
        };
        LeakyParams::new(c, r, p, mode).ok()
    })
}

fn gcra_params() -> impl Strategy<Value = GcraParams> {
    let burst = prop_oneof![0u64..=5, 0u64..=1000];
    let count = prop_oneof![1u64..=12, 1u64..=1000];
    let period = prop_oneof![1u64..=5, prop::sample::select(vec![60, 3600])];
    (burst, count, period).prop_filter_map("valid", |(b, c, s)| GcraParams::new(b, c, s).ok())
}

fn slide_params() -> impl Strategy<Value = SlideParams> {
    let limit = prop_oneof![1u64..=12, 1u64..=1000];
    let window = prop_oneof![1u64..=40, prop::sample::select(vec![1000, 60_000, HOUR])];
    (limit, window, prop::bool::weighted(0.2)).prop_filter_map("valid", |(l, w, b)| {
        SlideParams::new(l, w, b.then_some(if w % 10 == 0 { 10 } else { 1 }), 100_000).ok()
    })
}

fn keyed_ops() -> impl Strategy<Value = Vec<(usize, Op)>> {
    ops().prop_flat_map(|ops| {
        let n = ops.len();
        (proptest::collection::vec(0usize..4, n), Just(ops))
            .prop_map(|(keys, ops)| keys.into_iter().zip(ops).collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn token_states_round_trip(sets in proptest::collection::vec(token_params(), 3), t in start(), ops in ops()) {
        one_key(&drive::<token::TokenBucket>(&sets, t, &ops))?;
    }

    /// Step buckets (with changes to smooth refill and to other periods) at realistic instants:
    /// exact, with `origin_ms` in the extra field.
    #[test]
    fn step_token_states_round_trip(
        sets in proptest::collection::vec(step_token_params(), 3),
        t in NOW..NOW + 1_000_000_000,
        ops in ops(),
    ) {
        let states = drive::<token::TokenBucket>(&sets, t, &ops);
        one_key(&states)?;
        // Every state of these shapes is inline.
        for l in &states {
            prop_assert!(fresh_word(l)?.is_some(), "{:?}", l);
        }
    }

    /// Busy step buckets whose grid origin is far in the past (up to 30 days and more before
    /// their update), driven on by random calls.
    #[test]
    fn step_origins_far_in_the_past_round_trip(
        sets in proptest::collection::vec(step_token_params(), 3),
        t in NOW..NOW + 1_000_000_000,
        back in prop_oneof![Just(30 * 24 * HOUR as i64), 0..400 * 24 * HOUR as i64],
        tokens in any::<u64>(),
        ops in ops(),
    ) {
        let first = sets.iter().copied().find(|p| p.step);
        let Some(p) = first else { return Ok(()) };
        let start = busy_step_bucket(&p, t, back, tokens);
        prop_assert!(start.validate().is_ok());
        let mut states = vec![Limiter::Token(start)];
        states.extend(drive_from(Some(start), &sets, t, &ops));
        one_key(&states)?;
        // Every state of the key is inline, whatever its origin.
        for l in &states {
            prop_assert!(fresh_word(l)?.is_some(), "{:?}", l);
        }
    }

    #[test]
    fn period_states_round_trip(sets in proptest::collection::vec(period_params(), 3), t in start(), ops in ops()) {
        one_key(&drive::<period::PeriodWindow>(&sets, t, &ops))?;
    }

    #[test]
    fn leaky_states_round_trip(sets in proptest::collection::vec(leaky_params(), 3), t in start(), ops in ops()) {
        one_key(&drive::<leaky::LeakyBucket>(&sets, t, &ops))?;
    }

    #[test]
    fn gcra_states_round_trip(sets in proptest::collection::vec(gcra_params(), 3), t in start(), ops in ops()) {
        one_key(&drive::<gcra::GcraState>(&sets, t, &ops))?;
    }

    #[test]
    fn slide_states_round_trip(sets in proptest::collection::vec(slide_params(), 3), t in start(), ops in ops()) {
        one_key(&drive::<slide::SlideState>(&sets, t, &ops))?;
    }

    /// Keys sharing a full table never see each other's entries (reclaim only takes entries
    /// no key refers to), and the live count is the number of entries keys refer to.
    #[test]
    fn keys_sharing_a_small_table_stay_exact(
        token in proptest::collection::vec(token_params(), 3),
        step in proptest::collection::vec(step_token_params(), 3),
        period in proptest::collection::vec(period_params(), 3),
        gcra in proptest::collection::vec(gcra_params(), 3),
        slide in proptest::collection::vec(slide_params(), 3),
        t in start(),
        ops in keyed_ops(),
    ) {
        many_keys::<token::TokenBucket>(&token, t, &ops)?;
        many_keys::<token::TokenBucket>(&step, t, &ops)?;
        many_keys::<period::PeriodWindow>(&period, t, &ops)?;
        many_keys::<gcra::GcraState>(&gcra, t, &ops)?;
        many_keys::<slide::SlideState>(&slide, t, &ops)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Random field values

/// A shape's layout, if any: whether a state with in-range fields must be stored inline.
fn has_layout(l: &Limiter) -> bool {
    fields(l).and_then(|f| f.shape.layout()).is_some()
}

fn small_or_any(small: u64, max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![3 => 1..=small, 1 => 1..=max]
}

fn instant() -> impl Strategy<Value = i64> {
    prop_oneof![3 => NOW - 1_000_000..NOW + 1_000_000, 1 => 0..=MAX_AT_MS]
}

/// States whose every field is within the algorithm's invariants (not necessarily reachable).
fn valid_state() -> impl Strategy<Value = Limiter> {
    let counts = || small_or_any(1000, MAX_COUNT);
    let periods = || small_or_any(HOUR, MAX_DURATION_MS);
    let token = (counts(), counts(), periods(), any::<u64>(), any::<u64>(), instant()).prop_map(
        |(capacity, rate, period_ms, tokens, fraction, updated_ms)| {
            Limiter::Token(token::TokenBucket {
                capacity,
                rate,
                period_ms,
                tokens: (tokens % (capacity + 1)) as i64,
                refill: Refill::Smooth { fraction: fraction % period_ms },
                updated_ms,
            })
        },
    );
    let step = (counts(), counts(), periods(), any::<u64>(), any::<u64>(), instant()).prop_map(
        |(capacity, rate, period_ms, tokens, back, updated_ms)| {
            Limiter::Token(token::TokenBucket {
                capacity,
                rate,
                period_ms,
                tokens: (tokens % (capacity + 1)) as i64,
                refill: Refill::Step {
                    origin_ms: updated_ms - (back % (updated_ms as u64 + 1)) as i64,
                },
                updated_ms,
            })
        },
    );
    let period = (counts(), periods(), any::<Option<i64>>(), any::<u64>(), any::<u64>(), instant())
        .prop_map(|(limit, period_ms, align, used, into, start)| {
            let span = period_ms as i64;
            Limiter::Period(period::PeriodWindow {
                limit,
                period_ms,
                align_offset_ms: align.map_or(UNALIGNED, |o| o % span),
                used: 1 + used % limit,
                window_start_ms: start,
                window_end_ms: start + span,
                updated_ms: start + (into % period_ms) as i64,
            })
        });
    let leaky =
        (counts(), counts(), periods(), any::<u64>(), any::<u64>(), any::<u64>(), instant())
            .prop_map(|(capacity, rate, period_ms, delay, level, fraction, updated_ms)| {
                Limiter::Leaky(leaky::LeakyBucket {
                    capacity,
                    rate,
                    period_ms,
                    delay: if delay % 3 == 0 { NO_DELAY } else { delay % (capacity + 1) },
                    level: level % (capacity + 1),
                    fraction: fraction % period_ms,
                    updated_ms,
                })
            });
    let gcra = (0u64..=1000, 1u64..=1000, 1u64..=3600, any::<u64>(), any::<u64>(), instant())
        .prop_map(|(max_burst, count, period_s, frac, ahead, updated_ms)| {
            let most = (max_burst + 1) * period_s * 1000 / count;
            Limiter::Gcra(gcra::GcraState {
                max_burst,
                count,
                period_s,
                tat_ms: updated_ms + (ahead % (most + 1)) as i64,
                tat_frac: frac % count,
                updated_ms,
            })
        });
    let slide = (counts(), periods(), any::<u64>(), instant()).prop_map(
        |(limit, window_ms, cost, updated_ms)| {
            Limiter::Slide(slide::SlideState {
                limit,
                window_ms,
                mode: slide::SlideMode::Exact,
                updated_ms,
                buffer: slide::SlideBuffer::from_word(1 + cost % limit),
            })
        },
    );
    prop_oneof![token, step, period, leaky, gcra, slide]
}

/// States with arbitrary fields, invariants or not.
fn wild_state() -> impl Strategy<Value = Limiter> {
    let token = (any::<[u64; 4]>(), any::<i64>(), any::<i64>(), any::<bool>()).prop_map(
        |([capacity, rate, period_ms, tokens], at, updated_ms, step)| {
            let refill = if step {
                Refill::Step { origin_ms: at }
            } else {
                Refill::Smooth { fraction: at as u64 }
            };
            Limiter::Token(token::TokenBucket {
                capacity,
                rate,
                period_ms,
                tokens: tokens as i64,
                refill,
                updated_ms,
            })
        },
    );
    let period = (any::<[u64; 3]>(), any::<[i64; 4]>()).prop_map(
        |(
            [limit, period_ms, used],
            [align_offset_ms, window_start_ms, window_end_ms, updated_ms],
        )| {
            Limiter::Period(period::PeriodWindow {
                limit,
                period_ms,
                align_offset_ms,
                used,
                window_start_ms,
                window_end_ms,
                updated_ms,
            })
        },
    );
    let leaky = (any::<[u64; 6]>(), any::<i64>()).prop_map(
        |([capacity, rate, period_ms, delay, level, fraction], updated_ms)| {
            Limiter::Leaky(leaky::LeakyBucket {
                capacity,
                rate,
                period_ms,
                delay,
                level,
                fraction,
                updated_ms,
            })
        },
    );
    let gcra = (any::<[u64; 4]>(), any::<[i64; 2]>()).prop_map(
        |([max_burst, count, period_s, tat_frac], [tat_ms, updated_ms])| {
            Limiter::Gcra(gcra::GcraState {
                max_burst,
                count,
                period_s,
                tat_ms,
                tat_frac,
                updated_ms,
            })
        },
    );
    let slide = (any::<[u64; 3]>(), any::<u16>(), any::<i64>()).prop_map(
        |([limit, window_ms, word], buckets, updated_ms)| {
            Limiter::Slide(slide::SlideState {
                limit,
                window_ms,
                mode: slide::SlideMode::from_buckets(buckets % 4),
                updated_ms,
                buffer: slide::SlideBuffer::from_word(word),
            })
        },
    );
    prop_oneof![token, period, leaky, gcra, slide]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// In-range fields are stored inline whenever the shape leaves 12 time bits, and exactly.
    #[test]
    fn valid_fields_round_trip(l in valid_state()) {
        prop_assert_eq!(fresh_word(&l)?.is_some(), has_layout(&l));
    }

    /// Any fields at all: never a panic, and whatever is stored inline comes back exactly.
    #[test]
    fn wild_fields_round_trip_or_stay_boxed(l in wild_state(), hint in any::<u64>()) {
        fresh_word(&l)?;
        let mut table = InlineTable::new(2);
        if let Some(e) = table.encode(&l, Some(hint)) {
            check_word(&table, e, &l)?;
        }
    }

    /// Any word at all: expanding never panics (and a word of a slot never used is nothing).
    #[test]
    fn expanding_any_word_is_safe(
        states in proptest::collection::vec(valid_state(), 0..4),
        word in any::<u64>(),
        extra in any::<Option<u64>>(),
    ) {
        let mut table = InlineTable::new(8);
        for l in &states {
            let _ = table.encode(l, None);
        }
        let expanded = table.expand(word, extra);
        let needs = table.needs_extra(word);
        if index_of(word).is_none_or(|i| i >= table.entries.len()) {
            prop_assert!(expanded.is_none());
            prop_assert!(!needs);
        }
        if needs != extra.is_some() {
            prop_assert!(expanded.is_none());
        }
        table.retain(word);
        table.releaser().release(word);
    }

    /// Different shapes never share an entry.
    #[test]
    fn shapes_never_share_an_entry(states in proptest::collection::vec(valid_state(), 1..12)) {
        let mut table = InlineTable::new(64);
        let mut seen: Vec<(usize, Shape)> = Vec::new();
        for l in &states {
            if let Some(Encoded { word: w, .. }) = table.encode(l, seen.last().map(|s| inline_word(s.0, 0))) {
                let shape = fields(l).map(|f| f.shape);
                prop_assert!(shape.is_some());
                for (i, s) in &seen {
                    if *i == index(w) {
                        prop_assert_eq!(Some(*s), shape);
                    }
                }
                if let Some(shape) = shape {
                    seen.push((index(w), shape));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The benchmark's shapes at realistic instants

fn assert_all_inline(states: &[Limiter]) -> Result<(), TestCaseError> {
    let mut table = InlineTable::new(16);
    let releaser = table.releaser();
    let mut held = None;
    for l in states {
        prop_assert!(fresh_word(l)?.is_some(), "{:?}", l);
        let encoded = table.encode(l, held);
        prop_assert!(encoded.is_some(), "{:?}", l);
        if let Some(old) = held {
            releaser.release(old);
        }
        held = encoded.map(|e| e.word);
        if let Some(e) = encoded {
            check_word(&table, e, l)?;
        }
    }
    Ok(())
}

/// `RL.* k` with the benchmark's parameters and the common `10/1s`, `1000/1m`; token buckets
/// with smooth and with step refill (`RL.TOKEN k 100 1 1h STEP`).
fn bench_token() -> Vec<TokenParams> {
    let sets =
        [(100, 1, HOUR), (10, 10, 1000), (1000, 1000, 60_000), (10, 1, 1000), (1000, 1, 60_000)];
    let mut out = Vec::new();
    for step in [false, true] {
        for (c, r, p) in sets {
            out.push(TokenParams::new(c, r, p, step).unwrap());
        }
    }
    out
}

fn bench_leaky() -> Vec<LeakyParams> {
    let mut out = Vec::new();
    for (c, r, p) in [(100, 1, HOUR), (10, 10, 1000), (1000, 1000, 60_000)] {
        for mode in [LeakMode::Delay(0), LeakMode::NoDelay, LeakMode::Delay(c / 2)] {
            out.push(LeakyParams::new(c, r, p, mode).unwrap());
        }
    }
    out
}

fn bench_period() -> Vec<PeriodParams> {
    [(100, HOUR, None), (10, 1000, None), (1000, 60_000, None), (100, HOUR, Some(1_800_000))]
        .into_iter()
        .map(|(l, p, a)| PeriodParams::new(l, p, a).unwrap())
        .collect()
}

fn bench_gcra() -> Vec<GcraParams> {
    [(99, 1, 3600), (9, 10, 1), (999, 1000, 60), (0, 1, 1)]
        .into_iter()
        .map(|(b, c, s)| GcraParams::new(b, c, s).unwrap())
        .collect()
}

fn bench_slide() -> Vec<SlideParams> {
    [(100, HOUR), (10, 1000), (1000, 60_000)]
        .into_iter()
        .map(|(l, w)| SlideParams::new(l, w, None, 100_000).unwrap())
        .collect()
}

/// Calls with one parameter set at realistic instants: small steps, and the occasional jump.
fn bench_ops() -> impl Strategy<Value = Vec<(i64, u64)>> {
    let gap = prop_oneof![8 => 0i64..2000, 1 => 0i64..2 * HOUR as i64];
    proptest::collection::vec((gap, prop_oneof![4 => 1u64..3, 1 => 0u64..50]), 1..80)
}

fn bench_states<V: Variant + Clone>(
    p: V::Params,
    start: i64,
    calls: &[(i64, u64)],
) -> Vec<Limiter> {
    let ops: Vec<Op> = calls.iter().map(|&(gap, cost)| (0, gap, cost, false)).collect();
    drive::<V>(&[p], start, &ops)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn bench_shapes_are_inline(t in NOW..NOW + 1_000_000_000, calls in bench_ops()) {
        for p in bench_token() {
            assert_all_inline(&bench_states::<token::TokenBucket>(p, t, &calls))?;
        }
        for p in bench_leaky() {
            assert_all_inline(&bench_states::<leaky::LeakyBucket>(p, t, &calls))?;
        }
        for p in bench_period() {
            assert_all_inline(&bench_states::<period::PeriodWindow>(p, t, &calls))?;
        }
        for p in bench_gcra() {
            assert_all_inline(&bench_states::<gcra::GcraState>(p, t, &calls))?;
        }
        // A sliding log is inline while it holds one entry.
        for p in bench_slide() {
            let one: Vec<Limiter> = bench_states::<slide::SlideState>(p, t, &calls)
                .into_iter()
                .filter(|l| matches!(l, Limiter::Slide(s) if s.heap_bytes() == 0))
                .collect();
            assert_all_inline(&one)?;
        }
    }

    /// Daily quotas of a million (`RL.PERIOD k 1000000 1d`, `RL.TOKEN k 1000000 1000000 1d`,
    /// `RL.LEAKY …`, `CL.THROTTLE k 999999 1000000 86400`): too wide for one word, so f1 rides
    /// in the extra field; every state round-trips and carries it.
    #[test]
    fn wide_shapes_use_the_extra_field(t in NOW..NOW + 1_000_000_000, calls in bench_ops()) {
        const DAY: u64 = 86_400_000;
        let period = PeriodParams::new(1_000_000, DAY, None).unwrap();
        let token = TokenParams::new(1_000_000, 1_000_000, DAY, false).unwrap();
        let leaky = LeakyParams::new(1_000_000, 1_000_000, DAY, leaky::LeakMode::Delay(0)).unwrap();
        let gcra = GcraParams::new(999_999, 1_000_000, 86_400).unwrap();
        let mut states = bench_states::<period::PeriodWindow>(period, t, &calls);
        states.extend(bench_states::<token::TokenBucket>(token, t, &calls));
        states.extend(bench_states::<leaky::LeakyBucket>(leaky, t, &calls));
        states.extend(bench_states::<gcra::GcraState>(gcra, t, &calls));
        assert_all_inline(&states)?;
        let mut table = InlineTable::new(16);
        for l in &states {
            let e = table.encode(l, None).expect("inline");
            prop_assert!(e.extra.is_some(), "{:?}", l);
            check_word(&table, e, l)?;
        }
    }

    /// `RL.SLIDE k 100 1h` with one entry (one call, or several in the same ms).
    #[test]
    fn a_one_entry_sliding_log_is_inline(t in NOW..NOW + 1_000_000_000, costs in proptest::collection::vec(1u64..=40, 1..4)) {
        for p in bench_slide() {
            let calls: Vec<(i64, u64)> = costs.iter().map(|&c| (0, c)).collect();
            assert_all_inline(&bench_states::<slide::SlideState>(p, t, &calls))?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reference counts and the table

fn token_at(capacity: u64, t: i64, cost: u64) -> Limiter {
    let p = TokenParams::new(capacity, 1, HOUR, false).unwrap();
    Limiter::Token(token::evaluate(None, &p, t, cost).next.unwrap())
}

#[test]
fn is_inline_is_the_low_bit() {
    assert!(is_inline(1));
    assert!(is_inline(u64::MAX));
    assert!(!is_inline(0));
    assert!(!is_inline(0x7f00_dead_bee8));
    assert_eq!(INLINE_TAG, 1);
    assert_eq!(PAYLOAD_BITS + INDEX_BITS, 63);
}

#[test]
fn a_hint_in_range_keeps_its_entry() {
    let mut table = InlineTable::new(16);
    let releaser = table.releaser();
    let first = word_of(table.encode(&token_at(100, NOW, 1), None));
    let mut held = first;
    for dt in [1, 1000, 60_000, 150_000] {
        let l = token_at(100, NOW + dt, 1);
        let w = word_of(table.encode(&l, Some(held)));
        assert_eq!(index(w), index(first), "after {dt} ms");
        assert_eq!(table.expand(w, None), Some(l));
        releaser.release(held);
        held = w;
    }
    assert_eq!(table.live_entries(), 1);
    assert_eq!(count(&table, held), 1);
    // Slightly older states of other keys fit the same entry.
    let older = word_of(table.encode(&token_at(100, NOW - 10_000, 1), None));
    assert_eq!(index(older), index(first));
    assert_eq!(count(&table, held), 2);
}

#[test]
fn times_beyond_the_range_make_a_new_current_entry() {
    let mut table = InlineTable::new(16);
    let releaser = table.releaser();
    let old = word_of(table.encode(&token_at(100, NOW, 1), None));
    let later = NOW + 10 * HOUR as i64;
    let moved = word_of(table.encode(&token_at(100, later, 1), Some(old)));
    assert_ne!(index(moved), index(old));
    releaser.release(old);
    assert_eq!(table.live_entries(), 1);
    // The new entry is now the shape's current one: another key goes there.
    let other = word_of(table.encode(&token_at(100, later + 5, 2), None));
    assert_eq!(index(other), index(moved));
    // Another key still near the old time gets a new entry (the old one is free but not
    // current any more), never the wrong base.
    let back = token_at(100, NOW + 1, 1);
    let w = word_of(table.encode(&back, None));
    assert_eq!(table.expand(w, None), Some(back));
}

#[test]
fn a_released_slot_is_reused_when_the_table_is_full() {
    let mut table = InlineTable::new(2);
    let releaser = table.releaser();
    let a = word_of(table.encode(&token_at(10, NOW, 1), None));
    let b = word_of(table.encode(&token_at(20, NOW, 1), None));
    assert_eq!(table.encode(&token_at(30, NOW, 1), None), None);
    releaser.release(a);
    let c_state = token_at(30, NOW, 1);
    let c = word_of(table.encode(&c_state, None));
    assert_eq!(index(c), index(a));
    assert_eq!(table.expand(c, None), Some(c_state));
    assert_eq!(table.expand(b, None), Some(token_at(20, NOW, 1)));
    // The reclaimed entry is no longer its shape's current one: `a`'s shape finds no room.
    assert!(!table.current.contains_key(&fields(&token_at(10, NOW, 1)).unwrap().shape));
    assert_eq!(table.encode(&token_at(10, NOW, 1), None), None);
    assert_eq!(table.live_entries(), 2);
}

#[test]
fn a_full_table_gives_up_within_64_probes() {
    let capacity = 1000;
    let mut table = InlineTable::new(capacity);
    let releaser = table.releaser();
    let words: Vec<u64> =
        (1..=capacity as u64).map(|c| word_of(table.encode(&token_at(c, NOW, 1), None))).collect();
    assert_eq!(table.live_entries(), capacity);
    let new_shape = |n: u64| token_at(5000 + n, NOW, 1);
    assert_eq!(table.encode(&new_shape(0), None), None);
    assert_eq!(table.cursor, RECLAIM_PROBES);
    // A free slot ahead of the cursor, within the next 64 probes, is found.
    releaser.release(words[100]);
    let w = word_of(table.encode(&new_shape(1), None));
    assert_eq!(index(w), 100);
    assert_eq!(table.cursor, 101);
    // One behind the cursor is not (yet): at most 64 probes per encode.
    releaser.release(words[10]);
    assert_eq!(table.encode(&new_shape(2), None), None);
    assert_eq!(table.cursor, 101 + RECLAIM_PROBES);
    // The cursor comes round to it eventually.
    let mut tries = 0;
    let found = loop {
        tries += 1;
        if let Some(w) = table.encode(&new_shape(3), None) {
            break w;
        }
    };
    assert_eq!(index(found.word), 10);
    assert!(tries <= capacity / RECLAIM_PROBES + 1);
}

#[test]
fn capacity_is_clamped() {
    assert_eq!(InlineTable::new(0).capacity(), 1);
    assert_eq!(InlineTable::new(usize::MAX).capacity(), 1 << INDEX_BITS);
    let mut table = InlineTable::new(1);
    assert!(table.encode(&token_at(1, NOW, 1), None).is_some());
    assert_eq!(table.encode(&token_at(2, NOW, 1), None), None);
}

#[test]
fn bogus_releases_change_nothing() {
    let mut table = InlineTable::new(8);
    let releaser = table.releaser();
    let w = word_of(table.encode(&token_at(10, NOW, 1), None));
    for bogus in [0, 8, 0x7f00_dead_bee8, !1u64] {
        releaser.release(bogus);
        table.retain(bogus);
    }
    // Inline words of slots never used or out of range.
    for i in [5u64, 7, 8, INDEX_MASK] {
        let word = INLINE_TAG | i << 1;
        releaser.release(word);
        table.retain(word);
        assert_eq!(table.expand(word, None), None);
    }
    assert_eq!(count(&table, w), 1);
    releaser.release(w);
    assert_eq!(count(&table, w), 0);
    releaser.release(w);
    releaser.release(w);
    assert_eq!(count(&table, w), 0, "no wrap below 0");
    assert_eq!(table.live_entries(), 0);
    // A gone entry neither expands nor comes back by `retain`.
    assert_eq!(table.expand(w, None), None);
    table.retain(w);
    assert_eq!(count(&table, w), 0);
}

#[test]
fn retain_and_release_are_symmetric() {
    let mut table = InlineTable::new(8);
    let releaser = table.releaser();
    let l = token_at(10, NOW, 3);
    let w = word_of(table.encode(&l, None));
    for _ in 0..3 {
        table.retain(w);
    }
    assert_eq!(count(&table, w), 4);
    for left in (1..4).rev() {
        releaser.release(w);
        assert_eq!(count(&table, w), left);
        assert_eq!(table.expand(w, None), Some(l.clone()));
    }
    releaser.release(w);
    assert_eq!(table.live_entries(), 0);
    // A saturated count pins its entry.
    let w = word_of(table.encode(&l, None));
    table.refs[index(w)].store(PINNED - 1, Ordering::SeqCst);
    table.retain(w);
    table.retain(w);
    assert_eq!(count(&table, w), PINNED);
    releaser.release(w);
    assert_eq!(count(&table, w), PINNED);
}

#[test]
fn releases_from_other_threads() {
    let mut table = InlineTable::new(8);
    let a = word_of(table.encode(&token_at(10, NOW, 1), None));
    let b = word_of(table.encode(&token_at(20, NOW, 1), None));
    for _ in 0..999 {
        table.retain(a);
        table.retain(b);
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let releaser = table.releaser();
            std::thread::spawn(move || {
                for _ in 0..250 {
                    releaser.release(a);
                }
                // More releases than references: the count stops at 0.
                for _ in 0..300 {
                    releaser.release(b);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(count(&table, a), 0);
    assert_eq!(count(&table, b), 0);
    assert_eq!(table.live_entries(), 0);
}

// ---------------------------------------------------------------------------------------------
// Step buckets and the extra field

fn step_at(t: i64, cost: u64) -> token::TokenBucket {
    let p = TokenParams::new(100, 1, HOUR, true).unwrap();
    token::evaluate(None, &p, t, cost).next.unwrap()
}

#[test]
fn the_bench_step_bucket_is_inline_with_its_origin_beside() {
    // `RL.TOKEN k 100 1 1h STEP`, first call and a call 30 days on (the key never refilled).
    let mut table = InlineTable::new(8);
    let first = step_at(NOW, 1);
    let e = table.encode(&Limiter::Token(first), None).unwrap();
    assert_eq!(e.extra, Some(NOW as u64));
    assert!(table.needs_extra(e.word));
    assert_eq!(table.expand(e.word, e.extra), Some(Limiter::Token(first)));
    let later = NOW + 30 * 24 * HOUR as i64 + 17;
    let busy = token::TokenBucket { tokens: 3, updated_ms: later, ..first };
    let f = table.encode(&Limiter::Token(busy), Some(e.word)).unwrap();
    assert_eq!(f.extra, Some(NOW as u64));
    assert_eq!(table.expand(f.word, f.extra), Some(Limiter::Token(busy)));
    // 100 tokens take 7 bits: 40 bits of time offset, so the hinted entry still covers it.
    assert_eq!(index(f.word), index(e.word));
    assert_eq!(count(&table, e.word), 2);
}

#[test]
fn a_step_word_needs_its_extra_field() {
    let mut table = InlineTable::new(8);
    let l = Limiter::Token(step_at(NOW, 5));
    let e = table.encode(&l, None).unwrap();
    assert_eq!(table.expand(e.word, None), None);
    assert_eq!(table.expand(e.word, e.extra), Some(l));
    // Another origin gives another (exact) bucket: the word does not check it.
    let other = Some((NOW - 1) as u64);
    let Some(Limiter::Token(b)) = table.expand(e.word, other) else { panic!("a token bucket") };
    assert_eq!(b.refill, Refill::Step { origin_ms: NOW - 1 });
}

#[test]
fn smooth_shapes_have_no_extra_field_and_refuse_one() {
    let mut table = InlineTable::new(8);
    let l = token_at(100, NOW, 1);
    let e = table.encode(&l, None).unwrap();
    assert_eq!(e.extra, None);
    assert!(!table.needs_extra(e.word));
    assert_eq!(table.expand(e.word, None), Some(l));
    assert_eq!(table.expand(e.word, Some(0)), None);
    // Words that are not inline, or of slots never used, need nothing.
    for word in [0, 8, INLINE_TAG | 5 << 1] {
        assert!(!table.needs_extra(word));
    }
}

#[test]
fn any_origin_round_trips_exactly() {
    let mut table = InlineTable::new(8);
    let base = step_at(NOW, 1);
    for origin_ms in [i64::MIN, -1, 0, 1, NOW - 30 * 24 * HOUR as i64, NOW, NOW + 1, i64::MAX] {
        let l = Limiter::Token(token::TokenBucket { refill: Refill::Step { origin_ms }, ..base });
        let e = table.encode(&l, None).unwrap();
        assert_eq!(e.extra, Some(origin_ms as u64));
        assert_eq!(table.expand(e.word, e.extra), Some(l));
    }
    // The origin is not part of the shape: all of them share one entry.
    assert_eq!(table.live_entries(), 1);
}

#[test]
fn step_and_smooth_buckets_of_the_same_parameters_are_different_shapes() {
    let mut table = InlineTable::new(8);
    let step = table.encode(&Limiter::Token(step_at(NOW, 1)), None).unwrap();
    let smooth = table.encode(&token_at(100, NOW, 1), Some(step.word)).unwrap();
    assert_ne!(index(step.word), index(smooth.word));
    assert_eq!(smooth.extra, None);
    // The smooth word, given the step bucket's origin, is refused, and the reverse.
    assert_eq!(table.expand(smooth.word, step.extra), None);
    assert_eq!(table.expand(step.word, smooth.extra), None);
}

// ---------------------------------------------------------------------------------------------
// No inline form

#[test]
fn states_without_an_inline_form() {
    let mut table = InlineTable::new(64);
    let mut none = |l: Limiter| assert_eq!(table.encode(&l, None), None, "{l:?}");

    let buckets = SlideParams::new(10, 1000, Some(10), 100).unwrap();
    none(Limiter::Slide(slide::evaluate(None, &buckets, NOW, 1).next.unwrap()));

    let exact = SlideParams::new(10, 1000, None, 100).unwrap();
    let one = slide::evaluate(None, &exact, NOW, 1).next.unwrap();
    let two = slide::evaluate(Some(&one), &exact, NOW + 5, 1).next.unwrap();
    assert_eq!(two.entry_count(), 2);
    none(Limiter::Slide(two));

    let lp = LeaseParams::new(3, 100, 10).unwrap();
    none(Limiter::Lease(lease::acquire(None, &lp, NOW, None, true).next.unwrap()));

    let g = GcraParams::new(5, 1, 1).unwrap();
    let mut state = gcra::evaluate(None, &g, NOW, 1).next.unwrap();
    state.tat_ms = state.updated_ms - 1;
    none(Limiter::Gcra(state));

    // A window carried over a change to a shorter period ends after start + period.
    let long = PeriodParams::new(5, 5000, None).unwrap();
    let short = PeriodParams::new(5, 1000, None).unwrap();
    let a = period::evaluate(None, &long, NOW, 1).next.unwrap();
    let carried = period::evaluate(Some(&a), &short, NOW + 10, 1).next.unwrap();
    assert_eq!(carried.window_end_ms, carried.window_start_ms + 5000);
    none(Limiter::Period(carried));
    none(Limiter::Period(period::PeriodWindow { window_end_ms: a.window_end_ms + 1, ..a }));

    // A shape too wide to leave 12 time bits.
    let wide = TokenParams::new(MAX_COUNT, MAX_COUNT, 3650 * 86_400_000, false).unwrap();
    none(Limiter::Token(token::evaluate(None, &wide, NOW, 1).next.unwrap()));

    assert_eq!(table.live_entries(), 0);
    assert!(table.entries.is_empty());
}
