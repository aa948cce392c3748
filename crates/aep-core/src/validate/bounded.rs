//! A map that remembers at most `capacity` insertions, forgetting the oldest first: what keeps
//! the stream validator's memory bounded per session however long the session runs.

use std::collections::{HashMap, VecDeque};

#[derive(Debug)]
pub(super) struct Bounded<V> {
    capacity: usize,
    entries: HashMap<String, (u64, V)>,
    /// Insertion order as `(key, generation)`; an entry removed or re-inserted since leaves a
    /// stale generation here, skipped when it reaches the front.
    order: VecDeque<(String, u64)>,
    generation: u64,
}

impl<V> Bounded<V> {
    pub(super) fn new(capacity: usize) -> Self {
        Bounded {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            order: VecDeque::new(),
            generation: 0,
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&V> {
        self.entries.get(key).map(|(_, v)| v)
    }

    /// Remembers `key`, returning the entry forgotten to make room, if any.
    pub(super) fn insert(&mut self, key: &str, value: V) -> Option<V> {
        self.generation += 1;
        self.entries.insert(key.to_string(), (self.generation, value));
        self.order.push_back((key.to_string(), self.generation));
        if self.order.len() <= self.capacity {
            return None;
        }
        let (oldest, generation) = self.order.pop_front()?;
        match self.entries.get(&oldest) {
            Some((current, _)) if *current == generation => self.entries.remove(&oldest).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn remove(&mut self, key: &str) {
        self.entries.remove(key);
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_oldest_beyond_capacity() {
        let mut map = Bounded::new(2);
        assert_eq!(map.insert("a", 1), None);
        assert_eq!(map.insert("b", 2), None);
        assert_eq!(map.insert("c", 3), Some(1));
        assert_eq!((map.get("a"), map.get("b"), map.get("c")), (None, Some(&2), Some(&3)));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn removed_and_reinserted_keys_never_evict_the_wrong_entry() {
        let mut map = Bounded::new(2);
        map.insert("a", 1);
        map.remove("a");
        map.insert("a", 2);
        // The stale ("a", 1) slot goes first and must not take the live "a" with it.
        assert_eq!(map.insert("b", 3), None);
        assert_eq!(map.get("a"), Some(&2));
        assert_eq!(map.insert("c", 4), Some(2));
        assert!(map.len() <= 2 && map.order.len() <= 2);
    }
}
