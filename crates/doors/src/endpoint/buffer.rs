//! The bounded replay buffer (AEP-0003 §5): per session, the last `depth` sequenced Events in
//! `(epoch, seq)` order, for at most `max_sessions` sessions (the least recently written one
//! is let go first), and at most `max_bytes` of memory in all (the oldest Events held are let
//! go first, whatever their session). An Event longer than `max_event` bytes is never held:
//! the collector refuses such Events (413), and the daemon's own are read from their log.
//!
//! Admission dedupes on `(source, id)` (AEP-0001 §7.4): a redelivery is not held twice (live
//! fan-out still forwards it, §5). Agent-scoped Events and commands carry no position and are
//! never held: they are live-only.
//!
//! A resume is "exhausted" when the buffer has evicted an Event after the requested position,
//! so the consumer knows it missed something (§3.3.3); a gap the emitter left, or a position
//! from an epoch the buffer never held, is not reported as one. A session let go as a whole
//! is simply absent, as the reference relay does.
//!
//! The daemon's own Events are also in its session logs, so memory need not hold all of them:
//! per session the buffer knows from which position on it holds every own Event admitted
//! (`own_from`), and a replay reads what lies before that from the log.

use super::stored::Stored;
use aep_core::sequence::Position;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

pub struct ReplayBuffer {
    depth: usize,
    max_sessions: usize,
    max_bytes: usize,
    max_event: usize,
    /// The weight of everything held.
    bytes: usize,
    sessions: HashMap<String, SessionBuffer>,
    /// Writes so far: the recency clock of session eviction.
    clock: u64,
}

struct SessionBuffer {
    events: VecDeque<Arc<Stored>>,
    ids: HashSet<(String, String)>,
    /// The highest position evicted for depth.
    evicted_through: Option<Position>,
    /// Every own Event admitted at or after this position is held (`None`: none is).
    own_from: Option<Position>,
    /// The weight of its Events.
    bytes: usize,
    written: u64,
}

/// What a resume from one position finds.
#[derive(Debug, Default)]
pub struct Replay {
    /// `Some(earliest held)` when Events after the requested position were evicted.
    pub exhausted: Option<Position>,
    /// Held Events strictly after the position, ascending.
    pub events: Vec<Arc<Stored>>,
    /// Every own Event of the session at or after this position is among the held ones.
    pub own_from: Option<Position>,
}

impl ReplayBuffer {
    /// The bounds: Events per session, sessions, memory in all, one Event's line in bytes.
    pub fn new(depth: usize, max_sessions: usize, max_bytes: usize, max_event: usize) -> Self {
        ReplayBuffer {
            depth: depth.max(1),
            max_sessions: max_sessions.max(1),
            max_bytes,
            max_event,
            bytes: 0,
            sessions: HashMap::new(),
            clock: 0,
        }
    }

    /// Holds a sequenced session Event; `false` when it holds that `(source, id)` already, the
    /// Event has no position, or it is too large to hold.
    pub fn admit(&mut self, stored: &Arc<Stored>) -> bool {
        let (Some(session), Some(position)) = (stored.session(), stored.position()) else {
            return false;
        };
        if stored.event.line.len() > self.max_event {
            if let Some(buffer) = self.sessions.get_mut(session).filter(|_| stored.own) {
                // Memory no longer holds every own Event from `own_from` on: the log does.
                buffer.own_from = None;
            }
            return false;
        }
        self.clock += 1;
        if !self.sessions.contains_key(session) && self.sessions.len() >= self.max_sessions {
            self.evict_least_recent();
        }
        let buffer = self
            .sessions
            .entry(session.to_string())
            .or_insert_with(|| SessionBuffer {
                events: VecDeque::new(),
                ids: HashSet::new(),
                evicted_through: None,
                own_from: None,
                bytes: 0,
                written: 0,
            });
        buffer.written = self.clock;
        let (source, id) = stored.key();
        if !buffer.ids.insert((source.to_string(), id.to_string())) {
            return false;
        }
        // Events almost always arrive in order: find the slot from the tail.
        let mut at = buffer.events.len();
        while at > 0 && buffer.events[at - 1].position() > Some(position) {
            at -= 1;
        }
        buffer.events.insert(at, stored.clone());
        buffer.bytes += stored.weight;
        self.bytes += stored.weight;
        if stored.own && buffer.own_from.is_none() {
            buffer.own_from = Some(position);
        }
        if buffer.events.len() > self.depth {
            self.bytes -= buffer.evict_oldest();
        }
        while self.bytes > self.max_bytes {
            self.evict_oldest_held();
        }
        true
    }

