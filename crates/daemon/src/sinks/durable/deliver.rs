//! The delivery loop of a request/response sink (an OTLP/HTTP collector, JetStream's publish
//! acks): batches by size and by time, one batch in flight, retried until the peer has it, and
//! confirmed then. The sink supplies only [`Publisher::publish`].
//!
//! - A batch is sent when it holds `max_events` Events or `max_bytes` of lines, or `linger`
//!   after its first Event came, whichever is first; a backlog (a resend from the logs) goes at
//!   once in full batches.
//! - [`Outcome::Retry`]: the same batch again after the peer's wait (`Retry-After`), else a
//!   jittered backoff (1 s doubling to 30 s); meanwhile the outbox fills, and what does not fit
//!   is resent from the logs once the peer is back (bounded memory whatever the outage).
//! - [`Outcome::Refused`]: the peer will refuse this batch again, however often it is sent (a
//!   400 from a collector): it is counted, said in the log, and its positions confirmed, so one
//!   bad batch never stops the sink.

use super::{positions, Durable};
use crate::backoff::Backoff;
use crate::lane::Published;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest a peer's `Retry-After` is honoured for: a wrong hour-long value must not stall
/// the sink for an hour.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// What the peer did with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It has every Event of the batch.
    Confirmed,
    /// It refused the batch and would refuse it again: dropped, counted.
    Refused(String),
    /// Not delivered (unreachable, overloaded, a server error): sent again after `after`, or
    /// the backoff's wait.
    Retry { error: String, after: Option<Duration> },
}

/// A sink's side: sends one batch (Events in log order per session) and says what came of it.
pub trait Publisher: Send + 'static {
    fn publish(&mut self, batch: &[Arc<Published>]) -> impl Future<Output = Outcome> + Send;
}

#[derive(Debug, Clone, Copy)]
pub struct Batching {
    pub max_events: usize,
    /// Bytes of Event lines, about (a batch holds at least one Event).
    pub max_bytes: usize,
    pub linger: Duration,
}

/// What the loop has seen, for `/healthz`.
#[derive(Default)]
pub struct Health {
    /// The last attempt reached the peer (confirmed or refused).
    connected: AtomicBool,
    last_error: Mutex<Option<String>>,
    confirmed: AtomicU64,
    refused_events: AtomicU64,
    refused_batches: AtomicU64,
    retries: AtomicU64,
}

impl Health {
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// `{connected, last_error, confirmed, refused: {batches, events}, retries}`.
    pub fn status(&self) -> Value {
        json!({
            "connected": self.connected(),
            "last_error": *self.last_error.lock(),
            "confirmed": self.confirmed.load(Ordering::Relaxed),
            "refused": {
                "batches": self.refused_batches.load(Ordering::Relaxed),
                "events": self.refused_events.load(Ordering::Relaxed),
            },
            "retries": self.retries.load(Ordering::Relaxed),
        })
    }
}

/// Runs until cancelled: what the bus brings (and the logs, after a restart) goes to the peer.
pub async fn deliver<P: Publisher>(durable: Arc<Durable>, mut publisher: P, batching: Batching, health: Arc<Health>) {
    let mut backoff = Backoff::new(BACKOFF.0, BACKOFF.1);
    let mut feed = durable.feed(false);
    loop {
        let batch = match gather(&durable, &mut feed, batching).await {
            Ok(batch) => batch,
            Err(e) => {
                let error = format!("{e:#}");
                tracing::warn!(sink = durable.name, %error, "cannot read a session log to resend it; trying again");
                *health.last_error.lock() = Some(error);
                tokio::time::sleep(backoff.next_wait()).await;
                feed = durable.feed(false);
                continue;
            }
        };
        loop {
            match publisher.publish(&batch).await {
                Outcome::Confirmed => {
                    health.connected.store(true, Ordering::Relaxed);
                    health.confirmed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    durable.confirm(positions(&batch));
                    backoff.reset();
                    break;
                }
                Outcome::Refused(why) => {
                    health.connected.store(true, Ordering::Relaxed);
                    health.refused_batches.fetch_add(1, Ordering::Relaxed);
                    health.refused_events.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    tracing::error!(sink = durable.name, events = batch.len(), error = %why,
                        "the peer refused a batch; it would refuse it again, so it is dropped (counted in /healthz)");
                    *health.last_error.lock() = Some(why);
                    durable.confirm(positions(&batch));
                    backoff.reset();
                    break;
                }
                Outcome::Retry { error, after } => {
                    let wait = after
                        .map(|a| a.min(MAX_RETRY_AFTER))
                        .unwrap_or_else(|| backoff.next_wait());
                    if health.connected.swap(false, Ordering::Relaxed)
                        || health.last_error.lock().as_deref() != Some(&error)
                    {
                        tracing::warn!(sink = durable.name, %error, retry_in = ?wait, "the peer does not have the batch yet; retrying");
                    }
                    health.retries.fetch_add(1, Ordering::Relaxed);
                    *health.last_error.lock() = Some(error);
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// The next batch: as soon as `max_events`/`max_bytes` are reached, else `linger` after its
/// first Event.
async fn gather(durable: &Durable, feed: &mut super::Feed, batching: Batching) -> anyhow::Result<Vec<Arc<Published>>> {
    let mut batch: Vec<Arc<Published>> = Vec::new();
    let mut bytes = 0usize;
    let mut deadline: Option<Instant> = None;
    loop {
        let room = batching.max_events.saturating_sub(batch.len()).max(1);
        let got = feed.next(room).await?;
        if got.is_empty() {
            match deadline {
                None => durable.changed().await,
                Some(at) => {
                    tokio::select! {
                        _ = durable.changed() => {}
                        _ = tokio::time::sleep_until(at) => return Ok(batch),
                    }
                }
            }
            continue;
        }
        deadline.get_or_insert_with(|| Instant::now() + batching.linger);
        for event in got {
            bytes += event.line.len();
            batch.push(event);
        }
        if batch.len() >= batching.max_events || bytes >= batching.max_bytes {
            return Ok(batch);
        }
    }
}
