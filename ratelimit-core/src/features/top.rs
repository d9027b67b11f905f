//! `RL.TOP`: which keys are refused most often *now* — a bounded heavy-hitters summary of
//! refusals, as a pure structure the shell feeds on the refusal path and reads with the clock.
//!
//! Terms:
//! * **refusal** — one limiting call answered `allowed = 0` (not a dry run). Each counts 1,
//!   whatever its cost;
//! * **identity** — what a counter counts: a key (its first [`KEY_CAP`] bytes) and the policy
//!   it was refused under (its **tag**, the first [`TAG_CAP`] bytes of the policy's name; empty
//!   for the direct commands);
//! * **window** — refusals are counted per window of `window_ms`, aligned to the unix epoch
//!   (window `i` holds the instants `[i·window_ms, (i+1)·window_ms)`). Two windows are kept:
//!   the current one and the one before; a refusal counts in the current window, a read sees
//!   both, so it covers the last `window_ms` to `2·window_ms`. When the clock enters the next
//!   window the current becomes the previous and the older one is forgotten; after a gap of
//!   two windows or more both are empty. An instant earlier than the current window (the
//!   clock stepped back) counts in the current window;
//! * **summary** — one window's counters: Space-Saving (Metwally, Agrawal, El Abbadi, 2005)
//!   with `k` counters. A refused identity that has a counter adds 1 to it; one that has none
//!   takes a free counter (count 1) or, when all `k` are taken, the counter with the least
//!   count (the least recently refused among equals): it inherits that count `m` plus 1, and
//!   `m` is its **error** (the refusals it may have been credited for another identity).
//!
//! Accuracy, per window of `N` refusals (the classic Space-Saving bounds). Let `E` be the
//! largest count a counter had when it was taken over (0 while no counter was ever taken
//! over); `E ≤ N / k`, because the least of `k` counters that add up to at most `N` is at most
//! `N / k`. Then:
//! * an identity with a counter was refused `f` times with `count − E ≤ count − error ≤ f ≤
//!   count` (counts overestimate, by at most the error);
//! * an identity without a counter was refused at most `E ≤ N / k` times — so every identity
//!   refused more than `N / k` times has a counter.
//!
//! A read adds up the two windows: an identity refused `f` times in both (`N` refusals in
//! both) is reported with a count within `E_prev + E_cur ≤ N / k` of `f` (above it when it
//! held a counter in both windows, possibly below when it held one in only one of them), and
//! every identity refused more than `N / k` times in both is reported (it was refused more
//! than `N_w / k` times in at least one window `w`). A read grouped by key (no policy filter)
//! adds up the key's identities under each policy, and their errors with them.
//!
//! Cost: a refusal hashes its identity once (a folded-multiply hash keyed with random seeds
//! per summary, so keys chosen by an attacker cannot aim at long probe runs), probes an
//! open-addressing table of at least `4k` slots and moves one counter between buckets of equal
//! counts (Metwally's *stream summary*: a list of buckets in increasing count, each a list of
//! its counters, least recently refused first) — `O(1)`, nothing allocated once the `k`
//! counters exist: a counter holds its identity's bytes inline.

use std::cmp::Ordering;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;

use crate::grammar::top::TopPolicy;

/// Bytes of a key kept: longer keys are counted under their first `KEY_CAP` bytes.
pub const KEY_CAP: usize = 128;
/// Bytes of a policy name kept as a tag.
pub const TAG_CAP: usize = 64;
/// Default number of counters per window (`ratelimit.top-k`).
pub const DEFAULT_K: usize = 256;
/// Largest `k` accepted (two windows of counters of ~230 bytes each: ~4.6 MB).
pub const MAX_K: usize = 10_000;
/// Default window (`ratelimit.top-window`): a minute.
pub const DEFAULT_WINDOW_MS: i64 = 60_000;

/// No counter, no bucket (an empty table slot, the end of a list).
const NONE: u32 = u32::MAX;

/// One counter: an identity, its refusals in the window, and when it was last refused.
#[derive(Clone)]
struct Counter {
    hash: u64,
    count: u64,
    last_ms: i64,
    /// Its table slot.
    slot: u32,
    /// The bucket of its count, and its neighbours in that bucket's list.
    bucket: u32,
    prev: u32,
    next: u32,
    tag_len: u8,
    key_len: u8,
    /// The tag, then the key.
    bytes: [u8; TAG_CAP + KEY_CAP],
}

