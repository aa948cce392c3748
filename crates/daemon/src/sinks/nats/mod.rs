//! The JetStream sink (`AEP_NATS_URL`): every Event the daemon logs is published to a NATS
//! JetStream stream as a structured-mode CloudEvent (AEP-0005 §1, [`aep_core::cloudevents`]),
//! on subject `aep.<agent>.<session>` ([`subject`]), with `Nats-Msg-Id` = `source` + `id`,
//! so the server drops a redelivery within its duplicate window.
//!
//! Delivery is at-least-once and ordered per session, and nothing is lost to an outage:
//! - The server's publish ack confirms an Event. Publishes are pipelined ([`INFLIGHT`] at
//!   most awaiting their ack) and acks are taken in publish order, so a session's confirmed
//!   position only moves forward over a gapless prefix.
//! - Events wait in a bounded outbox while the server is slow or away; past the bound they
//!   are not held but resent from the JSONL logs (where every Event already is), as after a
//!   reconnect: the sink resends, per session it carries, everything after the last confirmed
//!   position ([`history::Cursor`](crate::history::Cursor), a chunk at a time). Memory stays
//!   bounded whatever the outage.
//! - The confirmed positions survive a restart ([`marks`], `$AEP_LOG_DIR/cline/.nats.json`):
//!   a restarted daemon resends from the logs what the server lacked.
//! - A failed publish, an ack that does not come, or a lost connection ends the connection;
//!   the next one (a jittered backoff from 1 s to 10 s) creates the stream if it is missing
//!   and resends. The hooks never wait on any of this.

mod marks;
pub mod settings;
pub mod subject;

