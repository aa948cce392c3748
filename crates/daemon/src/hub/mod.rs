//! The hub control tap, joined into the daemon (design record, "The hub control tap"): one
//! outbound WebSocket to Cline's hub that mirrors the approval loop as `attention.*` on the
//! session lane the hooks own, and carries the commands the intake accepts.
//!
//! - [`settings`]: the gates and where the hub is.
//! - [`client`]: the connection: register, subscribe (resuming with `sinceSequence`),
//!   reconnect every second, the ack guard. Any failure degrades to observe-only; the hook path
//!   never waits on it.
//! - [`tap`]: what a hub event or reply does to a session's lane.
//!
//! The intake hands accepted commands over a [`Link`]; the client answers through
//! [`crate::intake::Intake::settle`].

mod client;
pub mod settings;
pub mod tap;
#[cfg(test)]
mod tests;

pub use settings::Settings;
pub use tap::dismiss_before_end;

use crate::intake::Intake;
use crate::sessions::Sessions;
use cline_hub::control::{Delivery, HubCommand};
use cline_hub::CommandKey;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A command the intake accepted for the hub.
#[derive(Debug, Clone)]
pub struct Request {
    pub key: CommandKey,
    pub session: String,
    pub command_id: String,
    pub hub: HubCommand,
    pub kind: Kind,
}

/// What the lane must learn when the hub answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Respond { approval_id: String },
    Cancel { run: String },
    SendInput { delivery: Delivery },
}

/// The intake's side of the tap: whether it is connected, and where accepted commands go.
#[derive(Clone)]
pub struct Link {
    tx: mpsc::UnboundedSender<Request>,
    connected: Arc<AtomicBool>,
}

/// The tap's side of the [`Link`].
pub struct Requests {
    rx: mpsc::UnboundedReceiver<Request>,
    connected: Arc<AtomicBool>,
}

/// A connected pair.
pub fn link() -> (Link, Requests) {
    let (tx, rx) = mpsc::unbounded_channel();
    let connected = Arc::new(AtomicBool::new(false));
    (
        Link {
            tx,
            connected: connected.clone(),
        },
        Requests { rx, connected },
    )
}

impl Link {
    /// Registered and subscribed right now: a command sent now reaches the hub.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// Hands a command to the tap; gives it back when the tap is gone.
    pub fn send(&self, request: Request) -> Result<(), Box<Request>> {
        self.tx.send(request).map_err(|e| Box::new(e.0))
    }
}

/// Starts the tap. `requests` is the other end of the intake's [`Link`] (with the control gate
/// off nothing is ever sent on it).
pub fn spawn(
    settings: Settings,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    requests: Requests,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(client::run(settings, sessions, intake, requests))
}
