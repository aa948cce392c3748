//! The JetStream sink (`AEP_NATS_URL`): every Event the daemon logs is published to a NATS
//! JetStream stream as a structured-mode CloudEvent (AEP-0005 §1, [`aep_core::cloudevents`]),
//! on subject `aep.<host>.<agent>.<session>` ([`subject`]: `<host>` is this daemon's, so the
//! server's permissions can confine its user to its own machine's subjects), with
//! `Nats-Msg-Id` = `source` + `id`, so the server drops a redelivery within the stream's
//! duplicate window.
//!
//! Delivery is the shared durable piece ([`crate::sinks::delivery`]): Events wait in a bounded
//! outbox; what does not fit, and everything after a session's last confirmed position after a
//! reconnect or a restart (`$AEP_LOG_DIR/cline/.nats.json`), is resent from the JSONL logs.
//! Memory stays bounded whatever the outage, and nothing is lost: delivery is at-least-once,
//! and the server's dedupe makes it effectively once.
//!
//! This file is the [`deliver::Publisher`]: a batch is published pipelined (every message
//! sent, then every publish ack awaited, in order), and is confirmed only when the server
//! acked all of it. A failed publish, a missing ack or a lost connection drops the connection
//! and the batch is retried (with backoff) on a new one, which first creates the stream if it
//! is missing. The hooks never wait on any of this.

pub mod doctor;
pub mod heartbeat;
pub mod settings;

use crate::nats_contract::subject;
use crate::sources::nats_control as control;

use crate::lane::{Journal, Note, Published};
use crate::sinks::delivery::deliver::{self, Batching, Health, Outcome};
use crate::sinks::delivery::{self, Durable, Overflow};
use anyhow::{anyhow, Context as _};
use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use async_nats::HeaderMap;
use serde_json::{json, Value};
use settings::Settings;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Events per batch, at most; all of a batch is in flight at once.
pub const BATCH: usize = 1024;
/// An ack that takes longer than this fails the batch (it is published again).
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Nats {
    settings: Settings,
    /// This daemon's host (`AEP_HOST`): the subjects' host token.
    host: String,
    durable: Arc<Durable>,
    health: Arc<Health>,
    stats: Arc<Stats>,
    /// What the machine record's writer did ([`heartbeat`]).
    beats: Arc<heartbeat::Health>,
    /// What the control door did ([`control`], `AEP_NATS_CONTROL=1`).
    commands: Arc<control::Health>,
}

/// What the publisher saw, beyond the delivery loop's counters.
#[derive(Default)]
struct Stats {
    /// Acks that said the server already had the message (a redelivery, dropped by dedupe).
    duplicates: AtomicU64,
    /// Events the server can never take: larger than its `max_payload`, or not mappable to a
    /// CloudEvent (never the daemon's own). Said in the log, counted, skipped.
    skipped: AtomicU64,
}

impl Nats {
    pub fn new(settings: Settings, journal: Journal, host: String) -> Arc<Nats> {
        let durable = Durable::new(
            delivery::Config {
                name: "nats",
                target: format!("{} {}", settings.connect.shown, settings.stream),
                outbox: settings.outbox,
                overflow: Overflow::FromLog,
            },
            journal,
        );
        Arc::new(Nats {
            settings,
            host,
            durable,
            health: Arc::new(Health::default()),
            stats: Arc::new(Stats::default()),
            beats: Arc::default(),
            commands: Arc::default(),
        })
    }

    /// The machine record's writer, on its own connection to the same server.
    pub fn heartbeat(&self, sources: heartbeat::Sources) -> Arc<heartbeat::Heartbeat> {
        heartbeat::Heartbeat::new(self.settings.connect.clone(), sources, self.beats.clone())
    }

    /// The control door on this host's subject, when `AEP_NATS_CONTROL=1`.
    pub fn control(
        &self,
        sessions: Arc<crate::lane::Sessions>,
        intake: Arc<crate::control::Intake>,
        max_event: usize,
    ) -> Option<Arc<control::Control>> {
        self.settings.control.then(|| {
            control::Control::new(
                self.settings.connect.clone(),
                sessions,
                intake,
                max_event,
                self.commands.clone(),
            )
        })
    }

    /// For `/healthz` and `doctor`.
    pub fn status(&self) -> Value {
        let counters = self.durable.counters();
        let mut status = self.health.status();
        let extra = json!({
            "url": self.settings.connect.shown,
            "stream": self.settings.stream,
            "outbox": counters.outbox,
            "pending": counters.pending,
            "from_log": counters.from_log,
            "resends": counters.resends,
            "duplicates": self.stats.duplicates.load(Ordering::Relaxed),
            "skipped": self.stats.skipped.load(Ordering::Relaxed),
            "heartbeat": self.beats.status(),
            "control": self.settings.control.then(|| self.commands.status()),
        });
        if let (Some(status), Value::Object(extra)) = (status.as_object_mut(), extra) {
            status.extend(extra);
        }
        // Connected is what reaches the server: the Events' last batch, or (before any Event
        // was published, or since) the machine record's last write on the same server.
        if self.health.last_error().is_none() && self.beats.reaching() {
            status["connected"] = json!(true);
        }
        status
    }

