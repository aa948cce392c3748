//! The OTLP logs exporter (AEP-0005 §3, `AEP_OTLP_ENDPOINT`): every Event of the daemon as an
//! OTLP LogRecord on an OpenTelemetry collector, over OTLP/HTTP with protobuf.
//!
//! - [`record`]: the pure Event → LogRecord mapping (§3.2–§3.4).
//! - [`span`] and [`traces`]: spans on `…/v1/traces` (`AEP_OTLP_TRACES`), a trace per run
//!   after the OpenTelemetry GenAI conventions, a durable sink of their own.
//! - [`metrics`]: tokens, cost and tool calls on `…/v1/metrics` (`AEP_OTLP_METRICS`).
//! - [`exporter`]: the filter (`AEP_OTLP_FILTER`) and the exporter's own capture ceiling
//!   (`AEP_OTLP_CAPTURE`, §3.3, down-leveled by aep-core), the request, gzip, the collector's
//!   answer.
//! - Delivery is the shared durable piece ([`crate::sinks::delivery`]): batches by size and time,
//!   retries with a jittered backoff or the collector's `Retry-After`, confirmed positions per
//!   session kept in `$AEP_LOG_DIR/cline/.otlp.json`, and after an outage or a restart
//!   everything unconfirmed is resent from the JSONL logs. The outbox is bounded; what does not
//!   fit is resent from the logs, so memory stays bounded and nothing is lost whatever the
//!   outage. Delivery is at-least-once: a batch whose answer was lost is sent again.
//!
//! Like every sink it works after the log: a collector that is down, slow or refusing never
//! touches the hook path.

pub mod doctor;
pub mod exporter;
pub mod leg;
pub mod metrics;
pub mod record;
pub mod settings;
pub mod span;
pub mod traces;

use crate::lane::{Journal, Note};
use exporter::Exporter;
use leg::Leg;
use serde_json::{json, Value};
use settings::Settings;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub struct Otlp {
    settings: Arc<Settings>,
    host: String,
    logs: Leg,
    /// The traces leg, when `AEP_OTLP_TRACES` is on.
    pub traces: Option<Arc<traces::Traces>>,
    /// The metrics leg, when `AEP_OTLP_METRICS` is on.
    pub metrics: Option<Arc<metrics::Metrics>>,
}

impl Otlp {
    /// Builds the exporter (restoring what the collector lacked at the last stop);
    /// [`Otlp::pump`] fills its outbox from the bus and [`Otlp::run`] delivers.
    pub fn new(settings: Settings, journal: Journal, host: String) -> Arc<Otlp> {
        let logs = Leg::new("otlp", settings.shown(), &settings, journal.clone());
        let settings = Arc::new(settings);
        let traces = settings
            .traces
            .is_some()
            .then(|| traces::Traces::new(settings.clone(), journal.clone(), host.clone()));
        let metrics = settings
            .metrics
            .is_some()
            .then(|| metrics::Metrics::new(settings.clone(), host.clone()));
        Arc::new(Otlp {
            settings,
            traces,
            metrics,
            host,
            logs,
        })
    }

    pub async fn pump(self: Arc<Self>, bus: tokio::sync::broadcast::Receiver<Note>) {
        self.logs.pump(bus).await
    }

    /// Delivers until the daemon stops.
    pub async fn run(self: Arc<Self>) {
        let exporter = Exporter::new(self.settings.clone(), self.host.clone(), self.logs.counts.clone());
        self.logs.deliver(exporter, &self.settings).await
    }

    /// For `/healthz`: the logs leg's status ([`Leg::status`]) with `filtered`, `capture`, and
    /// the `traces` and `metrics` legs'.
    pub fn status(&self) -> Value {
        let mut status = self.logs.status();
        status.insert(
            "filtered".into(),
            json!(self.logs.counts.filtered.load(Ordering::Relaxed)),
        );
        status.insert("capture".into(), json!(self.settings.capture.to_string()));
        status.insert("traces".into(), json!(self.traces.as_ref().map(|t| t.status())));
        status.insert("metrics".into(), json!(self.metrics.as_ref().map(|m| m.status())));
        Value::Object(status)
    }
}
