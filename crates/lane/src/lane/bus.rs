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

/// How many notes a sink may fall behind before it lags. The sinks' pumps only move notes into
/// memory, so they keep up; and a small ring keeps little: a broadcast channel holds its last
/// `CAPACITY` values until they are overwritten, whoever has read them.
pub const CAPACITY: usize = 1024;

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
    /// The registry let these sessions go (ended past their grace period, or idle): sinks may
    /// forget them. One note per sweep, however many it closed, so a burst of closes never
    /// crowds Events out of the ring. A session comes back, from its log, if it speaks again.
    Closed(Arc<[String]>),
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

    /// Says that sessions left the registry.
    pub fn closed(&self, sessions: Vec<String>) {
        let _ = self.tx.send(Note::Closed(sessions.into()));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Note> {
        self.tx.subscribe()
    }
}
