//! `LOCAL_CACHE_SIZE_IN_BYTES`: the keys known to be over their limit, kept in the service's
//! memory until the instant they admit again (a fixed window: its end), so that a request
//! naming one is refused without asking Redis. envoyproxy/ratelimit keeps such a cache
//! (freecache) and exports its statistics as `ratelimit.localcache.*` gauges; these are the
//! same names (`hitCount`, `missCount`, …).
//!
//! A hit is exact, not a guess: the module answered `retry_after` for the key, and nothing but
//! time gives a refused key its permits back — except a `RL.REFUND`, a `RL.POLICY` change or
//! a reset made outside the service, which the cache does not see (so policy keys are never
//! cached; see [`LocalCache::caches`]).

use std::collections::HashMap;
use std::sync::Mutex;

use super::config::{Algorithm, Rule};

/// The least memory a cache gets, whatever `LOCAL_CACHE_SIZE_IN_BYTES` asks (freecache's own
/// floor, 512 KiB).
const MIN_BYTES: usize = 512 * 1024;

/// What one entry is counted as, besides its key (the instant, the map's slot).
const ENTRY_OVERHEAD: usize = 48;

/// Counters since the start, under envoyproxy's gauge names.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub hit_count: u64,
    pub miss_count: u64,
    pub lookup_count: u64,
    pub entry_count: u64,
    pub expired_count: u64,
    pub evacuate_count: u64,
    pub overwrite_count: u64,
}

#[derive(Default)]
struct Inner {
    /// Key → the unix ms at which it admits again.
    until: HashMap<String, i64>,
    bytes: usize,
    stats: CacheStats,
}

/// The over-the-limit keys (`None` size: no cache).
pub struct LocalCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl LocalCache {
    /// A cache of `bytes` (at least 512 KiB); `None` for 0 (`LOCAL_CACHE_SIZE_IN_BYTES` unset).
    pub fn new(bytes: usize) -> Option<LocalCache> {
        (bytes > 0).then(|| LocalCache {
            capacity: bytes.max(MIN_BYTES),
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether a rule's keys may be cached: a limit that only time lifts (not a policy, which
    /// may be raised live), enforced (shadow and quota-mode keys never refuse on their own).
    pub fn caches(rule: &Rule) -> bool {
        !rule.shadow && !rule.quota && !matches!(rule.algorithm, Algorithm::Policy(_))
    }

    /// The instant `key` admits again, if it is known over its limit at `now_ms` (a hit);
    /// counted as a hit or a miss.
    pub fn lookup(&self, key: &str, now_ms: i64) -> Option<i64> {
        let mut inner = self.lock();
        inner.stats.lookup_count += 1;
        match inner.until.get(key).copied() {
            Some(until) if until > now_ms => {
                inner.stats.hit_count += 1;
                Some(until)
            }
            Some(_) => {
                inner.stats.miss_count += 1;
                inner.stats.expired_count += 1;
                if inner.until.remove(key).is_some() {
                    inner.bytes = inner.bytes.saturating_sub(key.len() + ENTRY_OVERHEAD);
                }
                None
            }
            None => {
                inner.stats.miss_count += 1;
                None
            }
        }
    }

    /// Remembers that `key` is over its limit until `until_ms`. When full, the entries past
    /// their instant are dropped first; if still full, the new one is not kept.
    pub fn insert(&self, key: &str, until_ms: i64, now_ms: i64) {
        if until_ms <= now_ms {
            return;
        }
        let size = key.len() + ENTRY_OVERHEAD;
        let mut inner = self.lock();
        if let Some(old) = inner.until.get_mut(key) {
            *old = until_ms;
            inner.stats.overwrite_count += 1;
            return;
        }
        if inner.bytes + size > self.capacity {
            let before = inner.until.len();
            inner.until.retain(|_, until| *until > now_ms);
            let dropped = (before - inner.until.len()) as u64;
            inner.stats.evacuate_count += dropped;
            inner.bytes = inner.until.keys().map(|k| k.len() + ENTRY_OVERHEAD).sum();
            if inner.bytes + size > self.capacity {
                return;
            }
        }
        inner.until.insert(key.to_string(), until_ms);
        inner.bytes += size;
    }

    /// The counters now (`entry_count`: the entries held).
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats { entry_count: inner.until.len() as u64, ..inner.stats }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_refused_locally_until_its_instant_exactly() {
        let cache = LocalCache::new(1000).unwrap();
        assert_eq!(cache.lookup("k", 0), None);
        cache.insert("k", 60_000, 1_000);
        assert_eq!(cache.lookup("k", 59_999), Some(60_000));
        // At the instant the window ends the key admits again: Redis decides.
        assert_eq!(cache.lookup("k", 60_000), None);
        let stats = cache.stats();
        assert_eq!((stats.hit_count, stats.miss_count, stats.lookup_count), (1, 2, 3));
        assert_eq!((stats.expired_count, stats.entry_count), (1, 0));
        // Already past: never kept.
        cache.insert("late", 5, 5);
        assert_eq!(cache.stats().entry_count, 0);
        assert!(LocalCache::new(0).is_none());
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_refuses_new_ones() {
        let cache = LocalCache::new(1).unwrap();
        let key = |i: usize| format!("{i:0>1000}");
        let fits = MIN_BYTES / (1000 + ENTRY_OVERHEAD);
        for i in 0..fits {
            cache.insert(&key(i), 10, 0);
        }
        assert_eq!(cache.stats().entry_count, fits as u64);
        cache.insert(&key(fits), 10, 0);
        assert_eq!(cache.stats().entry_count, fits as u64, "full: not kept");
        assert_eq!(cache.lookup(&key(fits), 1), None);
        // Once the others are past their instant, room is made.
        cache.insert(&key(fits), 100, 20);
        let stats = cache.stats();
        assert_eq!((stats.entry_count, stats.evacuate_count), (1, fits as u64));
        assert_eq!(cache.lookup(&key(fits), 99), Some(100));
    }
}
