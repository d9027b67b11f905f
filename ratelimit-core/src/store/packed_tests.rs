use super::*;
use crate::{
    algorithms::gcra, algorithms::leaky, algorithms::period, algorithms::slide, algorithms::token,
};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_000;

fn token_state(step: bool, cost: u64) -> Limiter {
    let p = token::TokenParams::new(10, 3, 7, step).unwrap();
    Limiter::Token(token::evaluate(None, &p, T0, cost).next.unwrap())
}

fn slide_state(buckets: Option<u64>, entries: i64) -> Limiter {
    let p = slide::SlideParams::new(100_000, 86_400_000, buckets, 100_000).unwrap();
    let mut state = None;
    for i in 0..entries {
        if let Some(next) =
            slide::evaluate(state.as_ref(), &p, T0 + i * 37, 1 + (i as u64 % 3)).next
        {
            state = Some(next);
        }
    }
    Limiter::Slide(state.unwrap())
}

/// A bucketed window with `ANCHOR` and/or `FLOOR` (its origin after the counters).
fn slide_options(anchor: bool, floor: bool) -> Limiter {
    let p = slide::SlideParams::new(1000, 60_000, Some(6), 100_000).unwrap();
    let p = p.with_options(anchor, floor).unwrap();
    let mut state = None;
    for i in 0..50 {
        if let Some(next) = slide::evaluate(state.as_ref(), &p, T0 + 17 + i * 1300, 3).next {
            state = Some(next);
        }
    }
    Limiter::Slide(state.unwrap())
}

/// States of every algorithm and mode, including negative and extreme instants.
fn samples() -> Vec<Limiter> {
    let aligned = period::PeriodParams::new(5, 86_400_000, Some(-5 * 3_600_000)).unwrap();
    let plain = period::PeriodParams::new(5, 1000, None).unwrap();
    let g = gcra::GcraParams::new(15, 30, 60).unwrap();
    let mut out = vec![
        token_state(false, 4),
        token_state(true, 3),
        Limiter::Period(period::evaluate(None, &aligned, 0, 2).next.unwrap()),
        Limiter::Period(period::evaluate(None, &plain, T0, 2).next.unwrap()),
        Limiter::Gcra(gcra::evaluate(None, &g, crate::grammar::args::MAX_AT_MS, 3).next.unwrap()),
        slide_state(None, 1),
        slide_state(None, 500),
        slide_state(Some(1000), 500),
        slide_options(true, true),
        slide_options(true, false),
        slide_options(false, true),
    ];
    for mode in [leaky::LeakMode::Delay(2), leaky::LeakMode::NoDelay] {
        let p = leaky::LeakyParams::new(10, 3, 7, mode).unwrap();
        out.push(Limiter::Leaky(leaky::evaluate(None, &p, T0, 4).next.unwrap()));
    }
    out
}

#[test]
fn is_48_bytes() {
    assert_eq!(std::mem::size_of::<PackedLimiter>(), 48);
}

#[test]
fn round_trips_every_algorithm_compactly() {
    for l in samples() {
        let packed = PackedLimiter::new(l.clone());
        assert_ne!(packed.words[0] & tag_mask(), TAG_WIDE, "{l:?} did not pack");
        assert_eq!(packed.view(Limiter::clone), l);
        assert_eq!(packed.heap_bytes(), l.heap_bytes());
        assert_eq!(packed.into_limiter(), l);
    }
}

#[test]
fn values_too_wide_are_stored_wide_and_exactly() {
    let Limiter::Token(mut b) = token_state(false, 4) else { unreachable!() };
    b.capacity = u64::MAX;
    b.updated_ms = i64::MIN;
    let l = Limiter::Token(b);
    let packed = PackedLimiter::new(l.clone());
    assert_eq!(packed.words[0] & tag_mask(), TAG_WIDE);
    assert_eq!(packed.view(Limiter::clone), l);
    assert_eq!(packed.heap_bytes(), std::mem::size_of::<Wide>());
    let copy = packed.clone();
    drop(packed);
    assert_eq!(copy.into_limiter(), l);
}

#[test]
fn update_repacks_what_it_leaves() {
    let mut packed = PackedLimiter::new(slide_state(None, 10));
    let p = slide::SlideParams::new(100_000, 86_400_000, None, 100_000).unwrap();
    let changed = packed.update(|l| {
        let Limiter::Slide(s) = l else { return false };
        slide::evaluate_in_place(s, &p, T0 + 10_000, 5, true).is_some_and(|(_, changed)| changed)
    });
    assert!(changed);
    packed.view(|l| {
        let Limiter::Slide(s) = l else { panic!() };
        assert_eq!(s.entry_count(), 11);
        assert_eq!(s.updated_ms, T0 + 10_000);
    });
    // Replacing the whole limiter frees the old log and keeps the new one.
    packed.update(|l| *l = token_state(true, 1));
    assert_eq!(packed.view(Limiter::clone), token_state(true, 1));
}

