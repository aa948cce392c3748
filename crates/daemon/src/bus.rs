//! The event bus: every Event the daemon appends to a session log is then published here for
//! the live sinks (the embedded endpoint, the relay binding). A sink that falls behind loses
//! its oldest unread Events (it sees `Lagged` and can replay from the log or its buffer); it
//! never slows the hook path, which only appends and publishes.

use serde_json::Value;
use std::sync::Arc;
use tokio::sync::broadcast;

/// How many Events a slow subscriber may fall behind before it lags.
pub const CAPACITY: usize = 16 * 1024;

/// One published Event: its JSON value and the exact line written to the log.
#[derive(Debug)]
pub struct Published {
    pub value: Value,
    pub line: String,
}

#[derive(Clone)]
pub struct Bus {
    tx: broadcast::Sender<Arc<Published>>,
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
        let _ = self.tx.send(event.clone());
        event
    }

    /// Publishes an Event again, byte-identical (a recorded ack re-emitted, AEP-0004 §3).
    pub fn republish(&self, event: &Arc<Published>) {
        let _ = self.tx.send(event.clone());
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }
}