use crate::backoff::Backoff;
use crate::history::Cursor;
use crate::lane::{Note, Published, Sessions};
use aep_core::sequence::Position;
use anyhow::{anyhow, Context as _};
use async_nats::jetstream::{self, context::PublishAckFuture, stream};
use async_nats::HeaderMap;
use futures_util::stream::FuturesOrdered;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use settings::Settings;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Publishes awaiting their ack, at most: enough to keep a loopback server busy (one ack
/// round trip no longer bounds the rate), few enough that a resend after a failure is small.
pub const INFLIGHT: usize = 4096;
/// An ack that takes longer than this ends the connection (its Event is resent).
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Confirmed positions are written at most this often while Events flow (and whenever the
/// sink goes idle): a crash resends at most this much more, which the server drops as
/// duplicates.
const PERSIST_EVERY: Duration = Duration::from_millis(500);
/// Events taken from the outbox at a time.
const BATCH: usize = 512;

pub struct Nats {
    settings: Settings,
    sessions: Arc<Sessions>,
    state: Mutex<State>,
    wake: Notify,
    connected: AtomicBool,
    published: AtomicU64,
    duplicates: AtomicU64,
    resends: AtomicU64,
    overflows: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// One `.nats.json` writer at a time.
    persisting: Mutex<()>,
}

struct State {
    outbox: VecDeque<Arc<Published>>,
    carried: HashMap<String, Carried>,
    /// Events are missing from the outbox (it overflowed, or the pump lagged behind the bus):
    /// resend from the logs.
    resync: bool,
    /// Confirmations not yet written to `.nats.json`.
    dirty: bool,
}

/// One session this sink carries.
struct Carried {
    /// The first position published: where a resend starts without a confirmation.
    first: Position,
    /// The last position the server acked, over a gapless prefix.
    confirmed: Option<Position>,
    /// The last position published.
    high: Option<Position>,
    /// The registry let the session go: once the server confirms `high`, so does the sink.
    closed: bool,
}

impl Carried {
    fn done(&self) -> bool {
        self.closed && self.confirmed.is_some() && self.confirmed >= self.high
    }

    /// A resend goes strictly after this position (`None`: the log's start).
    fn resend_after(&self) -> Option<Position> {
        self.confirmed.or_else(|| before(self.first))
    }
}

/// The position just before `p` (`None` before the very first).
fn before(p: Position) -> Option<Position> {
    match (p.epoch, p.seq) {
        (0, 0) => None,
        (epoch, 0) => Some(Position {
            epoch: epoch - 1,
            seq: u64::MAX,
        }),
        (epoch, seq) => Some(Position { epoch, seq: seq - 1 }),
    }
}

fn position(event: &Value) -> Option<Position> {
    let seq = event.get("seq")?.as_u64()?;
    Some(Position {
        epoch: event.get("epoch").and_then(Value::as_u64).unwrap_or(0),
        seq,
    })
}

/// A publish awaiting its ack: which session's position it confirms.
type Pending =
    std::pin::Pin<Box<dyn std::future::Future<Output = (Option<(String, Position)>, anyhow::Result<bool>)> + Send>>;

impl Nats {
    /// Builds the sink; [`Nats::pump`] fills its outbox from the bus (subscribe before anything
    /// is published) and [`Nats::run`] keeps a connection and publishes.
    pub fn new(settings: Settings, sessions: Arc<Sessions>) -> Arc<Nats> {
        let carried = restore(&sessions, &settings);
        Arc::new(Nats {
            state: Mutex::new(State {
                outbox: VecDeque::new(),
                carried,
                resync: false,
                dirty: false,
            }),
            settings,
            sessions,
            wake: Notify::new(),
            connected: AtomicBool::new(false),
            published: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            resends: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
            last_error: Mutex::new(None),
            persisting: Mutex::new(()),
        })
    }

    /// For `/healthz` and `doctor`.
    pub fn status(&self) -> Value {
        let state = self.state.lock();
        let unconfirmed = state
            .carried
            .values()
            .filter(|c| c.high.is_some() && c.confirmed < c.high)
            .count();
        json!({
            "url": self.settings.connect.shown,
            "stream": self.settings.stream,
            "connected": self.connected.load(Ordering::Relaxed),
            "outbox": state.outbox.len(),
            "sessions_unconfirmed": unconfirmed,
            "published": self.published.load(Ordering::Relaxed),
            "duplicates": self.duplicates.load(Ordering::Relaxed),
            "resends": self.resends.load(Ordering::Relaxed),
            "overflows_resent_from_log": self.overflows.load(Ordering::Relaxed),
            "last_error": *self.last_error.lock(),
        })
    }

    /// Moves the daemon's Events from the bus into the outbox, and lets go of the sessions the
    /// registry closes once the server has everything of them.
    pub async fn pump(self: Arc<Self>, mut bus: tokio::sync::broadcast::Receiver<Note>) {
        loop {
            let event = match bus.recv().await {
                Ok(Note::Event(event)) => event,
                Ok(Note::Closed(sessions)) => {
                    let mut state = self.state.lock();
                    for session in sessions.iter() {
                        if let Some(c) = state.carried.get_mut(session) {
                            c.closed = true;
                            if c.done() {
                                state.carried.remove(session);
                            }
                        }
                    }
                    continue;
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "the JetStream sink fell behind the bus; resending from the logs"
                    );
                    self.state.lock().resync = true;
                    self.wake.notify_one();
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let mut new_session = false;
            {
                let mut state = self.state.lock();
                let session = event.value.get("session").and_then(Value::as_str);
                if let (Some(session), Some(p)) = (session, position(&event.value)) {
                    match state.carried.get_mut(session) {
                        Some(c) => {
                            c.high = c.high.max(Some(p));
                            c.closed = false;
                        }
                        None => {
                            state.carried.insert(
                                session.to_string(),
                                Carried {
                                    first: p,
                                    confirmed: None,
                                    high: Some(p),
                                    closed: false,
                                },
                            );
                            new_session = true;
                        }
                    }
                }
                if state.outbox.len() < self.settings.outbox {
                    state.outbox.push_back(event);
                } else {
                    // Not held, not lost: the log has it, and the resend brings it.
                    let n = self.overflows.fetch_add(1, Ordering::Relaxed) + 1;
                    if n == 1 || n.is_power_of_two() {
                        tracing::warn!(
                            overflows = n,
                            "JetStream outbox full (AEP_NATS_OUTBOX): Events are resent from the logs"
                        );
                    }
                    state.resync = true;
                }
            }
            if new_session {
                // Where a resend must start is on disk before the server could need it.
                self.persist();
            }
            self.wake.notify_one();
        }
    }

    /// Keeps a connection, with a jittered backoff between attempts.
    pub async fn run(self: Arc<Self>) {
        let mut backoff = Backoff::new(Duration::from_secs(1), MAX_BACKOFF);
        loop {
            let started = Instant::now();
            let error = self.connection().await;
            self.connected.store(false, Ordering::Relaxed);
            self.persist_if_dirty();
            if started.elapsed() > Duration::from_secs(30) {
                backoff.reset();
            }
            let wait = backoff.next_wait();
            let said = format!("{error:#}");
            tracing::warn!(error = %said, retry_in = ?wait, "JetStream connection ended");
            *self.last_error.lock() = Some(said);
            tokio::time::sleep(wait).await;
        }
    }

    async fn connection(&self) -> anyhow::Error {
        let client = match self.settings.connect.connect("aep-cline").await {
            Ok(client) => client,
            Err(e) => return e,
        };
        let js = jetstream::ContextBuilder::new()
            .timeout(ACK_TIMEOUT)
            .max_ack_inflight(INFLIGHT)
            .backpressure_on_inflight(true)
            .build(client);
        if let Err(e) = self.ensure_stream(&js).await {
            return e;
        }
        self.connected.store(true, Ordering::Relaxed);
        *self.last_error.lock() = None;
        tracing::info!(url = %self.settings.connect.shown, stream = %self.settings.stream, "JetStream connected");
        self.serve(&js).await
    }

    /// Creates the stream when it is missing; an existing one is used as is.
    async fn ensure_stream(&self, js: &jetstream::Context) -> anyhow::Result<()> {
        let name = &self.settings.stream;
        match js.get_stream(name).await {
            Ok(_) => return Ok(()),
            Err(e)
                if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                    if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) => {}
            Err(e) => return Err(anyhow!(e).context(format!("cannot look up the JetStream stream {name}"))),
        }
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![subject::ALL.to_string()],
            storage: stream::StorageType::File,
            duplicate_window: self.settings.dedupe_window,
            ..Default::default()
        };
        js.create_stream(config)
            .await
            .with_context(|| format!("cannot create the JetStream stream {name} (subjects {})", subject::ALL))?;
        tracing::info!(stream = %name, subjects = subject::ALL, "created the JetStream stream");
        Ok(())
    }

    /// Resends what the server may lack, then publishes the outbox until something fails.
    async fn serve(&self, js: &jetstream::Context) -> anyhow::Error {
        let mut sent: HashMap<String, Position> = HashMap::new();
        let mut inflight: FuturesOrdered<Pending> = FuturesOrdered::new();
        if let Err(e) = self.resend(js, &mut sent, &mut inflight).await {
            return e;
        }
        let mut persisted = Instant::now();
        loop {
            let (batch, resync) = self.take(BATCH);
            if resync {
                if let Err(e) = self.resend(js, &mut sent, &mut inflight).await {
                    return e;
                }
            }
            let more = batch.len() == BATCH;
            for event in batch {
                let session = event.value.get("session").and_then(Value::as_str);
                let at = match (session, position(&event.value)) {
                    (Some(session), Some(p)) => {
                        let high = sent.get(session).copied();
                        if high.is_some_and(|h| p <= h) {
                            continue; // already resent from the log (or a re-emitted ack)
                        }
                        sent.insert(session.to_string(), p);
                        Some((session.to_string(), p))
                    }
                    _ => None,
                };
                if let Err(e) = self.publish(js, &event.value, at, &mut inflight).await {
                    return e;
                }
            }
            if persisted.elapsed() >= PERSIST_EVERY {
                self.persist_if_dirty();
                persisted = Instant::now();
            }
            if more {
                continue;
            }
            if inflight.is_empty() {
                self.persist_if_dirty();
                self.wake.notified().await;
                continue;
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                done = inflight.next() => {
                    if let Some((at, result)) = done {
                        if let Err(e) = self.acked(at, result) {
                            return e;
                        }
                    }
                }
            }
        }
    }

    /// Publishes one Event; waits for the oldest ack when [`INFLIGHT`] are pending.
    async fn publish(
        &self,
        js: &jetstream::Context,
        event: &Value,
        at: Option<(String, Position)>,
        inflight: &mut FuturesOrdered<Pending>,
    ) -> anyhow::Result<()> {
        while inflight.len() >= INFLIGHT {
            if let Some((at, result)) = inflight.next().await {
                self.acked(at, result)?;
            }
        }
        let (subject, headers, payload) = match message(event) {
            Ok(message) => message,
            Err(e) => {
                // Never our own Events (the lane validates them); said, and not retried.
                tracing::error!(error = %e, id = %event["id"], "an Event cannot be carried as a CloudEvent; skipped");
                inflight.push_back(Box::pin(async move { (at, Ok(false)) }));
                return Ok(());
            }
        };
        let ack: PublishAckFuture = js
            .publish_with_headers(subject, headers, payload.into())
            .await
            .context("cannot publish to JetStream")?;
        inflight.push_back(Box::pin(async move {
            let result = ack
                .await
                .map(|ack| ack.duplicate)
                .map_err(|e| anyhow!(e).context("JetStream did not confirm a publish"));
            (at, result)
        }));
        Ok(())
    }

    /// An ack came (in publish order): the session's confirmed position moves to it.
    fn acked(&self, at: Option<(String, Position)>, result: anyhow::Result<bool>) -> anyhow::Result<()> {
        let duplicate = result?;
        self.published.fetch_add(1, Ordering::Relaxed);
        if duplicate {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        if let Some((session, p)) = at {
            let mut state = self.state.lock();
            let state = &mut *state;
            if let Some(c) = state.carried.get_mut(&session) {
                if c.confirmed < Some(p) {
                    c.confirmed = Some(p);
                    state.dirty = true;
                }
                if c.done() {
                    state.carried.remove(&session);
                }
            }
        }
        Ok(())
    }

    /// Up to `n` Events from the outbox, and whether a resend from the logs is due.
    fn take(&self, n: usize) -> (Vec<Arc<Published>>, bool) {
        let mut state = self.state.lock();
        let resync = std::mem::take(&mut state.resync);
        let n = n.min(state.outbox.len());
        (state.outbox.drain(..n).collect(), resync)
    }

    /// Publishes from the logs every Event of every carried session after what the server
    /// confirmed (or what this connection already published, if further).
    async fn resend(
        &self,
        js: &jetstream::Context,
        sent: &mut HashMap<String, Position>,
        inflight: &mut FuturesOrdered<Pending>,
    ) -> anyhow::Result<()> {
        let plan: Vec<(String, Option<Position>)> = {
            let state = self.state.lock();
            state
                .carried
                .iter()
                .map(|(s, c)| (s.clone(), c.resend_after()))
                .collect()
        };
        let mut resent = 0u64;
        for (session, after) in plan {
            let after = after.max(sent.get(&session).copied());
            let mut cursor = Cursor::new(self.sessions.journal().path(&session), after, None);
            loop {
                let (back, chunk) = tokio::task::spawn_blocking(move || {
                    let chunk = cursor.next_chunk();
                    (cursor, chunk)
                })
                .await?;
                cursor = back;
                let chunk = match chunk {
                    Ok(chunk) => chunk,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) => {
                        return Err(
                            anyhow!(e).context(format!("cannot read the log of session {session:?} to resend it"))
                        )
                    }
                };
                for (p, event) in chunk.events {
                    sent.insert(session.clone(), p);
                    self.publish(js, &event.value, Some((session.clone(), p)), inflight)
                        .await?;
                    resent += 1;
                }
                if chunk.done {
                    break;
                }
            }
        }
        if resent > 0 {
            self.resends.fetch_add(resent, Ordering::Relaxed);
            tracing::info!(events = resent, "resent from the session logs what JetStream may lack");
        }
        Ok(())
    }

    fn persist_if_dirty(&self) {
        if std::mem::take(&mut self.state.lock().dirty) {
            self.persist();
        }
    }

    /// Writes what the server confirmed to `.nats.json` beside the logs.
    fn persist(&self) {
        let sessions = {
            let state = self.state.lock();
            state
                .carried
                .iter()
                .map(|(s, c)| {
                    let mark = marks::Mark {
                        first: c.first.into(),
                        confirmed: c.confirmed.map(Into::into),
                    };
                    (s.clone(), mark)
                })
                .collect()
        };
        let marks = marks::Marks {
            target: target(&self.settings),
            sessions,
        };
        let _one_writer = self.persisting.lock();
        if let Err(e) = marks::save(self.sessions.journal().dir(), &marks) {
            tracing::warn!(error = %e, "cannot record what JetStream confirmed; a restart would resend more than needed");
        }
    }
}

/// What the marks are for: the servers and the stream.
fn target(settings: &Settings) -> String {
    format!("{} {}", settings.connect.shown, settings.stream)
}

/// The sessions a previous run left the server short of, from `.nats.json`: resent from the
/// logs at the first connection.
fn restore(sessions: &Sessions, settings: &Settings) -> HashMap<String, Carried> {
    let mut carried = HashMap::new();
    for (session, mark) in marks::load(sessions.journal().dir(), &target(settings)) {
        let confirmed: Option<Position> = mark.confirmed.map(Into::into);
        let mut cursor = Cursor::new(sessions.journal().path(&session), confirmed, None);
        while cursor.next_chunk().is_ok_and(|chunk| !chunk.done) {}
        let c = Carried {
            first: mark.first.into(),
            confirmed,
            high: cursor.high(),
            closed: true,
        };
        if !c.done() && c.high.is_some() {
            carried.insert(session, c);
        }
    }
    if !carried.is_empty() {
        tracing::info!(
            sessions = carried.len(),
            "JetStream lacks Events from before this start; they are resent when it is reachable"
        );
    }
    carried
}

/// An Event as a JetStream message: its subject, `Nats-Msg-Id`, and the structured-mode
/// CloudEvent (AEP-0005 §1).
pub fn message(event: &Value) -> anyhow::Result<(String, HeaderMap, Vec<u8>)> {
    let object = event.as_object().ok_or_else(|| anyhow!("not a JSON object"))?;
    let ce = aep_core::cloudevents::forward(object)?;
    let mut headers = HeaderMap::new();
    let id = subject::message_id(event).ok_or_else(|| anyhow!("no source or id"))?;
    headers.insert("Nats-Msg-Id", id.as_str());
    // CloudEvents' NATS binding: a structured-mode message says so in its content type.
    headers.insert("Content-Type", "application/cloudevents+json");
    Ok((subject::of(event), headers, serde_json::to_vec(&ce)?))
}