    /// Moves the bus's Events into the outbox (subscribe before anything is published).
    pub async fn pump(self: Arc<Self>, bus: tokio::sync::broadcast::Receiver<Note>) {
        self.durable.clone().pump(bus).await
    }

    /// Publishes until the daemon stops.
    pub async fn run(self: Arc<Self>) {
        let publisher = JetStream {
            settings: self.settings.clone(),
            host: self.host.clone(),
            js: None,
            stats: self.stats.clone(),
        };
        let batching = Batching {
            max_events: BATCH,
            max_bytes: 8 << 20,
            // What came while the previous batch was in flight goes at once.
            linger: Duration::from_millis(1),
        };
        deliver::deliver(self.durable.clone(), publisher, batching, self.health.clone()).await
    }
}

/// One connection's worth of publishing.
struct JetStream {
    settings: Settings,
    host: String,
    js: Option<jetstream::Context>,
    stats: Arc<Stats>,
}

impl deliver::Publisher for JetStream {
    async fn publish(&mut self, batch: &[Arc<Published>]) -> Outcome {
        match self.try_publish(batch).await {
            Ok(()) => Outcome::Confirmed,
            Err(e) => {
                // A new connection for the retry: the old one may be half dead.
                self.js = None;
                Outcome::Retry {
                    error: format!("{e:#}"),
                    after: None,
                }
            }
        }
    }
}

impl JetStream {
    async fn try_publish(&mut self, batch: &[Arc<Published>]) -> anyhow::Result<()> {
        let js = match &self.js {
            Some(js) => js.clone(),
            None => {
                let js = self.connect().await?;
                self.js = Some(js.clone());
                js
            }
        };
        let mut acks = Vec::with_capacity(batch.len());
        for event in batch {
            let (subject, headers, payload) = match message(&self.host, &event.value) {
                Ok(message) => message,
                Err(e) => {
                    self.skip(&event.value, &e);
                    continue;
                }
            };
            match js.publish_with_headers(subject, headers, payload.into()).await {
                Ok(ack) => acks.push(ack),
                Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => self.skip(&event.value, &anyhow!(e)),
                Err(e) => return Err(anyhow!(e).context("cannot publish to JetStream")),
            }
        }
        for ack in acks {
            let ack = ack
                .await
                .map_err(|e| anyhow!(e).context("JetStream did not confirm a publish"))?;
            if ack.duplicate {
                self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn skip(&self, event: &Value, why: &anyhow::Error) {
        self.stats.skipped.fetch_add(1, Ordering::Relaxed);
        tracing::error!(id = %event["id"], error = %format!("{why:#}"),
            "an Event cannot be published to JetStream and is skipped (counted in /healthz); it stays in its log");
    }

    /// Connects and makes sure the stream exists: created when missing, used as is otherwise.
    async fn connect(&self) -> anyhow::Result<jetstream::Context> {
        let client = self.settings.connect.connect("aep-cline").await?;
        let js = jetstream::ContextBuilder::new()
            .timeout(ACK_TIMEOUT)
            .max_ack_inflight(4 * BATCH)
            .backpressure_on_inflight(true)
            .build(client);
        let name = &self.settings.stream;
        match js.get_stream(name).await {
            Ok(_) => {}
            Err(e)
                if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                    if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
            {
                let config = stream::Config {
                    name: name.clone(),
                    subjects: vec![subject::ALL.to_string()],
                    storage: stream::StorageType::File,
                    duplicate_window: self.settings.dedupe_window,
                    ..Default::default()
                };
                js.create_stream(config).await.with_context(|| {
                    format!("cannot create the JetStream stream {name} (subjects {})", subject::ALL)
                })?;
                tracing::info!(stream = %name, subjects = subject::ALL, "created the JetStream stream");
            }
            Err(e) => return Err(anyhow!(e).context(format!("cannot look up the JetStream stream {name}"))),
        }
        tracing::info!(url = %self.settings.connect.shown, stream = %name, "JetStream connected");
        Ok(js)
    }
}

/// An Event of `host`'s daemon as a JetStream message: its subject, its headers (`Nats-Msg-Id`; the CloudEvents
/// NATS binding's content type for structured mode) and the CloudEvent (AEP-0005 §1).
pub fn message(host: &str, event: &Value) -> anyhow::Result<(String, HeaderMap, Vec<u8>)> {
    let object = event.as_object().ok_or_else(|| anyhow!("not a JSON object"))?;
    let ce = aep_core::cloudevents::forward(object)?;
    let id = subject::message_id(event).ok_or_else(|| anyhow!("no source or id"))?;
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", id.as_str());
    headers.insert("Content-Type", "application/cloudevents+json");
    Ok((subject::of(host, event), headers, serde_json::to_vec(&ce)?))
}
