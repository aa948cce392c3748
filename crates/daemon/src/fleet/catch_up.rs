//! Fills a [`View`] from the server: its checkpoint ([`checkpoint`]) when one fits the stream,
//! then every message of the stream after it up to its last sequence at the moment the read
//! starts (an ordered consumer: ephemeral, no acks), then every machine record of the bucket. Each failure says which part failed
//! and what to do.

use super::{checkpoint, View};
use crate::nats_contract::connect::Connect;
use crate::nats_contract::machine;
use anyhow::{anyhow, bail, Context};
use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use std::time::Duration;

/// Where the console reads.
#[derive(Debug, Clone)]
pub struct Source {
    pub connect: Connect,
    pub stream: String,
}

/// How long a catch-up waits for the next message before it says the server stopped sending.
const STALL: Duration = Duration::from_secs(20);

impl Source {
    /// Connects, naming the client; `on_event` hears the server's errors.
    pub async fn client(
        &self,
        on_event: impl Fn(&async_nats::Event) + Send + Sync + 'static,
    ) -> anyhow::Result<async_nats::Client> {
        let connected = self.connect.connect_with("aep-cline fleet", on_event).await;
        connected.map_err(Self::said)
    }

    /// [`Source::client`] for `fleet serve`, which keeps one client for as long as it runs:
    /// it reconnects whenever the server comes back, and the follower goes on from the
    /// view's position ([`super::follow`]).
    pub async fn lasting_client(
        &self,
        on_event: impl Fn(&async_nats::Event) + Send + Sync + 'static,
    ) -> anyhow::Result<async_nats::Client> {
        let connected = self.connect.connect_lasting("aep-cline fleet serve", on_event).await;
        connected.map_err(Self::said)
    }

    /// A failed connection in words: what to check.
    fn said(e: anyhow::Error) -> anyhow::Error {
        use async_nats::ConnectErrorKind as Kind;
        let kind = e
            .chain()
            .find_map(|c| c.downcast_ref::<async_nats::ConnectError>())
            .map(|c| c.kind());
        match kind {
            Some(Kind::AuthorizationViolation | Kind::Authentication) => e.context(
                "the server refused the credentials (AEP_NATS_CREDS, AEP_NATS_TOKEN or AEP_NATS_USER and AEP_NATS_PASSWORD)",
            ),
            Some(Kind::Tls) => e.context("TLS failed (AEP_NATS_CA, or a tls:// URL for a server without TLS)"),
            _ => e.context("is nats-server running there (AEP_NATS_URL)?"),
        }
    }

    /// Reads the stream up to its last sequence, then the machine records, into `view`.
    pub async fn catch_up(&self, client: &async_nats::Client, view: &mut View) -> anyhow::Result<()> {
        let js = jetstream::new(client.clone());
        let mut stream = match js.get_stream(&self.stream).await {
            Ok(stream) => stream,
            Err(e)
                if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                    if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
            {
                bail!(
                    "no JetStream stream {:?} at {}: no daemon has published to it yet, or AEP_NATS_STREAM names another",
                    self.stream,
                    self.connect.shown
                )
            }
            Err(e) => {
                return Err(anyhow!(e).context(format!(
                    "cannot look up the JetStream stream {:?} at {} (is JetStream on, and may this user read it?)",
                    self.stream, self.connect.shown
                )))
            }
        };
        let info = stream
            .info()
            .await
            .with_context(|| format!("cannot read the state of stream {:?}", self.stream))?
            .clone();
        if view.stream_seq == 0 {
            match checkpoint::load(&js, &self.stream, &info).await {
                Ok(Some(saved)) => *view = saved,
                Ok(None) => {}
                Err(why) => eprintln!(
                    "aep-cline fleet: not using the checkpoint in the bucket {}: {why}; reading the stream from its first message",
                    machine::FLEET_BUCKET
                ),
            }
        }
        let state = info.state;
        if state.messages > 0 && state.last_sequence > view.stream_seq {
            let deliver_policy = match view.stream_seq {
                0 => consumer::DeliverPolicy::All,
                seq => consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: seq + 1,
                },
            };
            let consumer = stream
                .create_consumer(consumer::pull::OrderedConfig {
                    deliver_policy,
                    ..Default::default()
                })
                .await
                .context("cannot create a consumer on the stream")?;
            let mut messages = consumer.messages().await.context("cannot read the stream")?;
            loop {
                let message = match tokio::time::timeout(STALL, messages.next()).await {
                    Err(_) => bail!(
                        "the server stopped sending the stream at sequence {} of {}: try again",
                        view.stream_seq,
                        state.last_sequence
                    ),
                    Ok(None) => bail!("the stream consumer ended at sequence {}", view.stream_seq),
                    Ok(Some(message)) => message.context("the stream consumer failed")?,
                };
                let (seq, pending) = message
                    .info()
                    .map(|i| (i.stream_sequence, i.pending))
                    .unwrap_or((view.stream_seq + 1, 1));
                view.apply_message(seq, message.subject.as_str(), &message.payload);
                // Nothing pending also ends it: the last message may have aged out meanwhile.
                if seq >= state.last_sequence || pending == 0 {
                    break;
                }
            }
        }
        self.records(&js, view).await
    }

    /// Every machine record of the bucket, into `view`.
    async fn records(&self, js: &jetstream::Context, view: &mut View) -> anyhow::Result<()> {
        for (key, value) in self.read_records(js).await? {
            view.apply_record(&key, value.as_deref());
        }
        Ok(())
    }

    /// Every machine record of the bucket, by key; none when no daemon has written one yet.
    pub async fn read_records(&self, js: &jetstream::Context) -> anyhow::Result<Vec<(String, Option<bytes::Bytes>)>> {
        match js.get_stream(format!("KV_{}", machine::BUCKET)).await {
            Ok(_) => {}
            Err(e)
                if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                    if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
            {
                return Ok(Vec::new())
            }
            Err(e) => return Err(anyhow!(e).context(format!("cannot look up the bucket {}", machine::BUCKET))),
        }
        let kv = js
            .get_key_value(machine::BUCKET)
            .await
            .with_context(|| format!("cannot open the bucket {}", machine::BUCKET))?;
        let mut keys = kv
            .keys()
            .await
            .with_context(|| format!("cannot list the bucket {}", machine::BUCKET))?;
        let mut all = Vec::new();
        while let Some(key) = keys.next().await {
            all.push(key.with_context(|| format!("cannot list the bucket {}", machine::BUCKET))?);
        }
        let mut records = Vec::with_capacity(all.len());
        for key in all {
            let value = kv
                .get(&key)
                .await
                .with_context(|| format!("cannot read {key:?} in the bucket {}", machine::BUCKET))?;
            records.push((key, value));
        }
        Ok(records)
    }
}