impl Counter {
    fn tag(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.tag_len)).unwrap_or(&[])
    }

    fn key(&self) -> &[u8] {
        let start = usize::from(self.tag_len);
        self.bytes.get(start..start + usize::from(self.key_len)).unwrap_or(&[])
    }

    fn is(&self, hash: u64, tag: &[u8], key: &[u8]) -> bool {
        self.hash == hash && self.tag() == tag && self.key() == key
    }

    /// Sets the identity (both already cut to their caps).
    fn set_identity(&mut self, hash: u64, tag: &[u8], key: &[u8]) {
        self.hash = hash;
        self.tag_len = tag.len() as u8;
        self.key_len = key.len() as u8;
        if !tag.is_empty() {
            if let Some(dst) = self.bytes.get_mut(..tag.len()) {
                dst.copy_from_slice(tag);
            }
        }
        if let Some(dst) = self.bytes.get_mut(tag.len()..tag.len() + key.len()) {
            dst.copy_from_slice(key);
        }
    }
}

/// The counters that have one count, as a list (least recently refused first), in the list of
/// buckets by increasing count.
#[derive(Clone, Copy)]
struct Bucket {
    count: u64,
    first: u32,
    last: u32,
    prev: u32,
    next: u32,
}

/// One window's Space-Saving summary.
#[derive(Clone)]
struct Summary {
    counters: Vec<Counter>,
    /// Buckets in use are linked from `least`; unused ones wait in `free`.
    buckets: Vec<Bucket>,
    free: Vec<u32>,
    /// The bucket of the least count ([`NONE`] while there is no counter).
    least: u32,
    /// Open addressing with linear probing: counter indices or [`NONE`]; a power of two of at
    /// least four times `k` slots (short probe runs).
    table: Vec<u32>,
    /// Refusals counted.
    total: u64,
    /// The largest count ever taken over (`E` in the module docs).
    evicted_max: u64,
}

impl Summary {
    fn new() -> Self {
        Summary {
            counters: Vec::new(),
            buckets: Vec::new(),
            free: Vec::new(),
            least: NONE,
            table: Vec::new(),
            total: 0,
            evicted_max: 0,
        }
    }

    fn clear(&mut self) {
        self.counters.clear();
        self.buckets.clear();
        self.free.clear();
        self.least = NONE;
        self.table.fill(NONE);
        self.total = 0;
        self.evicted_max = 0;
    }

    fn mask(&self) -> usize {
        self.table.len().wrapping_sub(1)
    }

