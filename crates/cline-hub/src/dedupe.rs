//! Command deduplication on `(source, id)` (AEP-0004 §3): one decision per command, ever. A
//! command seen again while its decision is pending gets nothing; after the decision it gets
//! the recorded ack again (the caller re-emits it byte-identically), and it is never executed
//! twice.
//!
//! Memory is bounded: decided records beyond `capacity` are forgotten oldest first (a
//! redelivery older than that is then decided afresh). Pending records are never forgotten;
//! the ack guard decides each within seconds. A settlement whose ack could not be recorded
//! ([`Dedupe::fail`]) is kept bounded like a decision, and a redelivery still gets nothing.

use aep_core::bounded::BoundedMap;
use std::collections::HashSet;

/// A command's identity: its sender's `source` and its `id` (AEP-0001 §7.4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommandKey {
    pub source: String,
    pub id: String,
}

/// What a command's arrival found.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen<'a, A> {
    /// First sight: the caller decides it (now pending).
    New,
    /// Being decided: do nothing.
    Pending,
    /// Decided: re-emit this ack.
    Decided(&'a A),
}

#[derive(Debug)]
pub struct Dedupe<A> {
    /// Unbounded, but each is decided or abandoned within the ack guard.
    pending: HashSet<CommandKey>,
    decided: BoundedMap<CommandKey, A>,
    /// Executed, but their ack could not be recorded: never decided, never executed again.
    failed: BoundedMap<CommandKey, ()>,
}

impl<A> Dedupe<A> {
    pub fn new(capacity: usize) -> Self {
        Dedupe {
            pending: HashSet::new(),
            decided: BoundedMap::new(capacity),
            failed: BoundedMap::new(capacity),
        }
    }

    /// Records the arrival of `key`; a new key becomes pending.
    pub fn begin(&mut self, key: &CommandKey) -> Seen<'_, A> {
        if self.pending.contains(key) || self.failed.contains(key) {
            return Seen::Pending;
        }
        if let Some(ack) = self.decided.get(key) {
            return Seen::Decided(ack);
        }
        self.pending.insert(key.clone());
        Seen::New
    }

    pub fn is_pending(&self, key: &CommandKey) -> bool {
        self.pending.contains(key)
    }

    /// Records the decision for a pending `key`. `false` (and nothing changes) when it was
    /// decided already or never begun: the first decision wins.
    pub fn decide(&mut self, key: &CommandKey, ack: A) -> bool {
        if !self.pending.remove(key) {
            return false;
        }
        self.decided.insert(key.clone(), ack);
        true
    }

    /// A pending `key` was carried out but its ack could not be recorded: it leaves the pending
    /// set (which only the ack guard's seconds bound) for a bounded one, and a redelivery still
    /// gets nothing rather than a second execution.
    pub fn fail(&mut self, key: &CommandKey) {
        if self.pending.remove(key) {
            self.failed.insert(key.clone(), ());
        }
    }

    /// Forgets a pending `key` that could not be decided (its ack could not be recorded), so a
    /// redelivery is decided afresh.
    pub fn abandon(&mut self, key: &CommandKey) {
        self.pending.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> CommandKey {
        CommandKey {
            source: "aep://h/agent/ui".into(),
            id: id.into(),
        }
    }

    #[test]
    fn one_decision_per_command_and_the_first_wins() {
        let mut d = Dedupe::new(8);
        assert_eq!(d.begin(&key("c1")), Seen::New);
        assert_eq!(d.begin(&key("c1")), Seen::Pending);
        assert!(d.decide(&key("c1"), "accepted"));
        assert!(!d.decide(&key("c1"), "rejected"), "a later decision is ignored");
        assert_eq!(d.begin(&key("c1")), Seen::Decided(&"accepted"));
        assert!(!d.decide(&key("never"), "accepted"), "only begun commands are decided");
        let other_sender = CommandKey {
            source: "aep://h/agent/other".into(),
            id: "c1".into(),
        };
        assert_eq!(d.begin(&other_sender), Seen::New, "ids are scoped by source");
    }

    #[test]
    fn decided_records_are_bounded_and_pending_ones_kept() {
        let mut d = Dedupe::new(2);
        assert_eq!(d.begin(&key("p")), Seen::New);
        for id in ["a", "b", "c"] {
            d.begin(&key(id));
            d.decide(&key(id), id);
        }
        assert_eq!(d.begin(&key("a")), Seen::New, "the oldest decision was forgotten");
        assert_eq!(d.begin(&key("c")), Seen::Decided(&"c"));
        assert_eq!(d.begin(&key("p")), Seen::Pending);
        d.abandon(&key("p"));
        assert_eq!(d.begin(&key("p")), Seen::New);
    }

    #[test]
    fn failed_settlements_get_nothing_and_are_bounded() {
        let mut d: Dedupe<&str> = Dedupe::new(2);
        for id in ["f1", "f2", "f3"] {
            assert_eq!(d.begin(&key(id)), Seen::New);
            d.fail(&key(id));
            assert!(!d.is_pending(&key(id)), "no longer pending: nothing settles it again");
        }
        assert!(d.pending.is_empty());
        assert_eq!(d.begin(&key("f3")), Seen::Pending, "a redelivery gets nothing");
        assert_eq!(d.begin(&key("f1")), Seen::New, "the oldest failure was forgotten");
    }
}
