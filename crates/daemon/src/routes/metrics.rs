//! `GET /metrics`: the daemon's numbers for Prometheus, in its text format, or OpenMetrics when
//! the `Accept` header asks for it (`application/openmetrics-text`).
//!
//! Two kinds of numbers, in one `Registry` built once for the listener ([`registry`]):
//!
//! - what the lane counts as it works ([`crate::metrics::Recorder`]: hooks, Events appended,
//!   log write errors, policy decisions, budget notices, how long approvals waited);
//! - what `/healthz` already reports (the sinks' counters, the spool, the hub tap, connections,
//!   sessions, pending approvals, uptime), read at scrape time by [`Health`] from the very
//!   values `/healthz` shows: the two can never disagree, and no subsystem keeps a second set of
//!   counters for Prometheus.
//!
//! Unauthenticated, as `/healthz` is: counts and states only, never content, a session, run or
//! approval id; on the loopback listener (README, "Metrics").

use super::AppState;
use crate::http::scrape::Metric;
use crate::views::index::Index;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use serde_json::Value;
use std::sync::Arc;

/// The daemon's one registry: the lane's recorder, the build, and the scrape-time numbers.
pub fn registry(state: &AppState, index: Arc<Index>) -> Registry {
    let mut registry = Registry::default();
    state.sessions.metrics().register(&mut registry);
    registry.register(
        "aep_cline_build",
        "The running daemon's version",
        Info::new([("version", env!("CARGO_PKG_VERSION"))]),
    );
    registry.register_collector(Box::new(Health {
        state: state.clone(),
        index,
    }));
    registry
}

pub async fn scrape(State(registry): State<Arc<Registry>>, headers: HeaderMap) -> Response {
    crate::http::scrape::respond(registry, &headers).await
}

/// What `/healthz` reports, as metrics, read when Prometheus scrapes.
struct Health {
    state: AppState,
    index: Arc<Index>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Health")
    }
}

/// What the spool folder holds at a scrape.
struct Spool {
    hooks: usize,
    bytes: u64,
    quarantined: usize,
}

/// A number at `pointer` in a `/healthz` value.
fn num(value: &Value, pointer: &str) -> Option<f64> {
    let v = value.pointer(pointer)?;
    v.as_f64().or_else(|| v.as_bool().map(|b| f64::from(u8::from(b))))
}

/// Every scrape-time metric, from one reading of `/healthz`'s numbers, in the order a scrape
/// has always listed them: the daemon, the spool, the connections, the hub and the endpoint, the
/// sinks, the notifications.
fn metrics(health: &Value, index: &Index, spool: Spool) -> Vec<Metric> {
    let mut out = daemon(health, index);
    out.extend(spooled(health, spool));
    out.extend(connections(health));
    out.extend(hub_and_endpoint(health));
    out.extend(Sinks::read(health).metrics());
    out.extend(notifications(health));
    out
}

/// The daemon's uptime, its sessions by state, and the approvals waiting.
fn daemon(health: &Value, index: &Index) -> Vec<Metric> {
    let (live, running, waiting) = index.states();
    vec![
        Metric::gauge("aep_cline_uptime", "Since the daemon started serving")
            .unit(Unit::Seconds)
            .one(num(health, "/uptime_s").unwrap_or_default()),
        Metric::gauge("aep_cline_sessions_open", "Sessions that have not ended").one(live as f64),
        Metric::gauge("aep_cline_sessions_running", "Open sessions with a run going").one(running as f64),
        Metric::gauge("aep_cline_sessions_waiting", "Open sessions waiting on an approval").one(waiting as f64),
        Metric::gauge(
            "aep_cline_sessions_in_memory",
            "Sessions the lane holds in memory (ended ones for their grace)",
        )
        .one(num(health, "/sessions").unwrap_or_default()),
        Metric::gauge(
            "aep_cline_approvals_pending",
            "Approvals of open sessions that wait for an answer",
        )
        .one(index.pending_count() as f64),
    ]
}

/// What the spool holds, what it quarantined, and what it could not keep.
fn spooled(health: &Value, spool: Spool) -> Vec<Metric> {
    vec![
        Metric::gauge("aep_cline_spool_hooks", "Hooks in the spool, waiting to be ingested").one(spool.hooks as f64),
        Metric::gauge("aep_cline_spool", "What the spool holds on disk")
            .unit(Unit::Bytes)
            .one(spool.bytes as f64),
        Metric::gauge(
            "aep_cline_spool_quarantined_hooks",
            "Spooled hooks that can never be ingested, moved to spool/quarantine/ with their reason",
        )
        .one(spool.quarantined as f64),
        Metric::counter(
            "aep_cline_spool_lost_hooks",
            "Hooks the spool could not keep (full or unwritable): their sessions' logs miss them",
        )
        .one(num(health, "/spool/lost").unwrap_or_default()),
    ]
}

/// The listener's and the socket's connections against their cap.
fn connections(health: &Value) -> Vec<Metric> {
    vec![
        Metric::gauge(
            "aep_cline_connections_open",
            "Open connections on the listener and the socket",
        )
        .one(num(health, "/connections/open").unwrap_or_default()),
        Metric::gauge("aep_cline_connections_max", "The connection cap (AEP_MAX_CONNECTIONS)")
            .one(num(health, "/connections/max").unwrap_or_default()),
        Metric::counter(
            "aep_cline_connections_refused",
            "Connections closed at once: the cap was reached",
        )
        .one(num(health, "/connections/refused").unwrap_or_default()),
    ]
}

