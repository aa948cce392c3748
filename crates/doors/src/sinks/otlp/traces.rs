//! The traces leg of the OTLP exporter (`AEP_OTLP_TRACES`, on by default with
//! `AEP_OTLP_ENDPOINT`): the spans [`super::span`] makes of the Events, on `…/v1/traces`.
//!
//! It is a durable sink of its own (marks in `.otlp-traces.json`), not a rider on the logs: a
//! collector without a traces pipeline answers 404 there, and that must never hold the logs
//! back; a run that ends while the collector is down has its spans sent when it is back, from
//! the logs if need be, as the log records are. The filter (`AEP_OTLP_FILTER`) is for log
//! records only: a span needs both its start and its end. The capture ceiling
//! (`AEP_OTLP_CAPTURE`) applies as it does to the logs, before a span is made, so arguments
//! and results reach a span only where the operator opted into them.

use super::exporter::Collector;
use super::leg::Leg;
use super::record;
use super::settings::{Settings, Signal};
use super::span::{Finished, Spans};
use crate::lane::{Journal, Note, Published};
use crate::sinks::delivery::deliver::{Outcome, Publisher};
use aep_core::gate::downlevel;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::Arc;

pub struct Traces {
    settings: Arc<Settings>,
    host: String,
    leg: Leg,
    /// Spans open now (runs, tool calls), for `/healthz`.
    open: Arc<Mutex<(usize, usize)>>,
}

impl Traces {
    pub fn new(settings: Arc<Settings>, journal: Journal, host: String) -> Arc<Traces> {
        let endpoint = crate::http::redact::url(&settings.url_of(Signal::Traces).to_string());
        let leg = Leg::new("otlp-traces", endpoint, &settings, journal);
        Arc::new(Traces {
            settings,
            host,
            leg,
            open: Arc::default(),
        })
    }

    pub async fn pump(self: Arc<Self>, bus: tokio::sync::broadcast::Receiver<Note>) {
        self.leg.pump(bus).await
    }

    /// Delivers until the daemon stops.
    pub async fn run(self: Arc<Self>) {
        let exporter = SpanExporter {
            settings: self.settings.clone(),
            host: self.host.clone(),
            collector: Collector::new(self.settings.clone(), Signal::Traces, self.leg.counts.clone()),
            spans: Spans::default(),
            open: self.open.clone(),
        };
        self.leg.deliver(exporter, &self.settings).await
    }

    /// For `/healthz` (`otlp.traces`): the leg's status ([`Leg::status`]) with the spans open.
    pub fn status(&self) -> Value {
        let (runs, tools) = *self.open.lock();
        let mut status = self.leg.status();
        status.insert("open".into(), json!({"runs": runs, "tools": tools}));
        Value::Object(status)
    }
}

struct SpanExporter {
    settings: Arc<Settings>,
    host: String,
    collector: Collector,
    /// What was remembered after the last batch the collector took (or refused for good).
    spans: Spans,
    open: Arc<Mutex<(usize, usize)>>,
}

impl SpanExporter {
    /// The request for a batch and what is remembered after it: the Events down-leveled to the
    /// ceiling (AEP-0005 §3.3) and fed in order; one ResourceSpans per service.
    fn request(&self, batch: &[Arc<Published>]) -> (Option<ExportTraceServiceRequest>, Spans) {
        let mut spans = self.spans.clone();
        let mut finished = Vec::new();
        for event in batch {
            let ty = event.value.get("type").and_then(Value::as_str).unwrap_or_default();
            spans.feed(
                &downlevel(&event.value, self.settings.capture.ceiling(ty)),
                &mut finished,
            );
        }
        (request(finished, &self.settings, &self.host), spans)
    }
}

fn request(finished: Vec<Finished>, settings: &Settings, host: &str) -> Option<ExportTraceServiceRequest> {
    if finished.is_empty() {
        return None;
    }
    let mut resources: Vec<(String, Vec<_>)> = Vec::new();
    for Finished { agent, span } in finished {
        let service = settings.service_name.clone().unwrap_or(agent);
        match resources.iter_mut().find(|(s, _)| *s == service) {
            Some((_, spans)) => spans.push(span),
            None => resources.push((service, vec![span])),
        }
    }
    let scope = InstrumentationScope {
        name: "aep-cline".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    };
    Some(ExportTraceServiceRequest {
        resource_spans: resources
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(record::resource(&service, host)),
                scope_spans: vec![ScopeSpans {
                    scope: Some(scope.clone()),
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    })
}

impl Publisher for SpanExporter {
    async fn publish(&mut self, batch: &[Arc<Published>]) -> Outcome {
        let (request, next) = self.request(batch);
        let outcome = match request {
            None => Outcome::Confirmed, // only starts: remembered, nothing to send yet
            Some(request) => self.collector.export(&request).await,
        };
        // A retried batch is fed again from what was remembered before it.
        if !matches!(outcome, Outcome::Retry { .. }) {
            self.spans = next;
            *self.open.lock() = self.spans.open();
        }
        outcome
    }
}
