//! `RL.CHARGE` on a key (`try_charge_key`): which algorithms take debt, what a key holding
//! nothing live answers, bans, and the reply.

use super::*;
use crate::algorithms::ban::Ban;
use crate::algorithms::gcra::{self, GcraParams};
use crate::algorithms::slide::{self, SlideParams};
use crate::store::held::Expanded;

const T0: i64 = 1_700_000_000_000;

fn gcra_key(taken: u64) -> Expanded {
    let p = GcraParams::new(4, 1, 1).unwrap();
    let s = gcra::evaluate(None, &p, T0, taken).next.unwrap();
    Expanded { limiter: Limiter::Gcra(s), ban: None }
}

#[test]
fn a_charge_past_the_limit_is_a_debt_refused_until_paid() {
    let mut key = gcra_key(5);
    let v = try_charge_key(Some(&mut key), 2, T0).unwrap();
    // 5 permits, one back per second, 7 in use: a request of 1 waits 3 s; full after 7 s.
    assert_eq!(v.reply, Some([0, 5, 0, 3000, 7000]));
    assert_eq!(v.change, ChargeChange::Updated { expire_at_ms: T0 + 7000 });
    assert!(key.limiter.in_debt());
    // Later, still in debt: measured from then.
    let v = try_charge_key(Some(&mut key), 1, T0 + 1000).unwrap();
    assert_eq!(v.reply, Some([0, 5, 0, 3000, 7000]));
}

#[test]
fn nothing_live_is_not_charged() {
    assert_eq!(
        try_charge_key::<Expanded>(None, 3, T0),
        Ok(ChargeVerdict { reply: None, change: ChargeChange::Unchanged })
    );
    let mut key = gcra_key(1);
    let expired = try_charge_key(Some(&mut key), 3, T0 + 1000).unwrap();
    assert_eq!(expired, ChargeVerdict { reply: None, change: ChargeChange::Unchanged });
    assert_eq!(key, gcra_key(1));
}

#[test]
fn sliding_windows_take_no_debt() {
    let p = SlideParams::new(5, 1000, None, 1000).unwrap();
    let s = slide::evaluate(None, &p, T0, 1).next.unwrap();
    let mut key = Expanded { limiter: Limiter::Slide(s), ban: None };
    let before = key.clone();
    assert_eq!(
        try_charge_key(Some(&mut key), 1, T0),
        Err(KeyError::NoDebt { held: crate::algorithms::limiter::Algorithm::Slide })
    );
    assert_eq!(key, before);
    // Expired: nothing live, no error.
    assert!(try_charge_key(Some(&mut key), 1, T0 + 60_000).unwrap().reply.is_none());
}

#[test]
fn a_debt_beyond_the_bound_is_refused_whole() {
    let mut key = gcra_key(1);
    let before = key.clone();
    let huge = crate::grammar::args::MAX_COUNT;
    assert_eq!(try_charge_key(Some(&mut key), huge, T0), Err(KeyError::DebtTooLarge));
    assert_eq!(key, before);
}

#[test]
fn a_ban_in_force_keeps_the_key_at_least_until_it_ends() {
    let mut key = gcra_key(1);
    key.ban = Some(Ban::start(T0, 60_000));
    let v = try_charge_key(Some(&mut key), 1, T0).unwrap();
    assert_eq!(v.change, ChargeChange::Updated { expire_at_ms: T0 + 60_000 });
    assert_eq!(v.reply.map(|r| r[0]), Some(0), "the ban refuses");
    assert_eq!(key.ban, Some(Ban::start(T0, 60_000)), "a charge never changes a ban");
}
