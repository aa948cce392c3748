//! One durable route of the exporter (the logs' `…/v1/logs`, the spans' `…/v1/traces`): its
//! outbox and marks ([`Durable`]), what its delivery saw ([`Health`]), what its collector
//! rejected ([`Counts`]), delivered in batches of the exporter's settings. Each route is a leg
//! of its own, so a collector that refuses one never holds the other back.

use super::exporter::Counts;
use super::settings::Settings;
use crate::lane::{Journal, Note};
use crate::sinks::delivery::deliver::{self, Batching, Health, Publisher};
use crate::sinks::delivery::{self, Durable, Overflow};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bytes of Event lines per export, about (collectors take 20 MiB by default; gzip shrinks it
/// several times over).
const MAX_BATCH_BYTES: usize = 4 << 20;

pub struct Leg {
    durable: Arc<Durable>,
    health: Arc<Health>,
    pub counts: Arc<Counts>,
    /// The route as it may be shown.
    endpoint: String,
}

impl Leg {
    /// The leg `name` (its marks are `.<name>.json`) to `endpoint`, restoring what its
    /// collector lacked at the last stop.
    pub fn new(name: &'static str, endpoint: String, settings: &Settings, journal: Journal) -> Leg {
        let durable = Durable::new(
            delivery::Config {
                name,
                target: endpoint.clone(),
                outbox: settings.outbox,
                overflow: Overflow::FromLog,
            },
            journal,
        );
        Leg {
            durable,
            health: Arc::new(Health::default()),
            counts: Arc::new(Counts::default()),
            endpoint,
        }
    }

    /// Fills the outbox from the bus.
    pub async fn pump(&self, bus: tokio::sync::broadcast::Receiver<Note>) {
        self.durable.clone().pump(bus).await
    }

    /// Delivers through `publisher` until the daemon stops.
    pub async fn deliver(&self, publisher: impl Publisher, settings: &Settings) {
        let batching = Batching {
            max_events: settings.batch,
            max_bytes: MAX_BATCH_BYTES,
            linger: settings.flush,
        };
        deliver::deliver(self.durable.clone(), publisher, batching, self.health.clone()).await
    }

    /// For `/healthz`: `{endpoint, connected, last_error, confirmed, pending, sessions (carried),
    /// outbox, dropped, retries, resends}`; each signal adds its own.
    pub fn status(&self) -> Map<String, Value> {
        let counters = self.durable.counters();
        let health = self.health.status();
        let Value::Object(status) = json!({
            "endpoint": self.endpoint,
            "connected": health["connected"],
            "last_error": health["last_error"],
            "confirmed": health["confirmed"],
            "pending": counters.pending,
            "sessions": counters.sessions,
            "outbox": counters.outbox,
            "dropped": {
                "refused_batches": health["refused"]["batches"],
                "refused_events": health["refused"]["events"],
                "rejected_by_collector": self.counts.rejected.load(Ordering::Relaxed),
            },
            "retries": health["retries"],
            "resends": counters.resends,
        }) else {
            unreachable!("an object literal")
        };
        status
    }
}
