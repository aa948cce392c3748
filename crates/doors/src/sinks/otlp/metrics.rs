//! The metrics leg of the OTLP exporter (`AEP_OTLP_METRICS`, on by default with
//! `AEP_OTLP_ENDPOINT`): what people chart in their OpenTelemetry backend rather than scrape,
//! on `…/v1/metrics` every `AEP_OTLP_METRICS_INTERVAL`, cumulative since the daemon started:
//!
//! - `gen_ai.client.token.usage` (histogram, `{token}`): each run's input and output tokens,
//!   by `gen_ai.token.type` and `gen_ai.request.model`, as the GenAI conventions define it.
//! - `aep.token.usage` (monotonic sum, `{token}`): tokens by class (`input`, `output`,
//!   `cache_read`, `cache_creation`) and model, the per-class counters the conventions are
//!   adding (renamed when they settle).
//! - `aep.cost.usage` (monotonic sum, `USD`): the cost the daemon priced, by model. No
//!   convention names cost yet; Claude Code's `claude_code.cost.usage` in USD is the shape
//!   people already chart, so this is that shape in AEP's namespace. Costs in another currency
//!   are left out (a sum of two currencies means nothing).
//! - `aep.tool.calls` (monotonic sum, `{call}`): tool calls by `gen_ai.tool.name` and
//!   `outcome` (`completed`, `failed`, `denied`).
//!
//! Labels are bounded: at most [`MAX_VALUES`] models and tool names each, the rest counted as
//! `_OTHER` (an MCP server can name tools without end). The tally ([`Tally`]) is pure, fed by
//! the bus; an export that fails is not retried, the next interval's cumulative values cover it.
//! Events the bus dropped for a slow reader are counted (`lagged` in `/healthz`).

use super::exporter::{Collector, Counts};
use super::record::{any, resource};
use super::settings::{Settings, Signal};
use crate::lane::Note;
use crate::sinks::delivery::deliver::Outcome;
use aep_core::types::{
    RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED, SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED,
    TOOL_FAILED,
};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Distinct models, and distinct tool names, kept as label values; the rest are `_OTHER`.
pub const MAX_VALUES: usize = 64;
/// Sessions whose model is remembered (for a run's end, which may not name it).
const MAX_SESSIONS: usize = 10_000;
/// The GenAI conventions' advised buckets for `gen_ai.client.token.usage`.
const TOKEN_BOUNDS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];
const OTHER: &str = "_OTHER";

#[derive(Debug, Clone, Default, PartialEq)]
struct Buckets {
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Buckets {
    fn observe(&mut self, value: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; TOKEN_BOUNDS.len() + 1];
        }
        let at = TOKEN_BOUNDS
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(TOKEN_BOUNDS.len());
        self.counts[at] += 1;
        self.count += 1;
        self.sum += value;
    }
}