/// The hub tap's connection and the embedded endpoint's buffer, each absent when it is off.
fn hub_and_endpoint(health: &Value) -> [Metric; 2] {
    let mut hub = Metric::gauge(
        "aep_cline_hub_connected",
        "Whether the hub control tap is connected to Cline's hub (absent when the tap is off)",
    );
    hub.at(Vec::new(), num(health, "/hub/connected"));
    let mut buffer = Metric::gauge(
        "aep_cline_endpoint_buffer",
        "What the embedded endpoint's replay buffer holds",
    )
    .unit(Unit::Bytes);
    buffer.at(Vec::new(), num(health, "/endpoint/buffer_bytes"));
    [hub, buffer]
}

/// The sinks' metrics, one series per sink that is on: the relay, the OTLP exporters and
/// JetStream report under different names in `/healthz`, one metric here.
struct Sinks {
    connected: Metric,
    sent: Metric,
    retries: Metric,
    resent: Metric,
    dropped: Metric,
    overflow: Metric,
    pending: Metric,
    outbox: Metric,
}

impl Sinks {
    /// The sinks' series, read from `/healthz`'s sections (a sink that is off has none).
    fn read(health: &Value) -> Self {
        let mut sinks = Sinks::described();
        for (sink, at) in [
            ("relay", "/relay"),
            ("otlp", "/otlp"),
            ("otlp_traces", "/otlp/traces"),
            ("nats", "/nats"),
        ] {
            if let Some(status) = health.pointer(at).filter(|s| !s.is_null()) {
                sinks.add(sink, status);
            }
        }
        sinks
    }

    /// The metrics, no series yet.
    fn described() -> Self {
        Sinks {
            connected: Metric::gauge(
                "aep_cline_sink_connected",
                "Whether the sink's last attempt reached its peer",
            ),
            sent: Metric::counter(
                "aep_cline_sink_sent_events",
                "Events the sink's peer confirmed (the relay: written to its socket)",
            ),
            retries: Metric::counter(
                "aep_cline_sink_retries",
                "Batches sent again because the peer did not have them",
            ),
            resent: Metric::counter(
                "aep_cline_sink_resent_events",
                "Events resent from the session logs (after an outage, a restart or a full outbox)",
            ),
            dropped: Metric::counter(
                "aep_cline_sink_dropped_events",
                "Events the sink gave up on, by why (refused by the peer, low severity dropped from a full outbox)",
            ),
            overflow: Metric::counter(
                "aep_cline_sink_overflow_events",
                "Events left out of a full outbox, resent from the logs later (not lost)",
            ),
            pending: Metric::gauge(
                "aep_cline_sink_pending_events",
                "Events published and not yet confirmed by the peer",
            ),
            outbox: Metric::gauge("aep_cline_sink_outbox_events", "Events in the sink's outbox"),
        }
    }

    /// One sink's series, from its `/healthz` section.
    fn add(&mut self, sink: &'static str, status: &Value) {
        let labels = || vec![("sink", sink)];
        self.connected.at(labels(), num(status, "/connected"));
        // The relay confirms positions, not Events: its count is what was written to it.
        self.sent
            .at(labels(), num(status, "/confirmed").or(num(status, "/sent")));
        self.retries.at(labels(), num(status, "/retries"));
        self.resent.at(labels(), num(status, "/resends"));
        self.pending.at(labels(), num(status, "/pending"));
        self.outbox.at(labels(), num(status, "/outbox"));
        self.overflow.at(
            labels(),
            num(status, "/from_log").or(num(status, "/dropped/notice_resent_from_log")),
        );
        self.dropped
            .at(
                vec![("sink", sink), ("reason", "refused")],
                num(status, "/refused/events").or(num(status, "/dropped/refused_events")),
            )
            .at(
                vec![("sink", sink), ("reason", "rejected")],
                num(status, "/dropped/rejected_by_collector"),
            )
            .at(
                vec![("sink", sink), ("reason", "low_severity")],
                num(status, "/dropped/debug_info"),
            );
    }

    /// In the order a scrape lists them.
    fn metrics(self) -> [Metric; 8] {
        [
            self.connected,
            self.sent,
            self.retries,
            self.resent,
            self.dropped,
            self.overflow,
            self.pending,
            self.outbox,
        ]
    }
}

/// Notifications (`AEP_CLINE_NOTIFY`), summed over the targets: a target's only name is its
/// URL, and an ntfy topic or a webhook's path is a secret, so no series is per target.
fn notifications(health: &Value) -> Vec<Metric> {
    let Some(targets) = health.pointer("/notify/targets").and_then(Value::as_array) else {
        return Vec::new();
    };
    let sum = |key: &str| targets.iter().filter_map(|t| num(t, &format!("/{key}"))).sum::<f64>();
    let mut told = Metric::counter(
        "aep_cline_notifications",
        "Notifications of a waiting approval, by outcome (sent; failed: given up after retries; dropped: a full queue drops the oldest)",
    );
    for outcome in ["sent", "failed", "dropped"] {
        told.at(vec![("outcome", outcome)], Some(sum(outcome)));
    }
    vec![
        told,
        Metric::counter(
            "aep_cline_notification_retries",
            "Notifications sent again after a failed attempt",
        )
        .one(sum("retries")),
        Metric::gauge("aep_cline_notifications_queued", "Notifications waiting to be sent").one(sum("queued")),
    ]
}

impl Collector for Health {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let health = super::health(&self.state);
        let (hooks, bytes) = self.state.spool.usage();
        let spool = Spool {
            hooks,
            bytes,
            quarantined: self.state.spool.quarantined(),
        };
        for metric in metrics(&health, &self.index, spool) {
            metric.encode(&mut encoder)?;
        }
        Ok(())
    }
}
