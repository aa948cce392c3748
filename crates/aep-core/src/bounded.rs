//! Bounded FIFO memory: a map, or a set, that holds at most `capacity` entries and forgets the
//! oldest insertion first to make room. What keeps a long-running session's memory bounded
//! wherever the protocol asks to remember ids: the stream validator's windows, command
//! dedupe on `(source, id)` (AEP-0004 §3), pending tool calls, hook delivery ids.
//!
//! Pure FIFO: a key inserted again while present keeps its place (its value is replaced), and
//! a key removed then inserted again counts as new. Every operation is amortized O(1).

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// A map of at most `capacity` entries, the oldest forgotten first.
#[derive(Debug)]
pub struct BoundedMap<K, V> {
    capacity: usize,
    /// Each entry with the generation of its insertion.
    entries: HashMap<K, (u64, V)>,
    /// Insertion order as `(key, generation)`; an entry removed since leaves a stale
    /// generation here, skipped when it reaches the front and swept when stale ones pile up.
    order: VecDeque<(K, u64)>,
    generation: u64,
}

impl<K: Eq + Hash + Clone, V> BoundedMap<K, V> {
    /// An empty map; at capacity 0 it forgets every entry as it is inserted.
    pub fn new(capacity: usize) -> Self {
        BoundedMap {
            capacity,
            entries: HashMap::new(),
            order: VecDeque::new(),
            generation: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.contains_key(key)
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.get(key).map(|(_, v)| v)
    }

    /// Remembers `value` under `key`, returning the entry forgotten to make room, if any (the
    /// oldest; at capacity 0, this one).
    pub fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        if let Some(slot) = self.entries.get_mut(&key) {
            slot.1 = value;
            return None;
        }
        self.generation += 1;
        self.entries.insert(key.clone(), (self.generation, value));
        self.order.push_back((key, self.generation));
        let forgotten = self.forget_oldest();
        self.sweep();
        forgotten
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.remove(key).map(|(_, v)| v)
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }

    /// Forgets the oldest live entry while over capacity (one insertion adds at most one).
    fn forget_oldest(&mut self) -> Option<(K, V)> {
        while self.entries.len() > self.capacity {
            let (key, generation) = self.order.pop_front()?;
            if self
                .entries
                .get(&key)
                .is_some_and(|(current, _)| *current == generation)
            {
                return self.entries.remove(&key).map(|(_, v)| (key, v));
            }
        }
        None
    }

    /// Drops stale order slots once they outnumber the capacity, so removals cannot grow the
    /// order without bound.
    fn sweep(&mut self) {
        if self.order.len() > self.capacity.saturating_mul(2) {
            let entries = &self.entries;
            self.order
                .retain(|(key, generation)| entries.get(key).is_some_and(|(current, _)| current == generation));
        }
    }
}

/// A set of at most `capacity` keys, the oldest forgotten first: e.g. the delivery ids already
/// recorded in a session.
#[derive(Debug)]
pub struct BoundedSet<K> {
    map: BoundedMap<K, ()>,
}

impl<K: Eq + Hash + Clone> BoundedSet<K> {
    /// An empty set; at capacity 0 it forgets every key as it is inserted.
    pub fn new(capacity: usize) -> Self {
        BoundedSet {
            map: BoundedMap::new(capacity),
        }
    }

    pub fn capacity(&self) -> usize {
        self.map.capacity()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.contains(key)
    }

    /// Remembers `key`, returning the key forgotten to make room, if any.
    pub fn insert(&mut self, key: K) -> Option<K> {
        self.map.insert(key, ()).map(|(k, ())| k)
    }

    /// Forgets `key`; `true` when it was there.
    pub fn remove<Q>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.remove(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_oldest_beyond_capacity() {
        let mut map = BoundedMap::new(2);
        assert_eq!(map.insert("a", 1), None);
        assert_eq!(map.insert("b", 2), None);
        assert_eq!(map.insert("c", 3), Some(("a", 1)));
        assert_eq!((map.get("a"), map.get("b"), map.get("c")), (None, Some(&2), Some(&3)));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn a_key_inserted_again_keeps_its_place() {
        let mut map = BoundedMap::new(2);
        map.insert("a", 1);
        map.insert("b", 2);
        assert_eq!(map.insert("a", 10), None, "replaced, nothing forgotten");
        assert_eq!(map.insert("c", 3), Some(("a", 10)), "still the oldest");
    }

    #[test]
    fn removed_and_reinserted_keys_never_evict_the_wrong_entry() {
        let mut map = BoundedMap::new(2);
        map.insert("a", 1);
        assert_eq!(map.remove("a"), Some(1));
        map.insert("a", 2);
        // The stale ("a", 1) slot goes first and must not take the live "a" with it.
        assert_eq!(map.insert("b", 3), None);
        assert_eq!(map.get("a"), Some(&2));
        assert_eq!(map.insert("c", 4), Some(("a", 2)));
        assert!(map.len() <= 2 && map.order.len() <= 4);
    }

    #[test]
    fn removals_do_not_grow_the_order() {
        let mut map = BoundedMap::new(3);
        for i in 0..1000 {
            map.insert(i, i);
            map.remove(&i);
        }
        assert!(map.is_empty());
        assert!(map.order.len() <= 6, "{} stale slots", map.order.len());
    }

    #[test]
    fn capacity_zero_remembers_nothing() {
        let mut map = BoundedMap::new(0);
        assert_eq!(map.insert("a", 1), Some(("a", 1)));
        assert!(map.is_empty() && map.order.is_empty());
    }

    #[test]
    fn a_set_of_ids_looks_up_by_str() {
        let mut ids: BoundedSet<String> = BoundedSet::new(2);
        assert_eq!(ids.insert("d1".to_string()), None);
        assert_eq!(ids.insert("d2".to_string()), None);
        assert!(ids.contains("d1"));
        assert_eq!(ids.insert("d3".to_string()), Some("d1".to_string()));
        assert!(!ids.contains("d1") && ids.contains("d3"));
        assert!(ids.remove("d2") && !ids.remove("d2"));
        assert_eq!((ids.len(), ids.capacity()), (1, 2));
    }
}
