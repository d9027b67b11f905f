//! Concurrency leases (`RL.ACQUIRE` / `RL.RELEASE`): at most `limit` holders at once, where a
//! holder that crashes does not keep its slot forever.
//!
//! # Terms
//! * **lease**: one holder's slot, named by an **id** (1 … 64 bytes, binary safe). A lease is
//!   *held* from its acquisition until it is released or until its **expiry**
//!   (`acquired + lease_ms`), when it *lapses* by itself.
//! * **held(t)**: the leases whose expiry is after `t` (a lease expiring at `e` is held at
//!   every `t < e`, lapsed at `t ≥ e`).
//! * **acquire**: admitted iff `held(now') < limit`, or the id is already held (a
//!   **renewal**: `expires := now' + lease_ms`, admitted whatever the count — re-acquiring is
//!   idempotent and a heartbeat extends a lease). An admitted acquisition without an id gets
//!   a **server id**.
//! * **lifetime**: the time from a key's first acquisition (when no lease was held) until its
//!   last lease lapses or is released; the state then counts as missing and the next
//!   acquisition starts a new lifetime. **created** (`created_ms`) is the instant a lifetime
//!   began.
//! * **sequence** (`seq`): the number part of the last server id of this lifetime. A server
//!   id is `<created_ms>-<seq + 1>` (decimal ASCII), so ids are unique within a lifetime and
//!   across lifetimes that start in different milliseconds. An acquired id of that very form
//!   (`<created_ms>-<n>`, canonical decimal, `n > seq`) sets `seq = n`: a replica or an AOF
//!   replay, which sees the server id as an explicit `ID`, continues the same sequence.
//!   Invariant: every held id of that form has `n ≤ seq`, so a server id is never held.
//!
//! # Reply (the `RL.*` five fields; the shell adds the id as a sixth)
//! `remaining = max(0, limit − held)` after the call; `retry_after` (refused) = until
//! `held < limit`, i.e. the `(held − limit + 1)`-th earliest expiry (the earliest one unless a
//! lowered `limit` left more leases held); `reset_after` = until the last lease lapses (the
//! key's expiry).
//!
//! # Parameter changes
//! A new `limit` applies at once (held leases stay, and keep counting); a new `lease_ms`
//! applies to leases taken or renewed from then on.
//!
//! # Time
//! `now' = max(now, updated_ms)` of a live state; all reply times are measured from `now'`.
//! A state whose last lease has lapsed counts as missing. A refused call and a dry run change
//! nothing; an admitted call drops the lapsed leases and stores `updated_ms = now'`.
//!
//! # Memory
//! 24 bytes per lease (an expiry and a boxed id) plus the id's own bytes (one allocation,
//! rounded up to the allocator's size class), in one array whose capacity grows by doubling
//! and shrinks by half once three quarters are unused (so an acquisition or a release moves
//! it only now and then); `MEMORY USAGE` counts the capacity allocated.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::algorithms::arith::{add_ms, elapsed_ms};
use crate::algorithms::decision::{saturate_i64, Decision};
use crate::algorithms::state::{info_int, live, CorruptState, Stored};
use crate::grammar::args::{MAX_AT_MS, MAX_COUNT, MAX_DURATION_MS};
use crate::grammar::error::ArgError;

/// Default of the module configuration `ratelimit.lease-max`: the largest `limit` an
/// `RL.ACQUIRE` accepts.
pub const DEFAULT_LEASE_MAX: u64 = 10_000;
/// The largest value `ratelimit.lease-max` may take, and so the most leases a key can hold.
pub const MAX_LEASE_MAX: u64 = 1_000_000;
/// The longest lease id, in bytes (the shortest is 1).
pub const MAX_ID_LEN: usize = 64;

/// Whether `id` is an acceptable lease id: 1 … 64 bytes (any bytes).
pub fn valid_id(id: &[u8]) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
}

/// A lease id held by value (1 … 64 bytes, no heap): what a request names and what a reply
/// returns. Read it as a byte slice (`Deref`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId {
    len: u8,
    bytes: [u8; MAX_ID_LEN],
}

impl LeaseId {
    /// `id` if it is an acceptable lease id ([`valid_id`]).
    pub fn new(id: &[u8]) -> Option<LeaseId> {
        if !valid_id(id) {
            return None;
        }
        let mut bytes = [0u8; MAX_ID_LEN];
        bytes.get_mut(..id.len())?.copy_from_slice(id);
        Some(LeaseId { len: id.len() as u8, bytes })
    }

