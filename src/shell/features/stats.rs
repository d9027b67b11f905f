//! The `INFO ratelimit` counters: per command, calls, admitted, limited and errors; the
//! waiting room's. `shell::info` assembles the section.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The commands counted, by their `INFO` field prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    Token,
    Period,
    Slide,
    Leaky,
    Throttle,
    All,
    Refund,
    Charge,
    Acquire,
    Release,
    Peek,
    Info,
    Restore,
    Hit,
    Policy,
    Top,
}

impl Tally {
    const ALL: [Tally; 16] = [
        Tally::Token,
        Tally::Period,
        Tally::Slide,
        Tally::Leaky,
        Tally::Throttle,
        Tally::All,
        Tally::Refund,
        Tally::Charge,
        Tally::Acquire,
        Tally::Release,
        Tally::Peek,
        Tally::Info,
        Tally::Restore,
        Tally::Hit,
        Tally::Policy,
        Tally::Top,
    ];

    fn name(self) -> &'static str {
        match self {
            Tally::Token => "token",
            Tally::Period => "period",
            Tally::Slide => "slide",
            Tally::Leaky => "leaky",
            Tally::Throttle => "throttle",
            Tally::All => "all",
            Tally::Refund => "refund",
            Tally::Charge => "charge",
            Tally::Acquire => "acquire",
            Tally::Release => "release",
            Tally::Peek => "peek",
            Tally::Info => "info",
            Tally::Restore => "restore",
            Tally::Hit => "hit",
            Tally::Policy => "policy",
            Tally::Top => "top",
        }
    }
}

/// How a call ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    Admitted,
    Limited,
    /// A call that neither admits nor limits (`RL.PEEK`, `RL.INFO`, `RL.RESTORE`).
    Answered,
    /// A call that waits (`WAIT`): admitted or limited later ([`record_late`]).
    Blocked,
    Error,
}

struct Counters {
    calls: AtomicU64,
    admitted: AtomicU64,
    limited: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    const fn new() -> Self {
        Counters {
            calls: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            limited: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }
}

static COUNTERS: [Counters; Tally::ALL.len()] = [const { Counters::new() }; Tally::ALL.len()];

/// Counts one call (calls include errors).
pub fn record(tally: Tally, outcome: Counted) {
    let Some(c) = COUNTERS.get(tally as usize) else {
        return;
    };
    c.calls.fetch_add(1, Ordering::Relaxed);
    let field = match outcome {
        Counted::Admitted => &c.admitted,
        Counted::Limited => &c.limited,
        Counted::Error => &c.errors,
        Counted::Answered | Counted::Blocked => return,
    };
    field.fetch_add(1, Ordering::Relaxed);
}

/// Counts how a call that waited ended (its call was counted when it blocked).
pub fn record_late(tally: Tally, outcome: Counted) {
    let Some(c) = COUNTERS.get(tally as usize) else {
        return;
    };
    match outcome {
        Counted::Admitted => c.admitted.fetch_add(1, Ordering::Relaxed),
        Counted::Limited => c.limited.fetch_add(1, Ordering::Relaxed),
        Counted::Error => c.errors.fetch_add(1, Ordering::Relaxed),
        _ => 0,
    };
}

/// Clients waiting now (`WAIT`), requests admitted after waiting, and waits that timed out.
static WAITING: AtomicI64 = AtomicI64::new(0);
static WAIT_ADMITTED: AtomicU64 = AtomicU64::new(0);
static WAIT_TIMEOUTS: AtomicU64 = AtomicU64::new(0);

pub fn waiting_changed(by: i64) {
    WAITING.fetch_add(by, Ordering::Relaxed);
}

pub fn wait_admitted() {
    WAIT_ADMITTED.fetch_add(1, Ordering::Relaxed);
}

pub fn wait_timed_out() {
    WAIT_TIMEOUTS.fetch_add(1, Ordering::Relaxed);
}

/// The counters' `INFO` fields: each command's calls, admitted, limited and errors, then the
/// waiting room's (`waiting`, `wait_admitted`, `wait_timeouts`).
pub fn info_fields() -> Vec<(String, i64)> {
    let mut fields: Vec<(String, i64)> = Vec::new();
    for tally in Tally::ALL {
        let Some(c) = COUNTERS.get(tally as usize) else {
            continue;
        };
        for (suffix, value) in [
            ("calls", &c.calls),
            ("admitted", &c.admitted),
            ("limited", &c.limited),
            ("errors", &c.errors),
        ] {
            let v = i64::try_from(value.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
            fields.push((format!("{}_{suffix}", tally.name()), v));
        }
    }
    for (name, value) in [
        ("waiting", WAITING.load(Ordering::Relaxed)),
        ("wait_admitted", i64::try_from(WAIT_ADMITTED.load(Ordering::Relaxed)).unwrap_or(i64::MAX)),
        ("wait_timeouts", i64::try_from(WAIT_TIMEOUTS.load(Ordering::Relaxed)).unwrap_or(i64::MAX)),
    ] {
        fields.push((name.to_string(), value));
    }
    fields
}
