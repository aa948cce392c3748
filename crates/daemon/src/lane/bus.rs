//! The bus: every Event the lane appends to a session log is then published here for the live
//! sinks (the embedded endpoint, the relay binding), and so is the registry's word that a
//! session has left memory, so the sinks let go of it too instead of keeping a table of their
//! own. One channel for both keeps them in order: a sink never hears a session closed before
//! it has seen that session's last Event.
//!
//! A sink that falls behind loses its oldest unread notes (it sees `Lagged` and can replay
//! from the log or its buffer); it never slows the hook path, which only appends and publishes.

use serde_json::Value;
use std::sync::Arc;
use tokio::sync::broadcast;

/// How many notes a slow subscriber may fall behind before it lags.
pub const CAPACITY: usize = 16 * 1024;

/// One published Event: its JSON value and the exact line written to the log.
#[derive(Debug)]
pub struct Published {
    pub value: Value,
    pub line: String,
}

/// What the bus carries.
#[derive(Debug, Clone)]
pub enum Note {
    /// An Event, already in its session's log.
    Event(Arc<Published>),
    /// The registry let this session go (ended past its grace period, or idle): sinks may
    /// forget it. It comes back, from its log, if it speaks again.
    Closed(Arc<str>),
}

#[derive(Clone)]
pub struct Bus {
    tx: broadcast::Sender<Note>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl Bus {
    /// Publishes one Event (already in the log) and hands it back shared.
    pub fn publish(&self, event: Published) -> Arc<Published> {
        let event = Arc::new(event);
        // No subscriber is not an error: the log already has the Event.
        let _ = self.tx.send(Note::Event(event.clone()));
        event
    }

    /// Publishes an Event again, byte-identical (a recorded ack re-emitted, AEP-0004 §3).
    pub fn republish(&self, event: &Arc<Published>) {
        let _ = self.tx.send(Note::Event(event.clone()));
    }

    /// Says that a session left the registry.
    pub fn closed(&self, session: &str) {
        let _ = self.tx.send(Note::Closed(session.into()));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Note> {
        self.tx.subscribe()
    }
}