/// Everything counted since the daemon started.
#[derive(Debug, Default)]
pub struct Tally {
    /// (token type, model) → the runs' token counts.
    histogram: BTreeMap<(&'static str, String), Buckets>,
    /// (token class, model) → tokens.
    tokens: BTreeMap<(&'static str, String), u64>,
    /// model → USD.
    cost: BTreeMap<String, f64>,
    /// (tool, outcome) → calls.
    tools: BTreeMap<(String, &'static str), u64>,
    models: HashMap<String, String>,
    /// The model names, and the tool names, that are label values.
    model_names: Bounded,
    tool_names: Bounded,
}

/// The values of one label admitted so far: a value is itself while fewer than [`MAX_VALUES`]
/// are, then `_OTHER`. One set lookup per Event, however many series there are.
#[derive(Debug, Default)]
struct Bounded(BTreeSet<String>);

impl Bounded {
    fn admit(&mut self, value: &str) -> String {
        if !self.0.contains(value) {
            if self.0.len() >= MAX_VALUES {
                return OTHER.to_string();
            }
            self.0.insert(value.to_string());
        }
        value.to_string()
    }
}

impl Tally {
    pub fn feed(&mut self, event: &Value) {
        let text = |k: &str| event.get(k).and_then(Value::as_str);
        let (Some(ty), Some(session)) = (text("type"), text("session")) else {
            return;
        };
        let data = event.get("data").cloned().unwrap_or(json!({}));
        let model_in = |d: &Value| {
            d.get("gen_ai.request.model")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        match ty {
            SESSION_STARTED | RUN_STARTED => {
                if let Some(model) = model_in(&data) {
                    if self.models.len() < MAX_SESSIONS || self.models.contains_key(session) {
                        self.models.insert(session.to_string(), model);
                    }
                }
            }
            SESSION_ENDED => {
                self.models.remove(session);
            }
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => {
                let model = model_in(&data)
                    .or_else(|| self.models.get(session).cloned())
                    .unwrap_or_else(|| "unknown".into());
                let model = self.model_names.admit(&model);
                let count = |k: &str| data.get(k).and_then(Value::as_u64);
                let input = count("gen_ai.usage.input_tokens");
                let cache_read = count("gen_ai.usage.cache_read.input_tokens").unwrap_or(0);
                let cache_creation = count("gen_ai.usage.cache_creation.input_tokens").unwrap_or(0);
                let output = count("gen_ai.usage.output_tokens");
                for (kind, n) in [("input", input), ("output", output)] {
                    if let Some(n) = n {
                        self.histogram
                            .entry((kind, model.clone()))
                            .or_default()
                            .observe(n as f64);
                    }
                }
                // `input_tokens` counts every input token (cache reads too); the classes apart.
                let fresh = input.map(|i| i.saturating_sub(cache_read).saturating_sub(cache_creation));
                for (class, n) in [
                    ("input", fresh),
                    ("cache_read", Some(cache_read).filter(|n| *n > 0)),
                    ("cache_creation", Some(cache_creation).filter(|n| *n > 0)),
                    ("output", output),
                ] {
                    if let Some(n) = n {
                        let slot = self.tokens.entry((class, model.clone())).or_default();
                        *slot = slot.saturating_add(n);
                    }
                }
                let total = data.pointer("/cost/total").and_then(Value::as_f64);
                let usd = data.pointer("/cost/currency").and_then(Value::as_str) == Some("USD");
                if let Some(total) = total.filter(|t| usd && t.is_finite() && *t >= 0.0) {
                    *self.cost.entry(model).or_default() += total;
                }
            }
            TOOL_COMPLETED | TOOL_FAILED | TOOL_DENIED => {
                let outcome = match ty {
                    TOOL_COMPLETED => "completed",
                    TOOL_FAILED => "failed",
                    _ => "denied",
                };
                let name = data.pointer("/tool/name").and_then(Value::as_str).unwrap_or("tool");
                let name = self.tool_names.admit(name);
                *self.tools.entry((name, outcome)).or_default() += 1;
            }
            _ => {}
        }
    }

    /// The metrics as OTLP, cumulative from `start` to `now` (nanoseconds since the epoch).
    pub fn metrics(&self, start: u64, now: u64) -> Vec<Metric> {
        let point = |attributes: Vec<KeyValue>, value: number_data_point::Value| NumberDataPoint {
            attributes,
            start_time_unix_nano: start,
            time_unix_nano: now,
            value: Some(value),
            ..Default::default()
        };
        let sum = |name: &str, description: &str, unit: &str, data_points: Vec<NumberDataPoint>| Metric {
            name: name.into(),
            description: description.into(),
            unit: unit.into(),
            data: Some(metric::Data::Sum(Sum {
                data_points,
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })),
            ..Default::default()
        };
        let histogram = Metric {
            name: "gen_ai.client.token.usage".into(),
            description: "Tokens a run used, by token type and model".into(),
            unit: "{token}".into(),
            data: Some(metric::Data::Histogram(Histogram {
                data_points: self
                    .histogram
                    .iter()
                    .map(|((kind, model), b)| HistogramDataPoint {
                        attributes: vec![
                            kv("gen_ai.operation.name", "invoke_agent"),
                            kv("gen_ai.token.type", kind),
                            kv("gen_ai.request.model", model),
                        ],
                        start_time_unix_nano: start,
                        time_unix_nano: now,
                        count: b.count,
                        sum: Some(b.sum),
                        bucket_counts: b.counts.clone(),
                        explicit_bounds: TOKEN_BOUNDS.to_vec(),
                        ..Default::default()
                    })
                    .collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Default::default()
        };
        let tokens = self
            .tokens
            .iter()
            .map(|((class, model), n)| {
                point(
                    vec![kv("gen_ai.token.type", class), kv("gen_ai.request.model", model)],
                    number_data_point::Value::AsInt(i64::try_from(*n).unwrap_or(i64::MAX)),
                )
            })
            .collect();
        let cost = self
            .cost
            .iter()
            .map(|(model, usd)| {
                point(
                    vec![kv("gen_ai.request.model", model)],
                    number_data_point::Value::AsDouble(*usd),
                )
            })
            .collect();
        let tools = self
            .tools
            .iter()
            .map(|((tool, outcome), n)| {
                point(
                    vec![kv("gen_ai.tool.name", tool), kv("outcome", outcome)],
                    number_data_point::Value::AsInt(i64::try_from(*n).unwrap_or(i64::MAX)),
                )
            })
            .collect();
        vec![
            histogram,
            sum("aep.token.usage", "Tokens used, by class and model", "{token}", tokens),
            sum(
                "aep.cost.usage",
                "What the runs cost, as the daemon priced them, by model",
                "USD",
                cost,
            ),
            sum("aep.tool.calls", "Tool calls, by tool and outcome", "{call}", tools),
        ]
    }
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(any(&Value::from(value))),
        ..Default::default()
    }
}

fn nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The tally and its exports.
pub struct Metrics {
    settings: Arc<Settings>,
    host: String,
    tally: Mutex<Tally>,
    start: u64,
    counts: Arc<Counts>,
    exports: AtomicU64,
    lagged: AtomicU64,
    connected: std::sync::atomic::AtomicBool,
    last_error: Mutex<Option<String>>,
}

impl Metrics {
    pub fn new(settings: Arc<Settings>, host: String) -> Arc<Metrics> {
        Arc::new(Metrics {
            settings,
            host,
            tally: Mutex::default(),
            start: nanos(SystemTime::now()),
            counts: Arc::default(),
            exports: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            connected: Default::default(),
            last_error: Mutex::default(),
        })
    }

    /// Counts every Event the bus carries.
    pub async fn pump(self: Arc<Self>, mut bus: tokio::sync::broadcast::Receiver<Note>) {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match bus.recv().await {
                Ok(Note::Event(published)) => self.tally.lock().feed(&published.value),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    self.lagged.fetch_add(n, Ordering::Relaxed);
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// The request of this moment.
    pub fn request(&self) -> ExportMetricsServiceRequest {
        let metrics = self.tally.lock().metrics(self.start, nanos(SystemTime::now()));
        let service = self.settings.service_name.clone().unwrap_or_else(|| "cline".into());
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(resource(&service, &self.host)),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: "aep-cline".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    /// Sends every interval until the daemon stops.
    pub async fn run(self: Arc<Self>) {
        let collector = Collector::new(self.settings.clone(), Signal::Metrics, self.counts.clone());
        let mut every = tokio::time::interval(self.settings.metrics_interval.max(Duration::from_secs(1)));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await; // the first tick is now: nothing counted yet
        loop {
            every.tick().await;
            let error = match collector.export(&self.request()).await {
                Outcome::Confirmed => None,
                Outcome::Refused(why) => Some(why),
                Outcome::Retry { error, .. } => Some(error),
            };
            self.connected.store(error.is_none(), Ordering::Relaxed);
            match error {
                None => {
                    self.exports.fetch_add(1, Ordering::Relaxed);
                }
                Some(e) => {
                    tracing::warn!(error = %e, "otlp metrics: the export failed; the next one carries the same totals");
                    *self.last_error.lock() = Some(e);
                }
            }
        }
    }

    /// For `/healthz` (`otlp.metrics`).
    pub fn status(&self) -> Value {
        json!({
            "endpoint": crate::http::redact::url(&self.settings.url_of(Signal::Metrics).to_string()),
            "connected": self.connected.load(Ordering::Relaxed),
            "last_error": *self.last_error.lock(),
            "exports": self.exports.load(Ordering::Relaxed),
            "interval_seconds": self.settings.metrics_interval.as_secs(),
            "lagged": self.lagged.load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ty: &str, data: Value) -> Value {
        json!({"type": ty, "session": "s1", "run": "r1", "data": data})
    }

    fn points(metrics: &[Metric], name: &str) -> Vec<(Vec<(String, String)>, f64)> {
        let m = metrics.iter().find(|m| m.name == name).unwrap();
        let label = |a: &[KeyValue]| {
            a.iter()
                .map(|kv| {
                    let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    (kv.key.clone(), v)
                })
                .collect::<Vec<_>>()
        };
        match m.data.as_ref().unwrap() {
            metric::Data::Sum(s) => s
                .data_points
                .iter()
                .map(|p| {
                    let v = match p.value {
                        Some(number_data_point::Value::AsInt(i)) => i as f64,
                        Some(number_data_point::Value::AsDouble(d)) => d,
                        None => f64::NAN,
                    };
                    (label(&p.attributes), v)
                })
                .collect(),
            metric::Data::Histogram(h) => h
                .data_points
                .iter()
                .map(|p| (label(&p.attributes), p.sum.unwrap()))
                .collect(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn tokens_by_class_and_model_cost_in_usd_and_tools_by_outcome() {
        let mut t = Tally::default();
        t.feed(&json!({"type": "session.started", "session": "s1", "data": {"gen_ai.request.model": "m1"}}));
        t.feed(&ev("tool.completed", json!({"tool": {"name": "read_file"}})));
        t.feed(&ev(
            "tool.failed",
            json!({"tool": {"name": "read_file"}, "error": {"message": "x"}}),
        ));
        t.feed(&ev(
            "tool.denied",
            json!({"tool": {"name": "execute_command"}, "by": "policy"}),
        ));
        for _ in 0..2 {
            t.feed(&ev(
                "run.finished",
                json!({"gen_ai.usage.input_tokens": 300, "gen_ai.usage.cache_read.input_tokens": 200,
                    "gen_ai.usage.output_tokens": 50, "cost": {"total": 0.25, "currency": "USD"}}),
            ));
        }
        t.feed(&ev(
            "run.failed",
            json!({"reason": "x", "cost": {"total": 9.0, "currency": "EUR"}}),
        ));
        let m = t.metrics(1, 2);
        let model = |class: &str| {
            vec![
                ("gen_ai.token.type".to_string(), class.to_string()),
                ("gen_ai.request.model".into(), "m1".into()),
            ]
        };
        let tokens = points(&m, "aep.token.usage");
        assert!(tokens.contains(&(model("input"), 200.0)), "{tokens:?}");
        assert!(tokens.contains(&(model("cache_read"), 400.0)));
        assert!(tokens.contains(&(model("output"), 100.0)));
        assert_eq!(
            points(&m, "aep.cost.usage"),
            [(vec![("gen_ai.request.model".into(), "m1".into())], 0.5)],
            "EUR left out"
        );
        let tools = points(&m, "aep.tool.calls");
        assert_eq!(tools.len(), 3);
        assert!(tools.contains(&(
            vec![
                ("gen_ai.tool.name".into(), "execute_command".into()),
                ("outcome".into(), "denied".into())
            ],
            1.0
        )));
        let hist = m.iter().find(|m| m.name == "gen_ai.client.token.usage").unwrap();
        let Some(metric::Data::Histogram(h)) = &hist.data else {
            unreachable!()
        };
        let input = h
            .data_points
            .iter()
            .find(|p| p.attributes[1].value == Some(any(&json!("input"))))
            .unwrap();
        assert_eq!((input.count, input.sum), (2, Some(600.0)));
        assert_eq!(input.bucket_counts.iter().sum::<u64>(), 2);
        assert_eq!(input.bucket_counts.len(), input.explicit_bounds.len() + 1);
        assert_eq!((input.start_time_unix_nano, input.time_unix_nano), (1, 2));
    }

    #[test]
    fn label_values_are_bounded_and_hostile_events_count_nothing() {
        let mut t = Tally::default();
        for i in 0..MAX_VALUES + 10 {
            t.feed(&ev("tool.completed", json!({"tool": {"name": format!("mcp_{i}")}})));
            t.feed(&ev(
                "run.finished",
                json!({"gen_ai.request.model": format!("m{i}"), "gen_ai.usage.output_tokens": 1}),
            ));
        }
        for bad in [
            json!(null),
            json!({"type": "run.finished"}),
            json!({"type": "run.finished", "session": "s", "data": {"cost": {"total": -1, "currency": "USD"}, "gen_ai.usage.output_tokens": "many"}}),
        ] {
            t.feed(&bad);
        }
        let m = t.metrics(0, 0);
        let tools = points(&m, "aep.tool.calls");
        assert_eq!(tools.len(), MAX_VALUES + 1, "64 names and _OTHER");
        assert!(tools.iter().any(|(l, n)| l[0].1 == OTHER && *n == 10.0));
        let models: std::collections::BTreeSet<String> = points(&m, "aep.token.usage")
            .into_iter()
            .map(|(l, _)| l[1].1.clone())
            .collect();
        assert!(models.len() <= MAX_VALUES + 2 && models.contains(OTHER), "{models:?}");
        assert!(
            points(&m, "aep.cost.usage").is_empty(),
            "a negative cost is not counted"
        );
    }
}