    /// The weight of everything held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Lets go of the oldest Event held, whatever its session.
    fn evict_oldest_held(&mut self) {
        let oldest = self
            .sessions
            .values_mut()
            .filter_map(|b| Some((b.events.front()?.n, b)))
            .min_by_key(|(n, _)| *n)
            .map(|(_, b)| b);
        match oldest {
            Some(buffer) => self.bytes -= buffer.evict_oldest(),
            None => self.bytes = 0,
        }
    }

    /// Drops a session whole (the registry closed it).
    pub fn forget(&mut self, session: &str) {
        if let Some(buffer) = self.sessions.remove(session) {
            self.bytes -= buffer.bytes;
        }
        if self.sessions.capacity() > 4 * self.sessions.len().max(16) {
            self.sessions.shrink_to_fit();
        }
    }

    fn evict_least_recent(&mut self) {
        let oldest = self
            .sessions
            .iter()
            .min_by_key(|(_, b)| b.written)
            .map(|(s, _)| s.clone());
        if let Some(buffer) = oldest.and_then(|session| self.sessions.remove(&session)) {
            self.bytes -= buffer.bytes;
        }
    }

    /// The held Events of `session` strictly after `after` (all of them for `None`), and from
    /// where on it holds every own Event.
    pub fn replay(&self, session: &str, after: Option<Position>) -> Replay {
        let Some(buffer) = self.sessions.get(session) else {
            return Replay::default();
        };
        let events = buffer
            .events
            .iter()
            .filter(|e| after.is_none_or(|after| e.position() > Some(after)))
            .cloned()
            .collect();
        let exhausted = match (after, buffer.evicted_through) {
            (Some(after), Some(evicted)) if evicted > after => buffer.events.front().and_then(|e| e.position()),
            _ => None,
        };
        Replay {
            exhausted,
            events,
            own_from: buffer.own_from,
        }
    }

    /// Every session held, for replay-all (AEP-0003 §5).
    pub fn sessions(&self) -> Vec<String> {
        let mut sessions: Vec<(&String, u64)> = self.sessions.iter().map(|(s, b)| (s, b.written)).collect();
        sessions.sort_by_key(|(_, written)| *written);
        sessions.into_iter().map(|(s, _)| s.clone()).collect()
    }
}

