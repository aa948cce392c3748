//! The hub control tap, joined into the daemon (design record, "The hub control tap"): one
//! outbound WebSocket to Cline's hub that mirrors the approval loop as `attention.*` on the
//! session lane the hooks own, and carries the commands the intake accepts.
//!
//! - [`settings`]: where the hub is, as resolved from the daemon's settings.
//! - [`client`]: the connection: register, subscribe (resuming with `sinceSequence`),
//!   reconnect with a jittered backoff, the ack guard. Any failure degrades to observe-only;
//!   the hook path never waits on it.
//! - [`tap`]: what a hub event or reply does to a session's lane.
//!
//! Each `usage.updated` goes to the budgets ([`crate::budget::Watch`]), each `session.*`
//! frame's model and workspace too.
//!
//! The intake hands accepted commands over a [`crate::control::Link`]; the tap answers through
//! [`crate::control::Intake::settle`]. Lane work (file appends) runs off the async workers.

mod client;
pub mod doctor;
pub mod settings;
pub mod status;
pub mod tap;

pub use settings::Settings;
pub use status::Status;

use crate::budget::Watch;
use crate::control::{Intake, Requests};
use crate::lane::Sessions;
use std::sync::Arc;
use tokio::sync::Mutex;

/// One run of the tap, until it is cancelled (the supervisor starts a fresh one if it fails).
/// `requests` is the other end of the intake's link (with the control gate off nothing is ever
/// sent on it); each run holds it while it lives.
pub async fn run(
    settings: Settings,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    requests: Arc<Mutex<Requests>>,
    status: Arc<Status>,
    budget: Arc<Watch>,
) {
    let mut requests = requests.lock().await;
    client::run(settings, sessions, intake, &mut requests, &status, budget).await
}