    /// The server id `<created_ms>-<n>` (at most 41 bytes).
    fn server(created_ms: i64, n: u64) -> LeaseId {
        let (mut created, mut number) = ([0u8; 20], [0u8; 20]);
        let parts: [&[u8]; 3] =
            [decimal(created_ms, &mut created), b"-", decimal_u64(n, &mut number)];
        let mut bytes = [0u8; MAX_ID_LEN];
        let mut len = 0;
        for &byte in parts.iter().flat_map(|part| part.iter()) {
            if let Some(slot) = bytes.get_mut(len) {
                *slot = byte;
                len += 1;
            }
        }
        LeaseId { len: len as u8, bytes }
    }
}

impl std::ops::Deref for LeaseId {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

impl std::fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeaseId({:?})", String::from_utf8_lossy(self))
    }
}

impl PartialEq<Vec<u8>> for LeaseId {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

/// `n` in decimal ASCII, written at the end of `buf`.
fn decimal_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        if let Some(slot) = buf.get_mut(at) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    buf.get(at..).unwrap_or(&[])
}

/// `n` in decimal ASCII with its sign, written at the end of `buf` (20 bytes hold `i64::MIN`).
fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let len = decimal_u64(n.unsigned_abs(), buf).len();
    let mut at = buf.len() - len;
    if n < 0 && at > 0 {
        at -= 1;
        if let Some(slot) = buf.get_mut(at) {
            *slot = b'-';
        }
    }
    buf.get(at..).unwrap_or(&[])
}

/// The parameters of one `RL.ACQUIRE` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseParams {
    /// Most leases held at once: 1 … `ratelimit.lease-max`.
    pub limit: u64,
    /// How long a lease taken or renewed by this call is held (ms): 1 ms … 10 years.
    pub lease_ms: u64,
}

impl LeaseParams {
    /// Validates a parameter set: `limit` 1 … `lease_max` (`ratelimit.lease-max`, itself at
    /// most 10^6), `lease_ms` 1 ms … 10 years.
    pub fn new(limit: u64, lease_ms: u64, lease_max: u64) -> Result<Self, ArgError> {
        let lease_max = lease_max.clamp(1, MAX_LEASE_MAX);
        if !(1..=MAX_COUNT).contains(&limit) {
            return Err(ArgError::Integer { name: "limit", min: 1, max: i128::from(lease_max) });
        }
        if limit > lease_max {
            return Err(ArgError::Invalid(format!(
                "limit {limit} is above ratelimit.lease-max ({lease_max}) for leases"
            )));
        }
        if !(1..=MAX_DURATION_MS).contains(&lease_ms) {
            return Err(ArgError::DurationRange {
                name: "lease",
                min_ms: 1,
                max_ms: i128::from(MAX_DURATION_MS),
            });
        }
        Ok(LeaseParams { limit, lease_ms })
    }
}

/// One held lease: its id and the instant it lapses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The instant the lease lapses (unix ms): held at every `t < expires_ms`.
    pub expires_ms: i64,
    /// The lease id, 1 … 64 bytes.
    pub id: Box<[u8]>,
}

impl Lease {
    /// The order leases are stored in: by expiry, then by id (one canonical order, so equal
    /// lease sets are equal states whatever the history).
    fn order(&self, expires_ms: i64, id: &[u8]) -> Ordering {
        self.expires_ms.cmp(&expires_ms).then_with(|| (*self.id).cmp(id))
    }
}

/// The leases of a key, as stored: the parameters of the last admitted acquisition, the
/// lifetime's `created_ms` and sequence, the held leases, and `updated_ms`, the instant of the
/// last change (an admitted acquisition or a release).
///
/// Invariants (checked by [`LeaseState::validate`]): at least one lease; leases sorted by
/// `(expires_ms, id)`, ids distinct, every expiry after `updated_ms`; `created_ms ≤
/// updated_ms`; every held id of the form `<created_ms>-<n>` has `n ≤ seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    pub limit: u64,
    pub lease_ms: u64,
    /// The instant the key's current lifetime began (its first acquisition).
    pub created_ms: i64,
    /// The last sequence number of this lifetime (0 before any).
    pub seq: u64,
    pub updated_ms: i64,
    /// Sorted by `(expires_ms, id)`; read with [`LeaseState::leases`]. Its capacity is
    /// amortized (see the module docs on memory).
    leases: Vec<Lease>,
}

