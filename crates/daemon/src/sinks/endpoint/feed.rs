//! The endpoint's feed: one door for every Event the endpoint fans out (the daemon's own, from
//! the bus, and those other emitters POST or send on the socket). Admission into the replay
//! buffer and the live broadcast happen under one lock, and so does a subscriber's replay
//! snapshot, so a subscriber sees every Event exactly once across its replay and its live
//! tail: the live Events it must skip are those numbered at or below its snapshot.
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

/// One session's part of a replay.
#[derive(Debug)]
pub struct SessionReplay {
    pub session: String,
    /// `Some(earliest held)`: the requested position predates the buffer.
    pub exhausted: Option<Position>,
    pub events: Vec<Arc<Stored>>,
}

/// What a new subscription starts from.
pub struct Snapshot {
    pub replays: Vec<SessionReplay>,
    /// Live Events numbered at or below this are covered (replayed, or before the subscription).
    pub after_n: u64,
}

impl Feed {
    pub fn new(depth: usize, max_sessions: usize) -> Self {
        Feed {
            inner: Mutex::new(Inner {
                buffer: ReplayBuffer::new(depth, max_sessions),
                n: 0,
            }),
            tx: broadcast::channel(CAPACITY).0,
        }
    }

    /// Admits one Event: held in the replay buffer unless its `(source, id)` is held already,
    /// and sent live either way (redeliveries traverse the hop, AEP-0003 §5). Returns whether
    /// it was newly held.
    pub fn admit(&self, event: Arc<Published>) -> bool {
        let mut inner = self.inner.lock();
        inner.n += 1;
        let stored = Arc::new(Stored::new(event, inner.n));
        let held = inner.buffer.admit(&stored);
        // No subscriber is not an error.
        let _ = self.tx.send(stored);
        held
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

    /// The replay for `resume` and the admission number it covers, taken atomically.
    pub fn snapshot(&self, resume: &Resume) -> Snapshot {
        let inner = self.inner.lock();
        snapshot(&inner, resume)
    }

    /// A receiver plus the replay it continues, taken atomically (one SSE subscription).
    pub fn subscribe(&self, resume: &Resume) -> (Snapshot, broadcast::Receiver<Arc<Stored>>) {
        let inner = self.inner.lock();
        (snapshot(&inner, resume), self.tx.subscribe())
    }
}

fn snapshot(inner: &Inner, resume: &Resume) -> Snapshot {
    let replays = match resume {
        Resume::Live => Vec::new(),
        Resume::Sessions(positions) => positions
            .iter()
            .map(|(session, after)| {
                let r = inner.buffer.replay(session, *after);
                SessionReplay {
                    session: session.clone(),
                    exhausted: r.exhausted,
                    events: r.events,
                }
            })
            .collect(),
        Resume::All => inner
            .buffer
            .sessions()
            .into_iter()
            .map(|session| {
                let r = inner.buffer.replay(&session, None);
                SessionReplay {
                    session,
                    exhausted: None,
                    events: r.events,
                }
            })
            .collect(),
    };
    Snapshot {
        replays,
        after_n: inner.n,
    }
}