/// A wide value is updated in its box; one that fits the words again afterwards is compact.
#[test]
fn update_of_a_wide_value_stays_in_its_box_until_it_fits() {
    let Limiter::Token(mut b) = token_state(false, 4) else { unreachable!() };
    b.capacity = u64::MAX;
    let mut packed = PackedLimiter::new(Limiter::Token(b));
    let boxed = packed.words[1];
    packed.update(|l| {
        if let Limiter::Token(t) = l {
            t.tokens -= 1;
        }
    });
    assert_eq!((packed.words[0] & tag_mask(), packed.words[1]), (TAG_WIDE, boxed), "same box");
    b.tokens -= 1;
    assert_eq!(packed.view(Limiter::clone), Limiter::Token(b));
    packed.update(|l| *l = slide_state(None, 10));
    assert_ne!(packed.words[0] & tag_mask(), TAG_WIDE, "compact again");
    assert_eq!(packed.view(Limiter::clone), slide_state(None, 10));
    assert_eq!(packed.into_limiter(), slide_state(None, 10));
}

#[test]
fn clones_are_independent() {
    let original = PackedLimiter::new(slide_state(Some(10), 50));
    let mut copy = original.clone();
    copy.update(|l| *l = token_state(false, 1));
    assert_eq!(original.view(Limiter::clone), slide_state(Some(10), 50));
}

proptest! {
    /// Any state the algorithms produce packs compactly and unpacks to itself.
    #[test]
    fn produced_states_round_trip(
        which in 0usize..5,
        steps in proptest::collection::vec((0i64..5_000, 0u64..5), 1..30),
        t0 in 0i64..=crate::grammar::args::MAX_AT_MS - 200_000,
    ) {
        let mut state: Option<Limiter> = None;
        let mut now = t0;
        for (gap, cost) in steps {
            now += gap;
            let next = match (which, state.as_ref()) {
                (0, s) => {
                    let p = token::TokenParams::new(9, 2, 700, gap % 2 == 0).unwrap();
                    let s = s.and_then(|l| if let Limiter::Token(b) = l { Some(b) } else { None });
                    token::evaluate(s, &p, now, cost).next.map(Limiter::Token)
                }
                (1, s) => {
                    let p = period::PeriodParams::new(9, 1000, Some(-300)).unwrap();
                    let s = s.and_then(|l| if let Limiter::Period(b) = l { Some(b) } else { None });
                    period::evaluate(s, &p, now, cost).next.map(Limiter::Period)
                }
                (2, s) => {
                    let p = leaky::LeakyParams::new(9, 2, 700, leaky::LeakMode::Delay(1)).unwrap();
                    let s = s.and_then(|l| if let Limiter::Leaky(b) = l { Some(b) } else { None });
                    leaky::evaluate(s, &p, now, cost).next.map(Limiter::Leaky)
                }
                (3, s) => {
                    let p = gcra::GcraParams::new(5, 3, 7).unwrap();
                    let s = s.and_then(|l| if let Limiter::Gcra(b) = l { Some(b) } else { None });
                    gcra::evaluate(s, &p, now, cost).next.map(Limiter::Gcra)
                }
                (_, s) => {
                    let p = slide::SlideParams::new(9, 10_000, if gap % 3 == 0 { Some(10) } else { None }, 100).unwrap();
                    let s = s.and_then(|l| if let Limiter::Slide(b) = l { Some(b) } else { None });
                    slide::evaluate(s, &p, now, cost).next.map(Limiter::Slide)
                }
            };
            if let Some(n) = next {
                state = Some(n);
            }
        }
        if let Some(l) = state {
            let packed = PackedLimiter::new(l.clone());
            prop_assert_ne!(packed.words[0] & tag_mask(), TAG_WIDE);
            prop_assert_eq!(packed.into_limiter(), l);
        }
    }
}

/// A ban makes the value wide and stays with it through updates and copies; without a ban the
/// value is compact again.
#[test]
fn a_ban_is_kept_beside_the_limiter() {
    let l = slide_state(None, 10);
    let ban = crate::algorithms::ban::Ban::start(1_700_000_000_000, 60_000);
    let mut packed = PackedLimiter::with_ban(l.clone(), Some(ban));
    assert_eq!(packed.words[0] & tag_mask(), TAG_WIDE);
    // The boxed form (README: a ban's memory): 88 bytes, jemalloc's 96-byte class.
    assert_eq!(std::mem::size_of::<Wide>(), 88);
    assert_eq!((packed.view(Limiter::clone), packed.ban()), (l.clone(), Some(ban)));
    packed.update(|_| {});
    assert_eq!(packed.ban(), Some(ban));
    let copy = packed.clone();
    assert_eq!((copy.view(Limiter::clone), copy.ban()), (l.clone(), Some(ban)));
    packed.set_ban(None);
    assert_ne!(packed.words[0] & tag_mask(), TAG_WIDE, "compact again");
    assert_eq!((packed.view(Limiter::clone), packed.ban()), (l, None));
    drop(copy);
}
