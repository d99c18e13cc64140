//! Each thread's cache of its counter handles, by recorder and key: what
//! makes `counter!` with labels at each call cost the same on any number
//! of threads.
//!
//! A lookup of a key the thread has looked up before reads only what the
//! thread owns (its cache) and what nobody writes (the key), and writes
//! only the reference count of the thread's own handle: no shard lock,
//! no reference count that another thread's lookup of the same key
//! writes too.  The cache files a key under the hash `metrics` computed
//! for it (for a `counter!` with literal labels, at compile time) and
//! compares the whole key, so a collision of hashes never returns
//! another key's counter; a key built once in a static (what `counter!`
//! with literal labels passes) compares by address, without reading its
//! strings.
//!
//! A thread's cached handles keep their series, and so their zone,
//! alive: a dropped recorder's entries leave the dropping thread's cache
//! at once, and every other thread's at its next miss through any
//! recorder, or when it exits.

use std::cell::RefCell;
use std::collections::hash_map::{Entry, HashMap};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use metrics::Key;

use super::{CounterCell, PassHasher};

/// A thread's own handle of a counter cell.  It holds its own copy of
/// the counter's handle, so that an increment reads no shared cell; the
/// cell is read only by `absolute()`.
pub(super) struct ThreadCounter {
    c: crate::Counter,
    cell: Arc<CounterCell>,
}

impl metrics::CounterFn for ThreadCounter {
    #[inline]
    fn increment(&self, value: u64) {
        self.c.increment(value)
    }

    fn absolute(&self, value: u64) {
        metrics::CounterFn::absolute(&*self.cell, value)
    }
}

/// Recorders' ids, never reused, so that a thread's cache tells them
/// apart.
static NEXT_RECORDER: AtomicU64 = AtomicU64::new(1);
/// Recorders dropped so far: a thread empties its cache at its next
/// miss when this changed, so that it keeps no series (and no zone) of a
/// recorder that is gone for longer than that.
static RECORDERS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// A new recorder's id.
pub(super) fn next_id() -> u64 {
    NEXT_RECORDER.fetch_add(1, Ordering::Relaxed)
}

/// Recorder `id` is gone: out of this thread's cache now, out of the
/// others' at their next miss.
pub(super) fn recorder_dropped(id: u64) {
    RECORDERS_DROPPED.fetch_add(1, Ordering::Relaxed);
    let _ = CACHE.try_with(|c| c.borrow_mut().forget(id));
}

/// This thread's handle of `key` in recorder `id`, if it has one.
#[inline]
pub(super) fn lookup(id: u64, key: &Key) -> Option<Arc<ThreadCounter>> {
    let dropped = RECORDERS_DROPPED.load(Ordering::Relaxed);
    CACHE
        .try_with(|c| {
            let c = c.borrow();
            if c.dropped != dropped {
                return None;
            }
            c.of(id).and_then(|m| m.get(key)).cloned()
        })
        .ok()
        .flatten()
}

/// Makes a handle of `cell` for this thread and files it under `key` in
/// recorder `id`, emptying the cache first when a recorder was dropped
/// since this thread last looked.  Gives `cell` back when the thread is
/// exiting (its cache is gone).
pub(super) fn insert(
    id: u64,
    key: &Key,
    cell: Arc<CounterCell>,
) -> Result<Arc<ThreadCounter>, Arc<CounterCell>> {
    let t = Arc::new(ThreadCounter {
        c: cell.c.clone(),
        cell,
    });
    let dropped = RECORDERS_DROPPED.load(Ordering::Relaxed);
    let filed = CACHE.try_with(|c| {
        let mut c = c.borrow_mut();
        if c.dropped != dropped {
            c.counters.clear();
            c.dropped = dropped;
        }
        c.of_mut(id).insert(key, t.clone());
    });
    match filed {
        Ok(()) => Ok(t),
        Err(_) => Err(t.cell.clone()),
    }
}

/// Whether two keys are the same: the same name and the same labels, in
/// order.  Two slices at the same address and of the same length are the
/// same bytes (both are alive here), so the key a `counter!` with
/// literal labels builds once, in a static, compares without reading its
/// strings; any other key compares byte by byte.
#[inline(always)]
fn same_key(a: &Key, b: &Key) -> bool {
    let (la, lb) = (a.labels().as_slice(), b.labels().as_slice());
    let (na, nb) = (a.name(), b.name());
    (na.as_ptr() == nb.as_ptr()
        && na.len() == nb.len()
        && la.as_ptr() == lb.as_ptr()
        && la.len() == lb.len())
        || same_key_bytes(a, b)
}