/// What `RL.ACQUIRE` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireOutcome {
    /// The five `RL.*` reply fields.
    pub decision: Decision,
    /// The id of the lease admitted (the call's `ID`, or the server id); `None` when refused
    /// or under `DRYRUN` (the reply's nil sixth field).
    pub id: Option<LeaseId>,
    /// The state to store: `Some` exactly when the call is admitted and committed.
    pub next: Option<LeaseState>,
}

/// What `RL.RELEASE` did to a stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// No such lease is held (or nothing is live): nothing changes, reply `0`.
    NotHeld,
    /// The lease is gone (reply `1`): the new state, or `None` when no lease is left (delete
    /// the key).
    Released(Option<LeaseState>),
}

/// The judgement of one acquisition against the leases held at `now'`, before anything is
/// built (shared by [`acquire`] and [`acquire_in_place`]).
struct Plan {
    decision: Decision,
    /// `now'`.
    now: i64,
    /// Stored leases that have lapsed at `now'` (a prefix, the order being by expiry).
    lapsed: usize,
    /// The index (among all stored leases) of the lease a renewal renews.
    renewed: Option<usize>,
    /// Admitted: the lease to add, and the lifetime's `created_ms` and sequence after it.
    admitted: Option<Admitted>,
}

struct Admitted {
    id: LeaseId,
    expires_ms: i64,
    created_ms: i64,
    seq: u64,
}

fn plan(live: Option<&LeaseState>, params: &LeaseParams, now_ms: i64, id: Option<&[u8]>) -> Plan {
    let now = live.map_or(now_ms, |s| now_ms.max(s.updated_ms));
    let all: &[Lease] = live.map_or(&[], |s| &s.leases);
    let lapsed = lapsed_count(all, now);
    let held_leases = all.get(lapsed..).unwrap_or(&[]);
    let held = held_leases.len() as u64;
    let until = |t: i64| saturate_i64(elapsed_ms(now, t));
    let last_expiry = held_leases.last().map_or(now, |l| l.expires_ms);
    let renewed = id.and_then(|id| find_id(held_leases, id));
    let (created_ms, seq) = live.map_or((now, 0), |s| (s.created_ms, s.seq));
    let refused = |retry_after_ms: i64| Plan {
        decision: Decision {
            allowed: false,
            limit: params.limit,
            remaining: params.limit.saturating_sub(held),
            retry_after_ms,
            reset_after_ms: until(last_expiry),
        },
        now,
        lapsed,
        renewed: None,
        admitted: None,
    };
    if id.is_some_and(|id| !valid_id(id)) {
        return refused(-1);
    }
    if renewed.is_none() && held >= params.limit {
        // The (held − limit + 1)-th earliest expiry: then held < limit.
        let k = usize::try_from(held - params.limit).unwrap_or(usize::MAX);
        return refused(held_leases.get(k).map_or(-1, |l| until(l.expires_ms)));
    }
    let (id, seq) = match id {
        Some(id) => match LeaseId::new(id) {
            Some(given) => (given, sequence_number(created_ms, id).map_or(seq, |n| n.max(seq))),
            None => return refused(-1),
        },
        None => match seq.checked_add(1) {
            Some(n) => (LeaseId::server(created_ms, n), n),
            // The sequence is exhausted (only an explicit `ID` of `<created>-18446744073709551615`
            // gets here): no server id until the lifetime ends.
            None => return refused(until(last_expiry)),
        },
    };
    let expires_ms = add_ms(now, u128::from(params.lease_ms));
    let held_after = if renewed.is_some() { held } else { held + 1 };
    let others_last = held_leases
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != renewed)
        .map(|(_, l)| l.expires_ms)
        .next_back()
        .unwrap_or(now);
    let reset_at = expires_ms.max(others_last);
    Plan {
        decision: Decision {
            allowed: true,
            limit: params.limit,
            remaining: params.limit.saturating_sub(held_after),
            retry_after_ms: 0,
            reset_after_ms: until(reset_at),
        },
        now,
        lapsed,
        renewed: renewed.map(|i| i + lapsed),
        admitted: Some(Admitted { id, expires_ms, created_ms, seq }),
    }
}

