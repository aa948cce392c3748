//! A command to one machine, over NATS (docs/fleet.md): core request/reply on the host's
//! control subject ([`machine::control_subject`]); the request is the AEP command Event, the
//! reply its ack Event as that daemon's intake decided it. What can keep it from being
//! decided is told apart: nobody listens (control is off there), the server's permissions
//! refused the publish, no reply in time.

use crate::sinks::nats::machine;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

/// What came of a request.
#[derive(Debug)]
pub enum Sent {
    /// The daemon's ack Event (`control.accepted` or `control.rejected`).
    Ack(Value),
    /// No daemon subscribes to the host's subject: it is down, or runs without
    /// `AEP_NATS_CONTROL=1`.
    NoResponders,
    /// The server refused the publish: the user may not command that machine. Its words.
    Refused(String),
    /// Nothing came back within the wait.
    TimedOut,
    /// The reply is not an Event.
    BadReply(String),
}

/// The server's errors, as the client's event callback hears them: pass [`Refusals::hear`] to
/// [`super::catch_up::Source::client`].
pub struct Refusals {
    rx: mpsc::UnboundedReceiver<String>,
}

impl Refusals {
    pub fn new() -> (Refusals, impl Fn(&async_nats::Event) + Send + Sync + 'static) {
        let (tx, rx) = mpsc::unbounded_channel();
        let hear = move |event: &async_nats::Event| {
            if let async_nats::Event::ServerError(async_nats::ServerError::Other(text)) = event {
                let _ = tx.send(text.clone());
            }
        };
        (Refusals { rx }, hear)
    }
}

/// Sends `command` to `host`'s daemon and waits for its ack, at most `wait`.
pub async fn send(
    client: &async_nats::Client,
    refusals: &mut Refusals,
    host: &str,
    command: &Value,
    wait: Duration,
) -> anyhow::Result<Sent> {
    let subject = machine::control_subject(host);
    let request = async_nats::Request::new()
        .payload(serde_json::to_vec(command)?.into())
        .timeout(Some(wait));
    let refused = async {
        // The server names the subject it refused: `Permissions Violation for Publish to "..."`.
        while let Some(text) = refusals.rx.recv().await {
            if text.contains("Permissions Violation") && text.contains(&subject) {
                return text;
            }
        }
        std::future::pending().await
    };
    let reply = tokio::select! {
        reply = client.send_request(subject.clone(), request) => reply,
        text = refused => return Ok(Sent::Refused(text)),
    };
    use async_nats::client::RequestErrorKind;
    Ok(match reply {
        Ok(message) => match serde_json::from_slice::<Value>(&message.payload) {
            Ok(ack) if ack["type"].as_str().is_some_and(|t| t.starts_with("control.")) => Sent::Ack(ack),
            Ok(_) | Err(_) => Sent::BadReply(String::from_utf8_lossy(&message.payload).chars().take(200).collect()),
        },
        Err(e) => match e.kind() {
            RequestErrorKind::NoResponders => Sent::NoResponders,
            RequestErrorKind::TimedOut => Sent::TimedOut,
            _ => return Err(anyhow::anyhow!(e).context(format!("cannot send the command on {subject}"))),
        },
    })
}