#[inline(never)]
fn same_key_bytes(a: &Key, b: &Key) -> bool {
    a.name() == b.name()
        && a.labels().len() == b.labels().len()
        && a.labels()
            .zip(b.labels())
            .all(|(x, y)| x.key() == y.key() && x.value() == y.value())
}

#[cfg(test)]
thread_local! {
    /// The mask of the cache's hashes on this thread: tests set it to 0
    /// to put every key in one bucket, as if their hashes collided.
    static HASH_MASK: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
}

/// The hash a thread's cache files `key` under: the one `metrics`
/// computed for it, not hashed again.
#[inline(always)]
fn cache_hash(key: &Key) -> u64 {
    #[cfg(test)]
    let mask = HASH_MASK.with(|m| m.get());
    #[cfg(not(test))]
    let mask = u64::MAX;
    key.get_hash() & mask
}

/// A key and this thread's handle of its counter.
struct Cached {
    key: Key,
    handle: Arc<ThreadCounter>,
}

/// The keys of one hash: almost always one, kept inline.
struct Bucket {
    first: Cached,
    more: Vec<Cached>,
}

impl Bucket {
    #[inline]
    fn find(&self, key: &Key) -> Option<&Arc<ThreadCounter>> {
        if same_key(&self.first.key, key) {
            return Some(&self.first.handle);
        }
        self.more
            .iter()
            .find(|c| same_key(&c.key, key))
            .map(|c| &c.handle)
    }
}

/// A thread's handles of one recorder's counters, by the hash of their
/// key.
#[derive(Default)]
struct ThreadCounters {
    buckets: HashMap<u64, Bucket, BuildHasherDefault<PassHasher>>,
}

impl ThreadCounters {
    #[inline]
    fn get(&self, key: &Key) -> Option<&Arc<ThreadCounter>> {
        self.buckets.get(&cache_hash(key))?.find(key)
    }

    fn insert(&mut self, key: &Key, handle: Arc<ThreadCounter>) {
        let c = Cached {
            key: key.clone(),
            handle,
        };
        match self.buckets.entry(cache_hash(key)) {
            Entry::Occupied(mut e) => e.get_mut().more.push(c),
            Entry::Vacant(e) => {
                e.insert(Bucket {
                    first: c,
                    more: Vec::new(),
                });
            }
        }
    }
}

/// A thread's handles, by recorder (a few: a list, searched in order).
struct ThreadCache {
    dropped: u64,
    counters: Vec<(u64, ThreadCounters)>,
}

impl ThreadCache {
    const fn new() -> Self {
        ThreadCache {
            dropped: 0,
            counters: Vec::new(),
        }
    }

    #[inline]
    fn of(&self, id: u64) -> Option<&ThreadCounters> {
        self.counters.iter().find(|(i, _)| *i == id).map(|(_, m)| m)
    }

    fn of_mut(&mut self, id: u64) -> &mut ThreadCounters {
        let at = match self.counters.iter().position(|(i, _)| *i == id) {
            Some(at) => at,
            None => {
                self.counters.push((id, ThreadCounters::default()));
                self.counters.len() - 1
            }
        };
        &mut self.counters[at].1
    }

    fn forget(&mut self, id: u64) {
        self.counters.retain(|(i, _)| *i != id);
    }
}