/// `n` if `id` is `<created_ms>-<n>` with `n` in canonical decimal (no sign, no leading zero,
/// at least 1): the form of this lifetime's server ids.
pub fn sequence_number(created_ms: i64, id: &[u8]) -> Option<u64> {
    // Most given ids are not of this form: they fail on the first byte.
    if !id.first().is_some_and(|b| b.is_ascii_digit() || *b == b'-') {
        return None;
    }
    let mut buf = [0u8; 20];
    let digits = id.strip_prefix(decimal(created_ms, &mut buf))?.strip_prefix(b"-")?;
    if digits.first().is_none_or(|d| !(b'1'..=b'9').contains(d)) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, d| {
        if d.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        } else {
            None
        }
    })
}

/// The index of the lease with this id, searched from the newest expiry back. Ids not held
/// are only known after looking at every lease, so the lengths are compared four at a time
/// first (the bytes only where a length matches).
fn find_id(leases: &[Lease], id: &[u8]) -> Option<usize> {
    let len = id.len();
    let same = |l: &Lease| l.id.len() == len && *l.id == *id;
    let mut chunks = leases.rchunks_exact(4);
    let mut end = leases.len();
    for chunk in &mut chunks {
        end -= chunk.len();
        if chunk.iter().any(|l| l.id.len() == len) {
            if let Some(i) = chunk.iter().rposition(same) {
                return Some(end + i);
            }
        }
    }
    chunks.remainder().iter().rposition(same)
}

/// How many of the leases (in stored order) have lapsed at `now`: a prefix, usually empty.
fn lapsed_count(leases: &[Lease], now: i64) -> usize {
    match leases.first() {
        Some(first) if first.expires_ms <= now => leases.partition_point(|l| l.expires_ms <= now),
        _ => 0,
    }
}

/// Inserts `lease` at its place in the `(expires_ms, id)` order (usually the end: a lease
/// taken now lapses after those taken before it with the same duration).
fn insert_sorted(leases: &mut Vec<Lease>, lease: Lease) {
    let after_all =
        leases.last().is_none_or(|l| l.order(lease.expires_ms, &lease.id) == Ordering::Less);
    if after_all {
        leases.push(lease);
        return;
    }
    let at = leases.partition_point(|l| l.order(lease.expires_ms, &lease.id) == Ordering::Less);
    leases.insert(at, lease);
}

/// `RL.ACQUIRE` at `now_ms` against the stored state (`None`: the key is empty; a state whose
/// last lease has lapsed counts as missing), taking a lease for `id` (`None`: a server id).
///
/// Admitted iff the id is held (a renewal) or `held(now') < limit`. With `commit` (not a dry
/// run) an admitted call returns the state to store: lapsed leases dropped, the lease added
/// or renewed with `expires = now' + lease_ms`, the parameters stored, `updated_ms = now'`.
/// An `id` outside 1 … 64 bytes is refused (`retry_after` −1); the parser never passes one.
pub fn acquire(
    stored: Option<&LeaseState>,
    params: &LeaseParams,
    now_ms: i64,
    id: Option<&[u8]>,
    commit: bool,
) -> AcquireOutcome {
    let live = live(stored, now_ms);
    let plan = plan(live, params, now_ms, id);
    let decision = plan.decision;
    let Some(admitted) = plan.admitted.filter(|_| commit) else {
        return AcquireOutcome { decision, id: None, next: None };
    };
    let all: &[Lease] = live.map_or(&[], |s| &s.leases);
    let mut leases = Vec::with_capacity(all.len().saturating_sub(plan.lapsed) + 1);
    leases.extend(
        all.iter()
            .enumerate()
            .skip(plan.lapsed)
            .filter(|(i, _)| Some(*i) != plan.renewed)
            .map(|(_, l)| l.clone()),
    );
    let lease = Lease { expires_ms: admitted.expires_ms, id: Box::from(&*admitted.id) };
    insert_sorted(&mut leases, lease);
    let next = LeaseState {
        limit: params.limit,
        lease_ms: params.lease_ms,
        created_ms: admitted.created_ms,
        seq: admitted.seq,
        updated_ms: plan.now,
        leases,
    };
    AcquireOutcome { decision, id: Some(admitted.id), next: Some(next) }
}

