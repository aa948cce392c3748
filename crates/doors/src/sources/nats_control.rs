//! Control over NATS (`AEP_NATS_CONTROL=1`, docs/fleet.md): the daemon answers core NATS
//! requests on its own host's subject ([`machine::control_subject`]), one AEP command Event
//! (AEP-0004) per request, exactly what `POST /control` takes. Each goes through the same
//! intake as every other door ([`Intake::submit`]: dedupe, the ack guard, the capture rules,
//! the hub tap; the control gate `AEP_CLINE_HUB_CONTROL` decides what is accepted), and the
//! reply is the ack Event as logged (`control.accepted` / `control.rejected`). A request that
//! is no command (not JSON, larger than an Event may be, not a command Event, a session not emitted here) is
//! answered [`machine::refusal`] in words and leaves nothing in any log. A question
//! ([`machine::ASK_DETAIL`]: what a pending approval asks) is answered from memory, the same
//! permissions deciding who may ask.
//!
//! Who may send commands is the server's to say (permissions on `aep-control.<host>`); a
//! request it refuses never reaches the daemon. The server's own deliveries are never
//! commands ([`not_a_request`]): any user who may create a consumer can have JetStream deliver
//! stored messages to any subject, this one included, and those arrive as the server's, past
//! every publish permission; so a message JetStream delivered (an ack or flow-control reply
//! subject, `$JS.`..., or the stream's headers) is counted, logged and never answered.

