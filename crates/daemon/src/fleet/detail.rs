//! One session's Events, fetched from the stream when a person asks (`aep-cline fleet show`):
//! the read model keeps summaries only, so its memory follows live state, and a session's
//! detail is read on demand from its own subject on its own host (`aep.<host>.*.<session>`, a
//! server-side filter, so only that session's messages cross the wire), and of those only the
//! Events whose body names that host too and whose position a daemon can reach (as the view
//! keeps them, [`super::view`], [`super::position`]).

use super::catch_up::Source;
use super::view::{event_of, host_of};
use crate::nats_contract::subject;
use crate::views::summary::position;
use anyhow::{bail, Context};
use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// How long the read waits for the next message before it says the server stopped sending.
const STALL: Duration = Duration::from_secs(20);

impl Source {
    /// Every Event of `session` from `host` in the stream, in stream order; Events that do not
    /// read are skipped (the summary already counted them).
    pub async fn session_events(
        &self,
        client: &async_nats::Client,
        host: &str,
        session: &str,
    ) -> anyhow::Result<Vec<Value>> {
        let js = jetstream::new(client.clone());
        let stream = js
            .get_stream(&self.stream)
            .await
            .with_context(|| format!("cannot look up the JetStream stream {:?}", self.stream))?;
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: subject::of_session(Some(host), session),
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .context("cannot create a consumer on the session's subject")?;
        let mut pending = consumer.cached_info().num_pending;
        let mut messages = consumer.messages().await.context("cannot read the stream")?;
        let mut events = Vec::new();
        let mut last = None;
        while pending > 0 {
            let message = match tokio::time::timeout(STALL, messages.next()).await {
                Err(_) => bail!("the server stopped sending session {session:?}: try again"),
                Ok(None) => break,
                Ok(Some(message)) => message.context("the stream consumer failed")?,
            };
            pending = message.info().map(|i| i.pending).unwrap_or(0);
            if let Ok(event) = event_of(&message.payload) {
                let from = event["source"].as_str().and_then(host_of);
                let at = position(&event);
                let believed = super::position::check(last, at, std::time::SystemTime::now()).is_ok();
                if from.as_deref() == Some(host) && event["session"] == session && believed {
                    last = at.max(last);
                    events.push(event);
                }
            }
        }
        Ok(events)
    }
}
