//! The endpoint's feed: one door for every Event the endpoint fans out (the daemon's own, from
//! the bus, and those other emitters POST or send on the socket). Admission into the replay
//! buffer and the live broadcast happen under one lock, and so does a subscriber's replay
//! plan, so a subscriber sees every Event exactly once across its replay and its live
//! tail: the live Events it must skip are those numbered at or below its snapshot.
//!
//! The daemon's own Events are also in its session logs. A replay that reaches further back
//! than memory holds every own Event of a session reads the log up to that point and memory
//! from there ([`Plan`]); a session memory holds nothing of is read from its log to the end,
//! and the own Events that arrive live afterwards at or before the last position read are the
//! ones the log already gave (they were in flight between the log and the feed).
//!
//! A subscriber that falls more than [`CAPACITY`] Events behind is told so (`Lagged`) and
//! disconnected by its binding (AEP-0003 §8.4: never a silent drop of `notice`-and-above);
//! nothing here ever waits on a subscriber.

use super::buffer::ReplayBuffer;
use super::stored::Stored;
use crate::lane::Published;
use aep_core::sequence::Position;
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::broadcast;

/// How far a subscriber may fall behind before it is disconnected. The ring keeps its last
/// `CAPACITY` Events in memory whoever has read them, so it is sized for a healthy subscriber's
/// bursts, not as a store: history comes from the replay buffer (and the logs).
pub const CAPACITY: usize = 4 * 1024;

pub struct Feed {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Stored>>,
}

struct Inner {
    buffer: ReplayBuffer,
    /// The admission number of the last Event sent.
    n: u64,
}

/// Where a subscription's replay starts (`from`, `Last-Event-ID`, AEP-0003 §3.3, §5, §6.5).
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// Live delivery only.
    Live,
    /// Per session: strictly after a position, or (`None`) everything held.
    Sessions(Vec<(String, Option<Position>)>),
    /// Replay-all: every held session from its earliest Event, never exhausted.
    All,
}

/// One session's part of a replay, planned under the feed's lock.
#[derive(Debug)]
pub struct Plan {
    pub session: String,
    /// Strictly after this position (`None`: from the start).
    pub after: Option<Position>,
    /// Read the session's log first, when it has one: own Events after `after` and before
    /// this position (`Some(None)`: to the end). `None`: memory holds every own Event wanted.
    pub log: Option<Option<Position>>,
    /// Held Events after `after` that the log part does not cover, ascending.
    pub held: Vec<Arc<Stored>>,
    /// The buffer's verdict when the session has no log: `Some(earliest held)` when Events
    /// after the position were evicted.
    pub exhausted: Option<Position>,
}

/// What a new subscription starts from.
pub struct Snapshot {
    pub plans: Vec<Plan>,
    /// Replay-all: no position was asked for, so nothing can be exhausted (AEP-0003 §5).
    pub all: bool,
    /// Live Events numbered at or below this are covered (replayed, or before the subscription).
    pub after_n: u64,
}

impl Feed {
    /// The replay buffer's bounds: Events per session, sessions, bytes in all, bytes per Event.
    pub fn new(depth: usize, max_sessions: usize, max_bytes: usize, max_event: usize) -> Self {
        Feed {
            inner: Mutex::new(Inner {
                buffer: ReplayBuffer::new(depth, max_sessions, max_bytes, max_event),
                n: 0,
            }),
            tx: broadcast::channel(CAPACITY).0,
        }
    }

    /// Admits one Event: held in the replay buffer unless its `(source, id)` is held already,
    /// and sent live either way (redeliveries traverse the hop, AEP-0003 §5). Returns whether
    /// it was newly held. `own`: one of the daemon's Events, which its logs hold.
    pub fn admit(&self, event: Arc<Published>, own: bool) -> bool {
        let mut inner = self.inner.lock();
        inner.n += 1;
        let stored = Arc::new(Stored::new(event, inner.n, own));
        let held = inner.buffer.admit(&stored);
        // No subscriber is not an error.
        let _ = self.tx.send(stored);
        held
    }

    /// The replay buffer's weight, about (bytes).
    pub fn held_bytes(&self) -> usize {
        self.inner.lock().buffer.bytes()
    }

    /// Lets go of sessions the registry closed.
    pub fn forget(&self, sessions: &[String]) {
        let mut inner = self.inner.lock();
        for session in sessions {
            inner.buffer.forget(session);
        }
    }

    /// A receiver of every Event admitted from now on.
    pub fn receiver(&self) -> broadcast::Receiver<Arc<Stored>> {
        self.tx.subscribe()
    }

    /// The replay plan for `resume` and the admission number it covers, taken atomically.
    /// `logged`: the sessions with a log, for replay-all (listed before the lock is taken).
    pub fn snapshot(&self, resume: &Resume, logged: &[String]) -> Snapshot {
        let inner = self.inner.lock();
        snapshot(&inner, resume, logged)
    }

    /// A receiver plus the replay it continues, taken atomically (one SSE subscription).
    pub fn subscribe(&self, resume: &Resume, logged: &[String]) -> (Snapshot, broadcast::Receiver<Arc<Stored>>) {
        let inner = self.inner.lock();
        (snapshot(&inner, resume, logged), self.tx.subscribe())
    }
}

fn snapshot(inner: &Inner, resume: &Resume, logged: &[String]) -> Snapshot {
    let plans = match resume {
        Resume::Live => Vec::new(),
        Resume::Sessions(positions) => positions
            .iter()
            .map(|(session, after)| plan(&inner.buffer, session, *after))
            .collect(),
        Resume::All => {
            let on_disk: std::collections::HashSet<&String> = logged.iter().collect();
            let in_memory = inner.buffer.sessions().into_iter().filter(|s| !on_disk.contains(s));
            logged
                .iter()
                .cloned()
                .chain(in_memory)
                .map(|session| plan(&inner.buffer, &session, None))
                .collect()
        }
    };
    Snapshot {
        plans,
        all: *resume == Resume::All,
        after_n: inner.n,
    }
}

/// One session's replay after `after`: the log up to where memory holds every own Event,
/// then memory.
fn plan(buffer: &ReplayBuffer, session: &str, after: Option<Position>) -> Plan {
    let held = buffer.replay(session, after);
    let log = match (after, held.own_from) {
        (Some(after), Some(from)) if after >= from => None,
        (_, from) => Some(from),
    };
    let events = match held.own_from {
        // Own Events before `own_from` come from the log, in order.
        Some(from) if log.is_some() => held
            .events
            .into_iter()
            .filter(|e| !e.own || e.position().is_some_and(|p| p >= from))
            .collect(),
        // Read to the end, the log has every own Event.
        None => held.events.into_iter().filter(|e| !e.own).collect(),
        Some(_) => held.events,
    };
    Plan {
        session: session.to_string(),
        after,
        log,
        held: events,
        exhausted: held.exhausted,
    }
}