/// [`acquire`] on a stored state that is updated in place when admitted and `commit`
/// (without copying the other leases). `state` may be past its last lease's expiry (it then
/// counts as missing and is replaced by a new lifetime). Returns the decision, the admitted
/// id (`None` when refused or not committed) and whether `state` changed.
pub fn acquire_in_place(
    state: &mut LeaseState,
    params: &LeaseParams,
    now_ms: i64,
    id: Option<&[u8]>,
    commit: bool,
) -> (Decision, Option<LeaseId>, bool) {
    let is_live = live(Some(&*state), now_ms).is_some();
    let plan = plan(is_live.then_some(&*state), params, now_ms, id);
    let decision = plan.decision;
    let Some(admitted) = plan.admitted.filter(|_| commit) else {
        return (decision, None, false);
    };
    let mut leases = std::mem::take(&mut state.leases);
    if !is_live {
        leases.clear();
    }
    // A renewal's index counts the lapsed prefix: remove it before draining the prefix.
    let renewed = plan.renewed.filter(|_| is_live).map(|i| leases.remove(i));
    drop_lapsed(&mut leases, plan.lapsed);
    let id_box = match renewed {
        Some(lease) => lease.id,
        None => Box::from(&*admitted.id),
    };
    // Amortized: the array doubles when full.
    insert_sorted(&mut leases, Lease { expires_ms: admitted.expires_ms, id: id_box });
    *state = LeaseState {
        limit: params.limit,
        lease_ms: params.lease_ms,
        created_ms: admitted.created_ms,
        seq: admitted.seq,
        updated_ms: plan.now,
        leases,
    };
    (decision, Some(admitted.id), true)
}

/// `RL.RELEASE` at `now_ms`: removes the lease `id` if it is held at `now'`. The lapsed
/// leases are dropped with it and `updated_ms` becomes `now'`; a state left without leases
/// is `Released(None)` (delete the key). A state whose last lease has lapsed holds nothing.
pub fn release(stored: &LeaseState, now_ms: i64, id: &[u8]) -> Release {
    let mut copy = stored.clone();
    match release_in_place(&mut copy, now_ms, id) {
        ReleaseChange::NotHeld => Release::NotHeld,
        ReleaseChange::Emptied => Release::Released(None),
        ReleaseChange::Released => Release::Released(Some(copy)),
    }
}

/// Drops the first `lapsed` leases and gives back capacity once three quarters of it are
/// unused (keeping room to double), so that a held count going up and down by one moves no
/// memory.
fn drop_lapsed(leases: &mut Vec<Lease>, lapsed: usize) {
    if lapsed > 0 {
        leases.drain(..lapsed.min(leases.len()));
    }
    if leases.len() <= leases.capacity() / 4 {
        leases.shrink_to(leases.len() * 2);
    }
}

/// What [`release_in_place`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseChange {
    /// No such lease is held: the state is unchanged.
    NotHeld,
    /// The lease is gone and others remain: the state was updated.
    Released,
    /// The lease is gone and none remains: delete the key (the state is left empty).
    Emptied,
}

/// [`release`] updating the stored state in place.
pub fn release_in_place(state: &mut LeaseState, now_ms: i64, id: &[u8]) -> ReleaseChange {
    if live(Some(&*state), now_ms).is_none() {
        return ReleaseChange::NotHeld;
    }
    let now = now_ms.max(state.updated_ms);
    let lapsed = lapsed_count(&state.leases, now);
    // From the newest expiry back: a lease released soon after it was taken (a short
    // critical section) is found first; any other costs at most one scan of the held leases.
    let held = state.leases.get(lapsed..).unwrap_or(&[]);
    let Some(at) = find_id(held, id) else {
        return ReleaseChange::NotHeld;
    };
    state.leases.remove(at + lapsed);
    drop_lapsed(&mut state.leases, lapsed);
    state.updated_ms = now;
    if state.leases.is_empty() {
        ReleaseChange::Emptied
    } else {
        ReleaseChange::Released
    }
}

impl LeaseState {
    /// A state from its parts (a decoder's; check it with [`LeaseState::validate`]). The
    /// leases are `(id, expires_ms)` pairs, in the stored order.
    pub fn from_parts(
        limit: u64,
        lease_ms: u64,
        created_ms: i64,
        seq: u64,
        updated_ms: i64,
        leases: Vec<(Vec<u8>, i64)>,
    ) -> LeaseState {
        let leases = leases
            .into_iter()
            .map(|(id, expires_ms)| Lease { expires_ms, id: id.into_boxed_slice() })
            .collect();
        LeaseState { limit, lease_ms, created_ms, seq, updated_ms, leases }
    }

