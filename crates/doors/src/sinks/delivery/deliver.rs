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

    /// Why the last attempt did not reach the peer, while it has not since.
    pub fn last_error(&self) -> Option<String> {
        match self.connected() {
            true => None,
            false => self.last_error.lock().clone(),
        }
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
    let mut delivery = durable.delivery(false);
    loop {
        let batch = match gather(&durable, &mut delivery, batching).await {
            Ok(batch) => batch,
            Err(e) => {
                let error = format!("{e:#}");
                tracing::warn!(sink = durable.name, %error, "cannot read a session log to resend it; trying again");
                *health.last_error.lock() = Some(error);
                tokio::time::sleep(backoff.next_wait()).await;
                delivery = durable.delivery(false);
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
async fn gather(
    durable: &Durable,
    delivery: &mut super::Delivery,
    batching: Batching,
) -> anyhow::Result<Vec<Arc<Published>>> {
    let mut batch: Vec<Arc<Published>> = Vec::new();
    let mut bytes = 0usize;
    let mut deadline: Option<Instant> = None;
    loop {
        let room = batching.max_events.saturating_sub(batch.len()).max(1);
        let got = delivery.next(room).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::{Bus, Journal};
    use crate::sinks::delivery::{Config, Overflow};
    use std::io::Write;

    /// Refuses its first `fail` attempts (retry), refuses batches holding `refuse_seq` for
    /// good, and records what it was given.
    struct Peer {
        fail: usize,
        refuse_seq: Option<u64>,
        got: Arc<Mutex<Vec<u64>>>,
    }

    impl Publisher for Peer {
        async fn publish(&mut self, batch: &[Arc<Published>]) -> Outcome {
            if self.fail > 0 {
                self.fail -= 1;
                return Outcome::Retry {
                    error: "down".into(),
                    after: Some(Duration::from_millis(5)),
                };
            }
            let seqs: Vec<u64> = batch.iter().map(|e| e.value["seq"].as_u64().unwrap()).collect();
            if self.refuse_seq.is_some_and(|r| seqs.contains(&r)) {
                return Outcome::Refused("400".into());
            }
            self.got.lock().extend(seqs);
            Outcome::Confirmed
        }
    }

    fn append(journal: &Journal, bus: &Bus, seqs: std::ops::Range<u64>) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(journal.path("s"))
            .unwrap();
        for seq in seqs {
            let value = json!({"session": "s", "seq": seq, "type": "run.started"});
            let line = value.to_string();
            writeln!(file, "{line}").unwrap();
            bus.publish(Published { value, line });
        }
    }

    fn config() -> Config {
        Config {
            name: "test",
            target: "peer".into(),
            outbox: 3,
            overflow: Overflow::FromLog,
        }
    }

    async fn until(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !what() {
            assert!(Instant::now() < deadline, "timed out");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn an_outage_and_a_restart_lose_nothing_and_resend_nothing_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        std::fs::create_dir_all(journal.dir()).unwrap();
        let batching = Batching {
            max_events: 4,
            max_bytes: 1 << 20,
            linger: Duration::from_millis(20),
        };
        let bus = Bus::default();
        let durable = Durable::new(config(), journal.clone());
        let pump = tokio::spawn(durable.clone().pump(bus.subscribe()));
        let got = Arc::new(Mutex::new(Vec::new()));
        let peer = Peer {
            fail: 20,
            refuse_seq: None,
            got: got.clone(),
        };
        let health = Arc::new(Health::default());
        let run = tokio::spawn(deliver(durable.clone(), peer, batching, health.clone()));
        // Ten Events into an outbox of three while the peer is down: seven come from the log.
        append(&journal, &bus, 0..10);
        until(|| got.lock().len() >= 10).await;
        until(|| durable.counters().pending == 0).await;
        assert_eq!(*got.lock(), (0..10).collect::<Vec<_>>(), "in order, once");
        assert!(durable.counters().from_log > 0 && health.retries.load(Ordering::Relaxed) >= 20);
        run.abort();
        pump.abort();
        // The daemon stops; two more Events reach the log while no sink runs.
        append(&journal, &Bus::default(), 10..12);
        // Marks are written on a blocking thread, coalesced: the last confirmation lands.
        let marks_path = journal.dir().join(".test.json");
        until(|| std::fs::read_to_string(&marks_path).is_ok_and(|m| m.contains(r#""seq":9"#))).await;
        let marks = std::fs::read_to_string(&marks_path).unwrap();
        assert!(marks.contains(r#""test":"peer""#), "{marks}");
        // Restarted: only what was never confirmed is sent; a refused batch is counted and
        // passed over.
        let durable = Durable::new(config(), journal.clone());
        let bus = Bus::default();
        let pump = tokio::spawn(durable.clone().pump(bus.subscribe()));
        let got = Arc::new(Mutex::new(Vec::new()));
        let peer = Peer {
            fail: 0,
            refuse_seq: Some(11),
            got: got.clone(),
        };
        let health = Arc::new(Health::default());
        let run = tokio::spawn(deliver(durable.clone(), peer, batching, health.clone()));
        until(|| health.refused_events.load(Ordering::Relaxed) > 0).await;
        append(&journal, &bus, 12..13);
        until(|| got.lock().contains(&12)).await;
        assert_eq!(*got.lock(), [12], "10 and 11 went in one refused batch");
        assert_eq!(health.status()["refused"], json!({"batches": 1, "events": 2}));
        until(|| durable.counters().pending == 0).await;
        run.abort();
        pump.abort();
    }

    #[tokio::test]
    async fn after_a_lag_the_sessions_the_missed_notes_named_are_sent_from_their_logs() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        std::fs::create_dir_all(journal.dir()).unwrap();
        let durable = Durable::new(config(), journal.clone());
        // A bus of 16 notes and nobody reading: 40 Events lag the pump behind.
        let (tx, rx) = tokio::sync::broadcast::channel(16);
        let mut file = std::fs::File::create(journal.path("s")).unwrap();
        for seq in 0..40u64 {
            let value = json!({"session": "s", "seq": seq, "type": "run.started"});
            writeln!(file, "{value}").unwrap();
            let _ = tx.send(crate::lane::Note::Event(Arc::new(Published {
                line: value.to_string(),
                value,
            })));
        }
        let pump = tokio::spawn(durable.clone().pump(rx));
        let got = Arc::new(Mutex::new(Vec::new()));
        let peer = Peer {
            fail: 0,
            refuse_seq: None,
            got: got.clone(),
        };
        let batching = Batching {
            max_events: 8,
            max_bytes: 1 << 20,
            linger: Duration::from_millis(10),
        };
        let run = tokio::spawn(deliver(durable.clone(), peer, batching, Arc::new(Health::default())));
        until(|| got.lock().len() >= 40).await;
        let mut seqs = got.lock().clone();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs, (0..40).collect::<Vec<_>>(), "the missed ones too, from the log");
        run.abort();
        pump.abort();
    }
}