    /// The table slot holding the identity, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, hash: u64, tag: &[u8], key: &[u8]) -> (usize, Option<usize>) {
        let mask = self.mask();
        let mut i = (hash as usize) & mask;
        // At most a quarter of the slots are taken: the probe ends at an empty slot.
        for _ in 0..self.table.len() {
            let Some(&slot) = self.table.get(i) else { break };
            if slot == NONE {
                return (i, None);
            }
            let index = slot as usize;
            if self.counters.get(index).is_some_and(|c| c.is(hash, tag, key)) {
                return (i, Some(index));
            }
            i = (i + 1) & mask;
        }
        (i, None)
    }

    /// The first empty slot of `hash`'s probe run (for an identity known to be absent).
    #[inline(always)]
    fn free_slot(&self, hash: u64) -> usize {
        let mask = self.mask();
        let mut i = (hash as usize) & mask;
        for _ in 0..self.table.len() {
            if self.table.get(i).is_none_or(|&slot| slot == NONE) {
                break;
            }
            i = (i + 1) & mask;
        }
        i
    }

    /// Empties table slot `i`, moving later entries of the probe run back (no tombstones).
    fn remove_slot(&mut self, mut i: usize) {
        let mask = self.mask();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let Some(&slot) = self.table.get(j) else { break };
            if slot == NONE {
                break;
            }
            let home = self.counters.get(slot as usize).map_or(j, |c| (c.hash as usize) & mask);
            // The entry at `j` may move to `i` unless its home lies cyclically in `(i, j]`.
            let stays = if i <= j { i < home && home <= j } else { i < home || home <= j };
            if !stays {
                if let Some(s) = self.table.get_mut(i) {
                    *s = slot;
                }
                if let Some(moved) = self.counters.get_mut(slot as usize) {
                    moved.slot = i as u32;
                }
                i = j;
            }
        }
        if let Some(s) = self.table.get_mut(i) {
            *s = NONE;
        }
    }

    /// A bucket for `count`, linked between `prev` and `next` (either may be [`NONE`]).
    fn new_bucket(&mut self, count: u64, prev: u32, next: u32) -> u32 {
        let bucket = Bucket { count, first: NONE, last: NONE, prev, next };
        let b = match self.free.pop() {
            Some(b) => {
                if let Some(slot) = self.buckets.get_mut(b as usize) {
                    *slot = bucket;
                }
                b
            }
            None => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u32
            }
        };
        match self.buckets.get_mut(prev as usize) {
            Some(p) => p.next = b,
            None => self.least = b,
        }
        if let Some(n) = self.buckets.get_mut(next as usize) {
            n.prev = b;
        }
        b
    }

    /// Takes counter `c` out of its bucket's list; a bucket left empty is unlinked and freed.
    /// Returns the neighbours the bucket had (its `prev` is the bucket itself if it stays).
    #[inline(always)]
    fn detach(&mut self, c: usize) -> (u32, u32) {
        let Some(counter) = self.counters.get(c) else { return (NONE, NONE) };
        let (b, prev, next) = (counter.bucket, counter.prev, counter.next);
        match self.counters.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => {
                if let Some(bucket) = self.buckets.get_mut(b as usize) {
                    bucket.first = next;
                }
            }
        }
        match self.counters.get_mut(next as usize) {
            Some(n) => n.prev = prev,
            None => {
                if let Some(bucket) = self.buckets.get_mut(b as usize) {
                    bucket.last = prev;
                }
            }
        }
        let Some(&bucket) = self.buckets.get(b as usize) else { return (NONE, NONE) };
        if bucket.first != NONE {
            return (b, bucket.next);
        }
        match self.buckets.get_mut(bucket.prev as usize) {
            Some(p) => p.next = bucket.next,
            None => self.least = bucket.next,
        }
        if let Some(n) = self.buckets.get_mut(bucket.next as usize) {
            n.prev = bucket.prev;
        }
        self.free.push(b);
        (bucket.prev, bucket.next)
    }

    /// Appends counter `c` to the list of the bucket for `count`, which lies between `prev`
    /// and `next` in the bucket list (made when `next` counts something else).
    #[inline(always)]
    fn attach(&mut self, c: usize, count: u64, prev: u32, next: u32) {
        let b = match self.buckets.get(next as usize) {
            Some(n) if n.count == count => next,
            _ => self.new_bucket(count, prev, next),
        };
        let last = self.buckets.get(b as usize).map_or(NONE, |bucket| bucket.last);
        if let Some(counter) = self.counters.get_mut(c) {
            counter.count = count;
            counter.bucket = b;
            counter.prev = last;
            counter.next = NONE;
        }
        match self.counters.get_mut(last as usize) {
            Some(l) => l.next = c as u32,
            None => {
                if let Some(bucket) = self.buckets.get_mut(b as usize) {
                    bucket.first = c as u32;
                }
            }
        }
        if let Some(bucket) = self.buckets.get_mut(b as usize) {
            bucket.last = c as u32;
        }
    }

    /// Moves counter `c` from its count to `count` (larger), at `now_ms`.
    #[inline(always)]
    fn raise(&mut self, c: usize, count: u64, now_ms: i64) {
        let (prev, next) = self.detach(c);
        // From the bucket left behind (or the one before it), the next bucket may hold `count`.
        self.attach(c, count, prev, next);
        if let Some(counter) = self.counters.get_mut(c) {
            counter.last_ms = counter.last_ms.max(now_ms);
        }
    }

    /// Counts one refusal of the identity at `now_ms` (`k ≥ 1`, tag and key already cut).
    fn record(&mut self, k: usize, hash: u64, tag: &[u8], key: &[u8], now_ms: i64) {
        if self.table.is_empty() {
            self.table = vec![NONE; (4 * k).next_power_of_two().max(4)];
        }
        self.total = self.total.saturating_add(1);
        let (slot, found) = self.find(hash, tag, key);
        if let Some(c) = found {
            let count = self.counters.get(c).map_or(1, |counter| counter.count.saturating_add(1));
            self.raise(c, count, now_ms);
            return;
        }
        if self.counters.len() < k {
            let c = self.counters.len();
            let mut counter = Counter {
                hash,
                count: 1,
                last_ms: now_ms,
                slot: slot as u32,
                bucket: NONE,
                prev: NONE,
                next: NONE,
                tag_len: 0,
                key_len: 0,
                bytes: [0; TAG_CAP + KEY_CAP],
            };
            counter.set_identity(hash, tag, key);
            self.counters.push(counter);
            if let Some(s) = self.table.get_mut(slot) {
                *s = c as u32;
            }
            // Count 1 is the least there can be: the first bucket, or a new one before it.
            let least = self.least;
            self.attach(c, 1, NONE, least);
            return;
        }
        // Take over the least recently refused counter of the least count.
        let Some(c) = self.buckets.get(self.least as usize).map(|b| b.first as usize) else {
            return;
        };
        let Some(old) = self.counters.get(c) else { return };
        let (old_slot, min) = (old.slot as usize, old.count);
        self.remove_slot(old_slot);
        self.evicted_max = self.evicted_max.max(min);
        let slot = self.free_slot(hash);
        if let Some(s) = self.table.get_mut(slot) {
            *s = c as u32;
        }
        if let Some(counter) = self.counters.get_mut(c) {
            counter.set_identity(hash, tag, key);
            counter.last_ms = now_ms;
            counter.slot = slot as u32;
        }
        self.raise(c, min.saturating_add(1), now_ms);
    }
}