    /// The parameters of the last admitted acquisition.
    pub fn params(&self) -> LeaseParams {
        LeaseParams { limit: self.limit, lease_ms: self.lease_ms }
    }

    /// The stored leases as `(id, expires_ms)`, by expiry (then id). All are held at
    /// `updated_ms`; some may have lapsed since.
    pub fn leases(&self) -> impl DoubleEndedIterator<Item = (&[u8], i64)> + ExactSizeIterator {
        self.leases.iter().map(|l| (&*l.id, l.expires_ms))
    }

    /// The leases held at `now_ms` (0 once the state counts as missing).
    pub fn held_at(&self, now_ms: i64) -> u64 {
        let now = now_ms.max(self.updated_ms);
        self.leases.iter().filter(|l| l.expires_ms > now).count() as u64
    }

    /// What `RL.PEEK` shows: the reply a `DRYRUN` acquisition without `ID` with the stored
    /// parameters would get at `now_ms`.
    pub fn peek(&self, now_ms: i64) -> Decision {
        acquire(Some(self), &self.params(), now_ms, None, false).decision
    }

    /// Heap bytes owned beyond the value itself: 24 bytes per lease the array has room for
    /// (its capacity) plus the ids.
    pub fn heap_bytes(&self) -> usize {
        self.leases.capacity() * std::mem::size_of::<Lease>()
            + self.leases.iter().map(|l| l.id.len()).sum::<usize>()
    }

    /// Checks the state is one admitted calls can produce (see [`LeaseState`]'s invariants):
    /// parameters in range (`limit` at most 10^6, the largest `ratelimit.lease-max`; the
    /// current configuration is not known here), at most 10^6 leases, ids of 1 … 64 bytes.
    pub fn validate(&self) -> Result<(), CorruptState> {
        if !(1..=MAX_LEASE_MAX).contains(&self.limit) {
            return Err(CorruptState("lease limit out of range"));
        }
        if !(1..=MAX_DURATION_MS).contains(&self.lease_ms) {
            return Err(CorruptState("lease duration out of range"));
        }
        if !(0..=MAX_AT_MS).contains(&self.updated_ms)
            || !(0..=self.updated_ms).contains(&self.created_ms)
        {
            return Err(CorruptState("lease times out of range"));
        }
        if self.leases.is_empty() || self.leases.len() as u64 > MAX_LEASE_MAX {
            return Err(CorruptState("lease count out of range"));
        }
        let latest = add_ms(self.updated_ms, u128::from(MAX_DURATION_MS));
        let mut ids = HashSet::with_capacity(self.leases.len());
        let mut previous: Option<&Lease> = None;
        for lease in self.leases.iter() {
            if !valid_id(&lease.id) {
                return Err(CorruptState("lease id length out of range"));
            }
            if lease.expires_ms <= self.updated_ms || lease.expires_ms > latest {
                return Err(CorruptState("lease expiry out of range"));
            }
            if previous.is_some_and(|p| p.order(lease.expires_ms, &lease.id) != Ordering::Less) {
                return Err(CorruptState("leases out of order"));
            }
            if !ids.insert(&*lease.id) {
                return Err(CorruptState("lease id held twice"));
            }
            if sequence_number(self.created_ms, &lease.id).is_some_and(|n| n > self.seq) {
                return Err(CorruptState("lease id ahead of the sequence"));
            }
            previous = Some(lease);
        }
        Ok(())
    }
}

impl Stored for LeaseState {
    fn updated_ms(&self) -> i64 {
        self.updated_ms
    }

    /// The last lease's expiry (the key expires then).
    fn reset_at_ms(&self) -> i64 {
        self.leases.last().map_or(self.updated_ms, |l| l.expires_ms)
    }

    /// `limit`, `lease_ms`, `held` (at `updated_ms`). The shell adds the `leases` list from
    /// [`LeaseState::leases`].
    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("limit", info_int(self.limit)),
            ("lease_ms", info_int(self.lease_ms)),
            ("held", info_int(self.held_at(self.updated_ms))),
        ]
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
