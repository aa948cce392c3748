//! Whether a cancel sent to a machine did anything, read from the stream. The owning daemon's
//! ack says only that the command was sent (the hub answers `run.abort` ok whatever it finds: a
//! run whose client is gone goes on waiting), so `fleet cancel` and the console follow the
//! session's subject, from before the command is sent, until a run or the session ends or
//! [`person::CANCEL_WAIT`] passes; the daemons answer NATS with the ack alone.

use crate::nats_contract::subject;
use crate::person;
use anyhow::Context;
use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use std::time::Duration;

/// A session's subject, followed from the moment it was made.
pub struct Watch {
    messages: consumer::pull::Ordered,
}

impl Watch {
    /// Follows `session` on `host` in `stream` from now on (made before the command is sent, so
    /// an end that comes at once is not missed).
    pub async fn start(client: &async_nats::Client, stream: &str, host: &str, session: &str) -> anyhow::Result<Watch> {
        let stream = jetstream::new(client.clone())
            .get_stream(stream)
            .await
            .with_context(|| format!("cannot read the JetStream stream {stream}"))?;
        let messages = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: subject::of_session(Some(host), session),
                deliver_policy: consumer::DeliverPolicy::New,
                ..Default::default()
            })
            .await
            .context("cannot follow the session on the stream")?
            .messages()
            .await
            .context("cannot follow the session on the stream")?;
        Ok(Watch { messages })
    }

    /// The type of the first Event that ends a run or the session within `wait`
    /// ([`person::ends_run`]), or [`person::NO_EFFECT`].
    pub async fn run_end(mut self, wait: Duration) -> String {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = match tokio::time::timeout_at(deadline, self.messages.next()).await {
                Ok(Some(Ok(message))) => message,
                Ok(Some(Err(e))) => {
                    tracing::debug!(error = %e, "the stream consumer failed while a cancel's effect was awaited");
                    return person::NO_EFFECT.to_string();
                }
                Ok(None) | Err(_) => return person::NO_EFFECT.to_string(),
            };
            if let Ok(event) = super::view::event_of(&message.payload) {
                if person::ends_run(&event) {
                    return event["type"].as_str().unwrap_or_default().to_string();
                }
            }
        }
    }
}