/// One row of `RL.TOP`: a key (its first [`KEY_CAP`] bytes), its refusals in the two windows
/// and the instant of the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopEntry {
    pub key: Vec<u8>,
    pub refused: u64,
    pub last_refused_ms: i64,
}

/// What a read covers, for `INFO`: refusals counted in the two windows, the counters in use,
/// and the bound on every reported count's error (`E_prev + E_cur`, at most `refusals / k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopStats {
    pub refusals: u64,
    pub tracked: u64,
    pub error_bound: u64,
}

/// The refused keys of the last one to two windows (see the module docs).
#[derive(Clone)]
pub struct TopKeys {
    k: usize,
    window_ms: i64,
    current: Summary,
    previous: Summary,
    /// The current window's number (`now.div_euclid(window_ms)`), `None` before any refusal.
    current_window: Option<i64>,
    /// The hash's random keys (an odd multiplier).
    seeds: (u64, u64),
}

impl TopKeys {
    /// `k` counters per window (at least 1, at most [`MAX_K`]), windows of `window_ms` (at
    /// least 1 ms).
    pub fn new(k: usize, window_ms: i64) -> Self {
        TopKeys {
            k: k.clamp(1, MAX_K),
            window_ms: window_ms.max(1),
            current: Summary::new(),
            previous: Summary::new(),
            current_window: None,
            seeds: {
                let random = RandomState::new();
                (random.hash_one(0u64), random.hash_one(1u64) | 1)
            },
        }
    }

    /// Whether this summary was made with these settings.
    #[inline]
    pub fn has_settings(&self, k: usize, window_ms: i64) -> bool {
        self.k == k.clamp(1, MAX_K) && self.window_ms == window_ms.max(1)
    }

    /// Forgets every refusal (`RL.TOP RESET`).
    pub fn reset(&mut self) {
        self.current.clear();
        self.previous.clear();
        self.current_window = None;
    }

    /// Counts one refusal of `key` under the policy `tag` (empty: none) at `now_ms`.
    pub fn record(&mut self, tag: &[u8], key: &[u8], now_ms: i64) {
        let window = now_ms.div_euclid(self.window_ms);
        match self.current_window {
            Some(current) if window <= current => {}
            Some(current) if current.checked_add(1) == Some(window) => {
                std::mem::swap(&mut self.current, &mut self.previous);
                self.current.clear();
                self.current_window = Some(window);
            }
            _ => {
                self.current.clear();
                self.previous.clear();
                self.current_window = Some(window);
            }
        }
        let tag = tag.get(..TAG_CAP).unwrap_or(tag);
        let key = key.get(..KEY_CAP).unwrap_or(key);
        let hash = self.hash(tag, key);
        self.current.record(self.k, hash, tag, key, now_ms);
    }