impl SessionBuffer {
    /// Lets go of its oldest Event; returns the weight freed.
    fn evict_oldest(&mut self) -> usize {
        let Some(old) = self.events.pop_front() else {
            return 0;
        };
        self.bytes -= old.weight;
        let (source, id) = old.key();
        self.ids.remove(&(source.to_string(), id.to_string()));
        self.evicted_through = self.evicted_through.max(old.position());
        if old.own {
            // Own Events arrive in order, so the next held one starts the complete run again.
            self.own_from = self.events.iter().find(|e| e.own).and_then(|e| e.position());
        }
        old.weight
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::Published;
    use serde_json::json;

    fn ev(session: &str, id: &str, epoch: u64, seq: u64) -> Arc<Stored> {
        let value = json!({"source": "aep://h/agent/a", "id": id, "session": session, "epoch": epoch, "seq": seq});
        let line = value.to_string();
        Arc::new(Stored::new(Arc::new(Published { value, line }), 0, false))
    }

    fn own(session: &str, id: &str, seq: u64) -> Arc<Stored> {
        let value = json!({"source": "aep://h/agent/cline", "id": id, "session": session, "seq": seq});
        let line = value.to_string();
        Arc::new(Stored::new(Arc::new(Published { value, line }), 0, true))
    }

    fn seqs(r: &Replay) -> Vec<u64> {
        r.events.iter().map(|e| e.position().unwrap().seq).collect()
    }

    #[test]
    fn admission_dedupes_orders_and_evicts_with_an_exhausted_marker() {
        let mut b = ReplayBuffer::new(3, 10, usize::MAX, usize::MAX);
        assert!(b.admit(&ev("s", "a", 0, 0)));
        assert!(b.admit(&ev("s", "c", 0, 2)));
        assert!(b.admit(&ev("s", "b", 0, 1)), "a late Event is slotted by position");
        assert!(!b.admit(&ev("s", "b", 0, 1)), "a redelivery is held once");
        assert_eq!(seqs(&b.replay("s", None)), [0, 1, 2]);
        let r = b.replay("s", Some(Position { epoch: 0, seq: 0 }));
        assert_eq!((seqs(&r), r.exhausted), (vec![1, 2], None));
        assert!(b.admit(&ev("s", "d", 0, 3)));
        let r = b.replay("s", Some(Position { epoch: 0, seq: 0 }));
        assert_eq!(
            (seqs(&r), r.exhausted),
            (vec![1, 2, 3], None),
            "nothing after 0:0 was evicted"
        );
        assert!(b.admit(&ev("s", "e", 0, 4)));
        let r = b.replay("s", Some(Position { epoch: 0, seq: 0 }));
        assert_eq!(r.exhausted, Some(Position { epoch: 0, seq: 2 }));
        assert_eq!(seqs(&r), [2, 3, 4]);
        assert!(b.admit(&ev("s", "a", 0, 0)), "an evicted id is no longer remembered");
        assert_eq!(
            seqs(&b.replay("s", None)),
            [2, 3, 4],
            "and an old position is evicted again"
        );
    }

    #[test]
    fn unsequenced_events_are_not_held_and_sessions_are_bounded() {
        let mut b = ReplayBuffer::new(10, 2, usize::MAX, usize::MAX);
        let agent = Arc::new(Stored::new(
            Arc::new(Published {
                value: json!({"id": "x", "type": "agent.heartbeat"}),
                line: String::new(),
            }),
            0,
            false,
        ));
        assert!(!b.admit(&agent));
        b.admit(&ev("one", "1", 0, 0));
        b.admit(&ev("two", "2", 0, 0));
        b.admit(&ev("one", "3", 0, 1));
        b.admit(&ev("three", "4", 0, 0));
        assert_eq!(
            b.sessions(),
            ["one", "three"],
            "the least recently written session went"
        );
        assert!(b.replay("two", None).events.is_empty());
    }

    #[test]
    fn own_from_marks_where_memory_holds_every_own_event() {
        let p = |seq| Some(Position { epoch: 0, seq });
        let mut b = ReplayBuffer::new(3, 10, usize::MAX, usize::MAX);
        b.admit(&ev("s", "x", 0, 5));
        assert_eq!(b.replay("s", None).own_from, None, "collected Events are not the log's");
        b.admit(&own("s", "a", 7));
        b.admit(&own("s", "b", 8));
        assert_eq!(b.replay("s", None).own_from, p(7));
        b.admit(&own("s", "c", 9));
        assert_eq!(
            b.replay("s", None).own_from,
            p(7),
            "evicting a collected Event keeps it"
        );
        b.admit(&own("s", "d", 10));
        assert_eq!(b.replay("s", None).own_from, p(8), "evicting an own Event moves it on");
    }

    fn sized(session: &str, id: &str, seq: u64, bytes: usize, own: bool) -> Arc<Stored> {
        let value = json!({"source": "aep://h/agent/a", "id": id, "session": session, "seq": seq, "data": {"x": "y".repeat(bytes)}});
        let line = value.to_string();
        Arc::new(Stored::new(Arc::new(Published { value, line }), seq + 1, own))
    }

    #[test]
    fn memory_is_bounded_by_bytes_the_oldest_going_first() {
        let one = sized("a", "0", 0, 10_000, false).weight;
        assert!(one > 20_000, "the line and the parsed value both count: {one}");
        let line = sized("a", "0", 0, 10_000, false).event.line.len();
        let mut b = ReplayBuffer::new(100, 10, 3 * one + one / 2, line + 100);
        b.admit(&sized("a", "0", 0, 10_000, false));
        b.admit(&sized("b", "1", 1, 10_000, false));
        b.admit(&sized("a", "2", 2, 10_000, false));
        assert_eq!(b.bytes(), 3 * one);
        b.admit(&sized("b", "3", 3, 10_000, false));
        assert_eq!(b.bytes(), 3 * one, "the oldest Event went, from whichever session");
        let r = b.replay("a", Some(Position { epoch: 0, seq: 0 }));
        assert_eq!(seqs(&r), [2]);
        assert!(b.replay("a", None).events.len() == 1 && b.replay("b", None).events.len() == 2);
        assert!(
            !b.admit(&sized("a", "big", 4, 30_000, false)),
            "over the per-Event limit"
        );
        assert_eq!(b.bytes(), 3 * one);
        b.admit(&own("c", "o1", 5));
        assert_eq!(b.replay("c", None).own_from, Some(Position { epoch: 0, seq: 5 }));
        assert!(!b.admit(&sized("c", "o2", 6, 30_000, true)));
        assert_eq!(
            b.replay("c", None).own_from,
            None,
            "an own Event too large to hold leaves it to the log"
        );
        b.forget("b");
        b.forget("a");
        b.forget("c");
        assert_eq!(b.bytes(), 0);
    }

    /// This thread's live heap, as malloc reserves it (usable size and header): the buffer's
    /// bound must hold against what memory it really takes, not a model of it.
    struct Counting;

    thread_local! {
        static LIVE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
    }

    #[allow(unsafe_code)] // a GlobalAlloc; each call forwards to the system allocator
    unsafe impl std::alloc::GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            // SAFETY: forwarded as given; the size read is of the block just returned.
            unsafe {
                let ptr = std::alloc::System.alloc(layout);
                if !ptr.is_null() {
                    let n = libc::malloc_usable_size(ptr.cast()) as isize + 8;
                    let _ = LIVE.try_with(|l| l.set(l.get() + n));
                }
                ptr
            }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            // SAFETY: as above; the size is read before the block is given back.
            unsafe {
                let n = libc::malloc_usable_size(ptr.cast()) as isize + 8;
                let _ = LIVE.try_with(|l| l.set(l.get() - n));
                std::alloc::System.dealloc(ptr, layout)
            }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn live() -> isize {
        LIVE.with(|l| l.get())
    }

    /// An Event as the daemon writes one (value built, line serialized) or as a collector
    /// receives one (line parsed), its data of about `size` bytes in a few fields.
    fn realistic(n: u64, size: usize, parsed: bool) -> Arc<Stored> {
        let value = json!({
            "specversion": "0.1",
            "id": format!("01KB{n:022}"),
            "source": "aep://build-host-7/agent/cline",
            "type": if n.is_multiple_of(3) { "tool.requested" } else { "tool.completed" },
            "time": "2026-12-03T07:15:00.123Z",
            "session": format!("1796007203184_{:05}", n % 40),
            "run": format!("01KBRUN{:019}", n % 40),
            "seq": n,
            "capture": "redacted",
            "data": {
                "tool": {"name": "execute_command", "call_id": format!("call_{n}")},
                "input": {"command": "x".repeat(size), "cwd": "/home/dev/project"},
                "gen_ai.usage.input_tokens": n * 7,
                "labels": ["a", "bb", "ccc"],
            },
        });
        let line = serde_json::to_string(&value).unwrap();
        let value = if parsed {
            serde_json::from_str(&line).unwrap()
        } else {
            value
        };
        Arc::new(Stored::new(Arc::new(Published { value, line }), n, !parsed))
    }

    #[test]
    fn the_byte_bound_holds_against_the_memory_really_taken() {
        const BOUND: usize = 4 << 20;
        for (size, parsed) in [(40, false), (40, true), (900, false), (3_000, true)] {
            let before = live();
            let mut b = ReplayBuffer::new(100_000, 1_000, BOUND, 1 << 20);
            for n in 0..40_000 {
                let event = realistic(n, size + (n as usize % 7) * 10, parsed);
                b.admit(&event);
                if b.bytes() >= BOUND - 64 * 1024 && n > 20_000 {
                    break;
                }
            }
            let taken = (live() - before) as f64;
            let counted = b.bytes() as f64;
            assert!(b.bytes() <= BOUND);
            assert!(
                counted > 0.9 * BOUND as f64,
                "filled to its bound: {counted} ({size} B, parsed: {parsed})"
            );
            let ratio = taken / counted;
            assert!(
                (0.85..=1.15).contains(&ratio),
                "{size}-byte Events (parsed: {parsed}): {taken} bytes taken for {counted} counted ({ratio:.2}x)"
            );
            drop(b);
        }
    }
}
