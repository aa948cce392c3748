//! A command to one machine, over NATS (docs/fleet.md): core request/reply on the host's
//! control subject ([`machine::control_subject`]); the request is the AEP command Event, the
//! reply its ack Event as that daemon's intake decided it. What can keep it from being
//! decided is told apart: nobody listens (control is off there), the server's permissions
//! refused the publish, no reply in time.

use crate::nats_contract::machine;
use aep_core::types::CONTROL_REJECTED;
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

impl Sent {
    /// Why no ack (or answer) came, in the words every sender uses (`fleet approve`, `fleet
    /// approvals --detail`, the console's buttons and its "What it asks"): `None` for an ack.
    /// `wait` is how long it was waited for.
    pub fn why_not(&self, host: &str, wait: Duration) -> Option<String> {
        let subject = machine::control_subject(host);
        Some(match self {
            Sent::Ack(_) => return None,
            Sent::NoResponders => format!(
                "no daemon answers on {subject}: machine {host} does not take commands over NATS (its daemon is down, \
                 or runs without AEP_NATS_CONTROL=1)"
            ),
            Sent::Refused(text) => format!(
                "the NATS server refused to let this user command {host} ({}): it needs permission to publish on {subject}",
                text.trim()
            ),
            Sent::TimedOut => format!(
                "no ack from {host} within {}s: it may still be decided; `aep-cline fleet sessions --host {host}` \
                 will show it",
                wait.as_secs()
            ),
            Sent::BadReply(text) => format!("{host} answered with something that is no ack Event: {text}"),
        })
    }
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
    Ok(
        match request(client, refusals, host, command, wait, |v| {
            v["type"].as_str().is_some_and(|t| t.starts_with("control."))
        })
        .await?
        {
            Reply::Answer(ack) => Sent::Ack(ack),
            Reply::Not(sent) => sent,
        },
    )
}

/// What came of a question about a pending approval ([`machine::ASK_DETAIL`]).
#[derive(Debug)]
pub enum Asked {
    /// What it asks (a [`cline_hub::Detail`] as JSON).
    Detail(Value),
    /// The daemon holds none: why, in its words.
    Without(String),
    /// As for a command: nobody listens, the server refused, no answer in time, not an answer.
    Not(Sent),
}

/// Asks `host`'s daemon what the pending approval `attention` asks, at most `wait`. The
/// server lets only a user who may command that machine publish the question.
pub async fn ask_detail(
    client: &async_nats::Client,
    refusals: &mut Refusals,
    host: &str,
    attention: &str,
    wait: Duration,
) -> anyhow::Result<Asked> {
    let question = machine::ask_detail(attention);
    let is_answer = |v: &Value| v["ask"] == machine::ASK_DETAIL || v["type"] == CONTROL_REJECTED;
    Ok(
        match request(client, refusals, host, &question, wait, is_answer).await? {
            Reply::Answer(answer) if answer["detail"].is_object() => Asked::Detail(answer["detail"].clone()),
            Reply::Answer(answer) => Asked::Without(
                answer["why"]
                    .as_str()
                    .or(answer["data"]["detail"].as_str())
                    .unwrap_or("the daemon kept no detail")
                    .to_string(),
            ),
            Reply::Not(sent) => Asked::Not(sent),
        },
    )
}

enum Reply {
    Answer(Value),
    Not(Sent),
}

/// One request on `host`'s control subject: its reply when `expected` takes it.
async fn request(
    client: &async_nats::Client,
    refusals: &mut Refusals,
    host: &str,
    body: &Value,
    wait: Duration,
    expected: impl Fn(&Value) -> bool,
) -> anyhow::Result<Reply> {
    let subject = machine::control_subject(host);
    let request = async_nats::Request::new()
        .payload(serde_json::to_vec(body)?.into())
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
        text = refused => return Ok(Reply::Not(Sent::Refused(text))),
    };
    use async_nats::client::RequestErrorKind;
    Ok(match reply {
        Ok(message) => match serde_json::from_slice::<Value>(&message.payload) {
            Ok(answer) if expected(&answer) => Reply::Answer(answer),
            Ok(_) | Err(_) => Reply::Not(Sent::BadReply(
                String::from_utf8_lossy(&message.payload).chars().take(200).collect(),
            )),
        },
        Err(e) => match e.kind() {
            RequestErrorKind::NoResponders => Reply::Not(Sent::NoResponders),
            RequestErrorKind::TimedOut => Reply::Not(Sent::TimedOut),
            _ => return Err(anyhow::anyhow!(e).context(format!("cannot send the request on {subject}"))),
        },
    })
}