thread_local! {
    static CACHE: RefCell<ThreadCache> = const { RefCell::new(ThreadCache::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::TallyRecorder;
    use crate::{Zone, ZoneOptions};
    use metrics::{Counter, Label, Level, Metadata, Recorder};

    fn meta() -> Metadata<'static> {
        Metadata::new("test", Level::INFO, None)
    }

    /// A lookup of a key the thread has seen writes nothing shared: the
    /// handles it returns hold the thread's own `Arc`, so the shared
    /// cell's reference count does not move however many the thread
    /// holds.
    #[test]
    fn lookups_of_a_registered_key_leave_the_shared_cell_alone() {
        let zone = Zone::create("rs_lookup", &ZoneOptions::new().anonymous()).unwrap();
        let rec = TallyRecorder::new(zone);
        let key = Key::from_parts("lookups_total", vec![Label::new("k", "v")]);
        let first = rec.register_counter(&key, &meta());
        first.increment(1);
        let cell = rec.counters.get_or_insert(&key, || unreachable!());
        let before = Arc::strong_count(&cell);
        let held: Vec<Counter> = (0..10)
            .map(|_| rec.register_counter(&key, &meta()))
            .collect();
        assert_eq!(
            Arc::strong_count(&cell),
            before,
            "a lookup wrote the shared cell's count"
        );
        for c in &held {
            c.increment(1);
        }
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        rec.register_counter(&key, &meta()).increment(1);
                    }
                });
            }
        });
        assert_eq!(cell.c.value(), 2011);
        drop(held);
        drop(first);
        drop(cell);
        let id = rec.id;
        drop(rec);
        let cached = CACHE.with(|c| c.borrow().of(id).is_some());
        assert!(
            !cached,
            "a dropped recorder's counters stay in this thread's cache"
        );
    }

    static ROUTE_A: [Label; 1] = [Label::from_static_parts("route", "/a")];
    static ROUTE_B: [Label; 1] = [Label::from_static_parts("route", "/b")];
    static PATH_A: [Label; 1] = [Label::from_static_parts("path", "/a")];
    static ROUTE_A_200: [Label; 2] = [
        Label::from_static_parts("route", "/a"),
        Label::from_static_parts("code", "200"),
    ];
    static ROUTE_A_500: [Label; 2] = [
        Label::from_static_parts("route", "/a"),
        Label::from_static_parts("code", "500"),
    ];

    /// Keys that differ in one part only (a label's value, a label's
    /// name, the name, one label more), as `counter!` with literal labels
    /// builds them (statics: one shares its labels' address with another
    /// key of another name) and as a key built at each call: every one
    /// its own series.
    fn distinct_keys() -> Vec<Key> {
        let owned = |name: &str, labels: &[(&str, &str)]| {
            Key::from_parts(
                name.to_string(),
                labels
                    .iter()
                    .map(|(k, v)| Label::new(k.to_string(), v.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        vec![
            Key::from_static_parts("lk_total", &ROUTE_A),
            Key::from_static_parts("lk_total", &ROUTE_B),
            Key::from_static_parts("lk_total", &PATH_A),
            Key::from_static_parts("lk_other_total", &ROUTE_A),
            Key::from_static_parts("lk_total", &ROUTE_A_200),
            Key::from_static_parts("lk_total", &ROUTE_A_500),
            Key::from_static_name("lk_total"),
            owned("lk_total", &[("route", "/c")]),
            owned("lk_total", &[("route", "/c"), ("code", "200")]),
            owned("lk_total", &[("route", "/c"), ("code", "201")]),
            owned("lk_total", &[("route", "/d")]),
        ]
    }

    /// Two threads look up every key of distinct_keys() in turn, key i
    /// i + 1 times a round, with this thread's hashes masked by `mask`;
    /// each series holds exactly its own adds.
    fn exact_totals_per_key(name: &str, mask: u64) {
        const ROUNDS: u64 = 200;
        let zone = Zone::create(name, &ZoneOptions::new().anonymous()).unwrap();
        let rec = TallyRecorder::new(zone);
        let keys = distinct_keys();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    HASH_MASK.with(|m| m.set(mask));
                    for _ in 0..ROUNDS {
                        for (i, k) in keys.iter().enumerate() {
                            for _ in 0..=i {
                                rec.register_counter(k, &meta()).increment(1);
                            }
                        }
                    }
                });
            }
        });
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(
                rec.counter(k).value() as u64,
                2 * ROUNDS * (i as u64 + 1),
                "series of {k:?}"
            );
        }
    }

    #[test]
    fn keys_differing_in_one_part_keep_exact_totals() {
        exact_totals_per_key("rs_lookup_keys", u64::MAX);
    }

    /// The same with every key's hash forced to one value: the cache
    /// tells them apart by comparing the keys.
    #[test]
    fn colliding_hashes_keep_exact_totals() {
        exact_totals_per_key("rs_lookup_collide", 0);
    }

    /// A key built at each call finds the series of the same key built
    /// once in a static, and the other way round, in one bucket or not.
    #[test]
    fn a_static_key_and_a_built_key_share_a_series() {
        for mask in [u64::MAX, 0] {
            HASH_MASK.with(|m| m.set(mask));
            let zone = Zone::create("rs_lookup_same", &ZoneOptions::new().anonymous()).unwrap();
            let rec = TallyRecorder::new(zone);
            let fixed = Key::from_static_parts("lk_total", &ROUTE_A_200);
            let built = || {
                Key::from_parts(
                    "lk_total",
                    vec![
                        Label::new("route", "/a"),
                        Label::new("code", String::from("200")),
                    ],
                )
            };
            rec.register_counter(&Key::from_static_name("lk_total"), &meta())
                .increment(100);
            for _ in 0..10 {
                rec.register_counter(&fixed, &meta()).increment(1);
                rec.register_counter(&built(), &meta()).increment(2);
            }
            assert_eq!(rec.counter(&fixed).value(), 30);
            assert_eq!(rec.counter(&Key::from_static_name("lk_total")).value(), 100);
        }
        HASH_MASK.with(|m| m.set(u64::MAX));
    }
}
