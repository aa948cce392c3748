//! Per-session `(epoch, seq)` assignment (AEP-0001 §7): within an epoch a `seq` is never reused
//! or lowered; a restart that cannot remember its counter must bump the epoch.
//!
//! [`Sequencer`] is the seam: the daemon backs it with durable state (the log tail, or a
//! persisted epoch), tests and short-lived tools use [`MemorySequencer`].

use std::collections::HashMap;

/// A position in a session's stream; ordered lexicographically (AEP-0001 §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub epoch: u64,
    pub seq: u64,
}

/// Hands out the next position of a session.
pub trait Sequencer {
    fn next(&mut self, session: &str) -> Position;
}

/// An in-memory sequencer: every session starts at `seq` 0 in the configured epoch, unless
/// [`MemorySequencer::resume_after`] taught it where a session left off.
#[derive(Debug, Default)]
pub struct MemorySequencer {
    epoch: u64,
    next: HashMap<String, Position>,
}

impl MemorySequencer {
    pub fn new(epoch: u64) -> Self {
        MemorySequencer {
            epoch,
            next: HashMap::new(),
        }
    }

    /// Continues `session` after `last` (for example the last line of its log), so a restart
    /// neither reuses nor lowers a position. A later epoch than the configured one wins.
    pub fn resume_after(&mut self, session: &str, last: Position) {
        let candidate = if last.epoch >= self.epoch {
            Position {
                epoch: last.epoch,
                seq: last.seq + 1,
            }
        } else {
            Position {
                epoch: self.epoch,
                seq: 0,
            }
        };
        let entry = self.next.entry(session.to_string()).or_insert(candidate);
        if candidate > *entry {
            *entry = candidate;
        }
    }
}

impl MemorySequencer {
    /// The position [`Sequencer::next`] would hand out, without taking it: an Event that may
    /// still be refused is stamped with it, and takes it only once it is written (a refused
    /// one leaves no gap).
    pub fn peek(&self, session: &str) -> Position {
        self.next.get(session).copied().unwrap_or(Position {
            epoch: self.epoch,
            seq: 0,
        })
    }
}

impl Sequencer for MemorySequencer {
    fn next(&mut self, session: &str) -> Position {
        let epoch = self.epoch;
        let slot = self
            .next
            .entry(session.to_string())
            .or_insert(Position { epoch, seq: 0 });
        let pos = *slot;
        slot.seq += 1;
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_count_independently_and_resume_never_goes_back() {
        let mut s = MemorySequencer::new(0);
        assert_eq!(s.next("a"), Position { epoch: 0, seq: 0 });
        assert_eq!(s.next("a"), Position { epoch: 0, seq: 1 });
        assert_eq!(s.next("b"), Position { epoch: 0, seq: 0 });
        s.resume_after("a", Position { epoch: 0, seq: 0 });
        assert_eq!(s.peek("a"), Position { epoch: 0, seq: 2 });
        assert_eq!(s.next("a"), Position { epoch: 0, seq: 2 });
        assert_eq!(s.peek("z"), Position { epoch: 0, seq: 0 });
        s.resume_after("c", Position { epoch: 0, seq: 41 });
        assert_eq!(s.next("c"), Position { epoch: 0, seq: 42 });
        let mut bumped = MemorySequencer::new(3);
        bumped.resume_after("c", Position { epoch: 2, seq: 9 });
        assert_eq!(bumped.next("c"), Position { epoch: 3, seq: 0 });
    }
}