    /// The identity's hash: 8 bytes at a time through a folded 64×64→128-bit multiply with the
    /// random keys, the lengths first (so tag and key cannot trade bytes).
    fn hash(&self, tag: &[u8], key: &[u8]) -> u64 {
        let (seed, multiplier) = self.seeds;
        let mix = |h: u64, word: u64| {
            let product = u128::from(h ^ word) * u128::from(multiplier);
            (product as u64) ^ ((product >> 64) as u64)
        };
        let absorb = |mut h: u64, bytes: &[u8]| {
            let mut chunks = bytes.chunks_exact(8);
            for chunk in &mut chunks {
                h = mix(h, u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
            }
            let rest = chunks.remainder();
            if !rest.is_empty() {
                let mut word = [0u8; 8];
                if let Some(dst) = word.get_mut(..rest.len()) {
                    dst.copy_from_slice(rest);
                }
                h = mix(h, u64::from_le_bytes(word));
            }
            h
        };
        let h = mix(seed, ((tag.len() as u64) << 32) | key.len() as u64);
        mix(absorb(absorb(h, tag), key), seed)
    }

    /// The summaries a read at `now_ms` sees: both while the clock is in the current window
    /// (or before it), only the current one (now the previous) in the next window, none
    /// after.
    fn visible(&self, now_ms: i64) -> [Option<&Summary>; 2] {
        let window = now_ms.div_euclid(self.window_ms);
        match self.current_window {
            Some(current) if window <= current => [Some(&self.previous), Some(&self.current)],
            Some(current) if current.checked_add(1) == Some(window) => [Some(&self.current), None],
            _ => [None, None],
        }
    }

    /// The `count` most refused keys at `now_ms`, most refused first (then the most recently
    /// refused, then by key bytes). With `policy`, only refusals under that policy; without,
    /// a key's refusals under every policy (or none) add up.
    pub fn top(&self, now_ms: i64, count: usize, policy: Option<&[u8]>) -> Vec<TopEntry> {
        let selected = |tag: &[u8]| match policy {
            Some(p) => tag_matches(p, tag),
            None => !is_shadow_tag(tag),
        };
        let mut rows: HashMap<&[u8], TopEntry> = HashMap::new();
        for summary in self.visible(now_ms).into_iter().flatten() {
            for c in &summary.counters {
                if !selected(c.tag()) {
                    continue;
                }
                let row = rows.entry(c.key()).or_insert_with(|| TopEntry {
                    key: c.key().to_vec(),
                    refused: 0,
                    last_refused_ms: i64::MIN,
                });
                row.refused = row.refused.saturating_add(c.count);
                row.last_refused_ms = row.last_refused_ms.max(c.last_ms);
            }
        }
        let mut rows: Vec<TopEntry> = rows.into_values().collect();
        rows.sort_by(row_order);
        rows.truncate(count);
        rows
    }

    /// Refusals, counters and the error bound a read at `now_ms` sees.
    pub fn stats(&self, now_ms: i64) -> TopStats {
        let mut stats = TopStats::default();
        for summary in self.visible(now_ms).into_iter().flatten() {
            stats.refusals = stats.refusals.saturating_add(summary.total);
            stats.tracked = stats.tracked.saturating_add(summary.counters.len() as u64);
            stats.error_bound = stats.error_bound.saturating_add(summary.evicted_max);
        }
        stats
    }
}

/// The order of `RL.TOP`'s rows: most refused first, then the most recently refused, then by
/// key bytes.
pub fn row_order(a: &TopEntry, b: &TopEntry) -> Ordering {
    b.refused
        .cmp(&a.refused)
        .then(b.last_refused_ms.cmp(&a.last_refused_ms))
        .then_with(|| a.key.cmp(&b.key))
}

/// The tag of a would-be refusal a `SHADOW` policy answered allowed: `~name`. Policy names
/// never start with `~` or `+`, so no policy's own tag is a shadow tag.
pub fn shadow_tag(name: &[u8]) -> Vec<u8> {
    prefixed(b'~', name)
}

/// The tag of a would-be refusal of a policy's candidate: `+name`.
pub fn candidate_tag(name: &[u8]) -> Vec<u8> {
    prefixed(b'+', name)
}

fn prefixed(prefix: u8, name: &[u8]) -> Vec<u8> {
    let mut tag = Vec::with_capacity(name.len() + 1);
    tag.push(prefix);
    tag.extend_from_slice(name);
    tag.truncate(TAG_CAP);
    tag
}

/// Whether `tag` counts refusals that were answered allowed (shadow or candidate): a read of
/// every key leaves them out.
fn is_shadow_tag(tag: &[u8]) -> bool {
    matches!(tag.first(), Some(b'~' | b'+'))
}

/// Whether a counter tagged `tag` belongs to the read of `selector`: `RL.TOP POLICY name`
/// (the tag `name`, and `~name` for a `SHADOW` policy's would-be refusals) or, for `RL.TOP
/// POLICY name CANDIDATE`, the selector `+name` (the candidate's would-be refusals).
fn tag_matches(selector: &[u8], tag: &[u8]) -> bool {
    let cap = |t: &[u8]| t.get(..TAG_CAP).unwrap_or(t).to_vec();
    if selector.first() == Some(&b'+') {
        return cap(selector) == tag;
    }
    cap(selector) == tag || shadow_tag(selector) == tag
}

/// What [`TopKeys::top`] selects for `RL.TOP POLICY name`: the policy's name (its refusals and
/// its `SHADOW` would-be refusals) or, with `CANDIDATE`, its [`candidate_tag`].
pub fn selector(policy: &TopPolicy) -> Vec<u8> {
    if policy.candidate {
        candidate_tag(policy.name)
    } else {
        policy.name.to_vec()
    }
}

#[cfg(test)]
#[path = "top_tests.rs"]
mod tests;
