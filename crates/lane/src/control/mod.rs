//! AEP commands (AEP-0004): the one door every transport uses ([`intake`]), and what the intake
//! and the hub tap share, defined here below both so neither imports the other's insides: the
//! ack window, the [`Request`] the intake hands the tap, and the [`Link`] it hands it over.
//! What a person does (approve, cancel, ...) becomes a command and waits for its ack and
//! outcome in [`crate::person`], above the views it reads outcomes with.

pub mod held;
pub mod intake;

pub use intake::{Intake, Refusal};

use cline_hub::control::{Delivery, HubCommand};
use cline_hub::CommandKey;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The ack window this daemon promises (AEP-0004 §3).
pub const ACK_WINDOW_MS: u64 = 10_000;

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

/// The intake's side of the hub tap: whether it is connected, and where accepted commands go.
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

impl Requests {
    /// The next command for the hub; `None` once every [`Link`] is gone.
    pub async fn recv(&mut self) -> Option<Request> {
        self.rx.recv().await
    }

    /// A command already waiting, if any.
    pub fn try_recv(&mut self) -> Option<Request> {
        self.rx.try_recv().ok()
    }

    /// Tells the intake whether commands can reach the hub now.
    pub fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::SeqCst);
    }
}