use crate::backoff::Backoff;
use crate::control::{Intake, Refusal};
use crate::lane::Sessions;
use crate::nats_contract::connect::Connect;
use crate::nats_contract::machine;
use crate::person::{self, Sender};
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Requests answered at once, at most; more wait for a slot (the server keeps them queued).
const CONCURRENT: usize = 64;
/// Between failed connections: the sinks' pacing.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// What the door did, for `/healthz` (`nats.control`).
#[derive(Default)]
pub struct Health {
    /// This host's subject, once the door is made.
    subject: Mutex<Option<String>>,
    subscribed: AtomicBool,
    /// Requests that reached the daemon.
    requests: AtomicU64,
    /// Requests answered with an ack Event.
    acked: AtomicU64,
    /// Requests answered with a refusal (no command, or no ack in time).
    refused: AtomicU64,
    /// Questions answered ([`machine::ASK_DETAIL`]).
    asked: AtomicU64,
    /// Messages without a reply subject (a publish, not a request): nobody to answer.
    unanswerable: AtomicU64,
    /// Messages the server delivered from a stream (a consumer pointed at this subject), not
    /// a publisher's request: never a command.
    deliveries: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Health {
    pub fn status(&self) -> Value {
        json!({
            "subject": *self.subject.lock(),
            "subscribed": self.subscribed.load(Ordering::Relaxed),
            "requests": self.requests.load(Ordering::Relaxed),
            "acked": self.acked.load(Ordering::Relaxed),
            "refused": self.refused.load(Ordering::Relaxed),
            "asked": self.asked.load(Ordering::Relaxed),
            "unanswerable": self.unanswerable.load(Ordering::Relaxed),
            "deliveries_refused": self.deliveries.load(Ordering::Relaxed),
            "last_error": *self.last_error.lock(),
        })
    }
}

pub struct Control {
    connect: Connect,
    subject: String,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    /// The largest request taken: one Event's bound (`AEP_MAX_EVENT`).
    max_event: usize,
    health: Arc<Health>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl Control {
    pub fn new(
        connect: Connect,
        sessions: Arc<Sessions>,
        intake: Arc<Intake>,
        max_event: usize,
        health: Arc<Health>,
    ) -> Arc<Control> {
        let subject = machine::control_subject(sessions.host());
        *health.subject.lock() = Some(subject.clone());
        Arc::new(Control {
            connect,
            subject,
            sessions,
            intake,
            max_event,
            health,
            slots: Arc::new(tokio::sync::Semaphore::new(CONCURRENT)),
        })
    }

    /// Takes requests until the daemon stops, reconnecting with backoff.
    pub async fn run(self: Arc<Self>) {
        let mut backoff = Backoff::new(BACKOFF.0, BACKOFF.1);
        loop {
            let error = match self.serve(&mut backoff).await {
                Ok(()) => "the connection to the NATS server ended".to_string(),
                Err(e) => format!("{e:#}"),
            };
            self.health.subscribed.store(false, Ordering::Relaxed);
            tracing::warn!(%error, subject = %self.subject, "control over NATS is not listening; retrying");
            *self.health.last_error.lock() = Some(error);
            tokio::time::sleep(backoff.next_wait()).await;
        }
    }

    async fn serve(self: &Arc<Self>, backoff: &mut Backoff) -> anyhow::Result<()> {
        let (said, mut server) = tokio::sync::watch::channel(None);
        let client = self.connect.connect_watched("aep-cline control", said).await?;
        let mut requests = client
            .subscribe(self.subject.clone())
            .await
            .map_err(|e| anyhow::anyhow!(e).context(format!("cannot subscribe to {}", self.subject)))?;
        client
            .flush()
            .await
            .map_err(|e| anyhow::anyhow!(e).context("the NATS server did not confirm the subscription"))?;
        self.health.subscribed.store(true, Ordering::Relaxed);
        *self.health.last_error.lock() = None;
        backoff.reset();
        tracing::info!(subject = %self.subject, "taking control commands over NATS");
        loop {
            let message = tokio::select! {
                message = requests.next() => match message {
                    Some(message) => message,
                    None => return Ok(()),
                },
                changed = server.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let Some(error) = server.borrow_and_update().clone() else { continue };
                    if error.contains("Subscription") && error.contains(&self.subject) {
                        anyhow::bail!(
                            "the NATS server refused the subscription to {} ({error}): the daemon's user needs \
                             subscribe permission on it (docs/fleet.md, permissions)",
                            self.subject
                        );
                    }
                    tracing::warn!(%error, "the NATS server reported an error on the control connection");
                    *self.health.last_error.lock() = Some(error);
                    continue;
                }
            };
            self.health.requests.fetch_add(1, Ordering::Relaxed);
            if let Some(why) = not_a_request(message.reply.as_deref(), message.headers.as_ref()) {
                self.health.deliveries.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(subject = %self.subject, %why,
                    "refused a message on the control subject: JetStream delivered it, no publisher sent it, so it is no command (is a consumer pointed at this subject?)");
                continue;
            }
            let Some(reply) = message.reply else {
                self.health.unanswerable.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(subject = %self.subject, "a message on the control subject has no reply subject: send commands as requests");
                continue;
            };
            let Ok(slot) = self.slots.clone().acquire_owned().await else {
                return Ok(());
            };
            let (door, client) = (self.clone(), client.clone());
            tokio::spawn(async move {
                let answer = door.answer(&message.payload).await;
                let bytes = serde_json::to_vec(&answer).unwrap_or_default();
                if let Err(e) = client.publish(reply, bytes.into()).await {
                    tracing::warn!(error = %e, "cannot send a control reply over NATS; the ack is in the log and the stream");
                }
                drop(slot);
            });
        }
    }
}

/// The headers JetStream puts on a stored message it hands out (a republish, a direct get).
const STREAM_HEADERS: [&str; 3] = ["Nats-Stream", "Nats-Sequence", "Nats-Subject"];

/// Why a message on the control subject is the server's delivery and not a publisher's
/// request, or `None` for a request. A consumer's deliveries carry the server's reply
/// subjects (`$JS.ACK.<stream>.<consumer>...`, `$JS.FC...`); every `$` subject is the
/// server's (a client's inbox is `_INBOX.` or its own prefix, never `$`); a republished or
/// directly read message carries the stream's headers. Replying would only ack it.
pub fn not_a_request(reply: Option<&str>, headers: Option<&async_nats::HeaderMap>) -> Option<String> {
    if let Some(reply) = reply.filter(|r| r.starts_with('$')) {
        return Some(format!(
            "its reply subject {reply:?} is the server's (a JetStream delivery)"
        ));
    }
    let header = headers.and_then(|h| STREAM_HEADERS.into_iter().find(|name| h.get(*name).is_some()));
    header.map(|name| format!("it carries the stream header {name} (a message of a stream)"))
}

impl Control {
    /// The reply to one request: its ack Event, or a refusal in words.
    async fn answer(&self, payload: &[u8]) -> Value {
        let refused = |cause: Option<&str>, reason: &str, detail: String| {
            self.health.refused.fetch_add(1, Ordering::Relaxed);
            machine::refusal(cause, reason, &detail)
        };
        if payload.len() > self.max_event {
            let detail = format!(
                "the request is {} bytes; this daemon takes commands up to {} bytes (AEP_MAX_EVENT)",
                payload.len(),
                self.max_event
            );
            return refused(None, "invalid", detail);
        }
        let command: Value = match serde_json::from_slice(payload) {
            Ok(command @ Value::Object(_)) => command,
            Ok(_) => {
                return refused(
                    None,
                    "invalid",
                    "the request is not a JSON object: send one AEP command Event".into(),
                )
            }
            Err(e) => {
                return refused(
                    None,
                    "invalid",
                    format!("the request is not JSON ({e}): send one AEP command Event"),
                )
            }
        };
        if let Some(ask) = command.get("ask") {
            return self.ask(ask, &command);
        }
        let id = command["id"].as_str().map(str::to_string);
        let waited = person::submit_through(
            Sender::Remote,
            &self.sessions,
            &self.intake,
            command,
            person::ACK_WAIT,
            Duration::ZERO,
        )
        .await;
        let id = id.as_deref();
        match waited {
            Ok(person::Waited { ack: Some(ack), .. }) => {
                self.health.acked.fetch_add(1, Ordering::Relaxed);
                ack
            }
            Ok(_) => refused(
                id,
                "busy",
                format!(
                    "no ack within {}s (a command with this id may still be deciding): its ack will be in the stream",
                    person::ACK_WAIT.as_secs()
                ),
            ),
            Err(Refusal::Invalid(detail)) => refused(id, "invalid", detail),
            Err(e @ Refusal::NoRoute(_)) => refused(id, "refused", format!("{e} (host {})", self.sessions.host())),
            Err(e @ Refusal::Log(_)) => {
                tracing::error!(error = %e, "a command over NATS could not be recorded");
                refused(id, "busy", format!("{e}; send the command again with the same id"))
            }
        }
    }
}

impl Control {
    /// A question, not a command ([`machine::ASK_DETAIL`]): answered from memory, logged
    /// nowhere.
    fn ask(&self, ask: &Value, question: &Value) -> Value {
        self.health.asked.fetch_add(1, Ordering::Relaxed);
        let attention = question["attention"].as_str().unwrap_or_default();
        if ask != machine::ASK_DETAIL || attention.is_empty() || attention.len() > 128 {
            return machine::refusal(
                None,
                "invalid",
                "a question is {\"ask\": \"detail\", \"attention\": \"<attention.requested id>\"}",
            );
        }
        let local = self.sessions.local();
        let (detail, why) = if !local.is_on() {
            (None, Some("this machine keeps no detail (AEP_CLINE_LOCAL_DETAIL=0)"))
        } else {
            match local.asks(attention) {
                Some(detail) => (Some(json!(detail)), None),
                None => (
                    None,
                    Some("this machine holds no detail of it: answered already, not waiting on Cline's hub, or asked before the daemon's start"),
                ),
            }
        };
        machine::detail_answer(attention, detail, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_jetstream_delivers_is_never_a_request() {
        assert_eq!(not_a_request(Some("_INBOX.abc.1"), None), None);
        assert_eq!(
            not_a_request(Some("team._INBOX.x"), None),
            None,
            "a client's own inbox prefix"
        );
        assert_eq!(
            not_a_request(None, None),
            None,
            "no reply: unanswerable, said elsewhere"
        );
        for reply in ["$JS.ACK.AEP.evil.1.5.5.1796.0", "$JS.FC.AEP.x.y", "$SYS.REQ.x"] {
            assert!(not_a_request(Some(reply), None).unwrap().contains(reply), "{reply}");
        }
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", "x");
        assert_eq!(
            not_a_request(Some("_INBOX.a"), Some(&headers)),
            None,
            "a publisher's own headers"
        );
        headers.insert("Nats-Stream", "AEP");
        assert!(not_a_request(Some("_INBOX.a"), Some(&headers))
            .unwrap()
            .contains("Nats-Stream"));
    }
}
