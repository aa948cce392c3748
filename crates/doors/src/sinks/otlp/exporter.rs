//! One export: a batch of Events → `ExportLogsServiceRequest` (opentelemetry-proto's types,
//! generated from the official .proto files, encoded by prost), gzip, `POST …/v1/logs`, and
//! what the collector's answer means for the batch (OTLP/HTTP, opentelemetry-proto
//! `docs/specification.md`):
//!
//! - 2xx: the collector has it. A `partial_success` naming rejected records is counted and said
//!   in the log, not retried (the spec forbids retrying it).
//! - 429 and 5xx, a connection refused or reset, no answer within `AEP_OTLP_TIMEOUT`: retried,
//!   after the collector's `Retry-After` when it sends one.
//! - Any other status (400, 401, 404, 413, ...): the collector would refuse the same bytes
//!   again however often they are sent, so retrying would only stall every later Event behind
//!   them; the batch is dropped and counted, with the collector's reason.

use super::record;
use super::settings::{Settings, Signal};
use crate::lane::Published;
use crate::sinks::delivery::deliver::{Outcome, Publisher};
use aep_core::gate::downlevel;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
use hyper::{Request, StatusCode};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
use prost::Message;
use serde_json::Value;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The most of an answer's body read (an error's reason, a partial success).
const MAX_ANSWER: usize = 64 * 1024;

/// What the exporter counts beyond the delivery loop.
#[derive(Default)]
pub struct Counts {
    /// Records a collector's `partial_success` said it rejected.
    pub rejected: AtomicU64,
    /// Events the filter (`AEP_OTLP_FILTER`) left out.
    pub filtered: AtomicU64,
}

/// The logs exporter: Events as LogRecords on `…/v1/logs`.
pub struct Exporter {
    settings: Arc<Settings>,
    host: String,
    collector: Collector,
}

/// One collector route and how to speak to it: the request, gzip, and what its answer means.
pub struct Collector {
    settings: Arc<Settings>,
    signal: Signal,
    client: crate::http::client::Sender,
    counts: Arc<Counts>,
}

/// `google.rpc.Status`, the body of an OTLP/HTTP error answer (only its message is read).
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

impl Exporter {
    pub fn new(settings: Arc<Settings>, host: String, counts: Arc<Counts>) -> Exporter {
        let collector = Collector::new(settings.clone(), Signal::Logs, counts);
        Exporter {
            settings,
            host,
            collector,
        }
    }

    /// The request for a batch: the filter applied, each Event down-leveled to the ceiling
    /// (AEP-0005 §3.3) and mapped; one ResourceLogs per service. `None` when the filter left
    /// nothing.
    pub fn request(&self, batch: &[Arc<Published>]) -> Option<ExportLogsServiceRequest> {
        let mut resources: Vec<(String, Vec<_>)> = Vec::new();
        for event in batch {
            let value = &event.value;
            if !self.settings.filter.matches(value) {
                self.collector.counts.filtered.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let ty = value.get("type").and_then(Value::as_str).unwrap_or_default();
            let record = record::log_record(&downlevel(value, self.settings.capture.ceiling(ty)));
            let service = match &self.settings.service_name {
                Some(name) => name.clone(),
                None => value
                    .get("agent")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown_service")
                    .to_string(),
            };
            match resources.iter_mut().find(|(s, _)| *s == service) {
                Some((_, records)) => records.push(record),
                None => resources.push((service, vec![record])),
            }
        }
        if resources.is_empty() {
            return None;
        }
        let scope = InstrumentationScope {
            name: "aep-cline".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        };
        let resource_logs = resources
            .into_iter()
            .map(|(service, log_records)| ResourceLogs {
                resource: Some(record::resource(&service, &self.host)),
                scope_logs: vec![ScopeLogs {
                    scope: Some(scope.clone()),
                    log_records,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect();
        Some(ExportLogsServiceRequest { resource_logs })
    }
}

impl Collector {
    pub fn new(settings: Arc<Settings>, signal: Signal, counts: Arc<Counts>) -> Collector {
        // http:// only without TLS settings; the connector wants a configuration all the same.
        let tls = settings
            .tls
            .clone()
            .unwrap_or_else(crate::http::client::trusting_no_one);
        let client = crate::http::client::sender(&tls);
        Collector {
            settings,
            signal,
            client,
            counts,
        }
    }

    /// A request's protobuf, gzipped, sent; the collector's answer as the batch's outcome.
    pub async fn export(&self, message: &impl Message) -> Outcome {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let body = gz
            .write_all(&message.encode_to_vec())
            .and_then(|()| gz.finish())
            .expect("gzip into memory");
        self.send(body).await
    }

    async fn send(&self, body: Vec<u8>) -> Outcome {
        let url = self.settings.url_of(self.signal);
        let mut request = Request::post(url)
            .header(CONTENT_TYPE, "application/x-protobuf")
            .header(CONTENT_ENCODING, "gzip")
            .header(USER_AGENT, concat!("aep-cline/", env!("CARGO_PKG_VERSION")));
        for (name, value) in &self.settings.headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(Bytes::from(body))).expect("a valid request");
        let timeout = self.settings.timeout;
        let response = match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => {
                return Outcome::Retry {
                    error: format!("the collector did not answer within {timeout:?} (AEP_OTLP_TIMEOUT)"),
                    after: None,
                }
            }
            Ok(Err(e)) => {
                return Outcome::Retry {
                    error: connection_error(&e, &self.settings.shown()),
                    after: None,
                }
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, SystemTime::now()));
        let answer = tokio::time::timeout(timeout, Limited::new(response.into_body(), MAX_ANSWER).collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if status.is_success() {
            if let Some((rejected, reason)) = rejected(self.signal, answer.as_ref()) {
                self.counts.rejected.fetch_add(rejected, Ordering::Relaxed);
                tracing::warn!(rejected, reason = %reason, items = items(self.signal),
                    "the collector accepted the batch but rejected some of it (not retried, per OTLP)");
            }
            return Outcome::Confirmed;
        }
        let reason = reason(&answer);
        let error = format!("HTTP {} from the collector{reason}", status.as_u16());
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Outcome::Retry {
                error,
                after: retry_after,
            };
        }
        Outcome::Refused(format!(
            "{error} (a collector that refuses a batch would refuse it again){}",
            hint(status, self.signal)
        ))
    }
}

impl Publisher for Exporter {
    async fn publish(&mut self, batch: &[Arc<Published>]) -> Outcome {
        let Some(request) = self.request(batch) else {
            return Outcome::Confirmed; // the filter left nothing to send
        };
        self.collector.export(&request).await
    }
}

/// What the collector's `partial_success` counts as rejected, in words.
fn items(signal: Signal) -> &'static str {
    match signal {
        Signal::Logs => "records",
        Signal::Traces => "spans",
        Signal::Metrics => "data points",
    }
}

/// The rejected count and reason of a 2xx answer's `partial_success`.
fn rejected(signal: Signal, answer: &[u8]) -> Option<(u64, String)> {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    let (count, reason) = match signal {
        Signal::Logs => ExportLogsServiceResponse::decode(answer)
            .ok()?
            .partial_success
            .map(|p| (p.rejected_log_records, p.error_message))?,
        Signal::Traces => ExportTraceServiceResponse::decode(answer)
            .ok()?
            .partial_success
            .map(|p| (p.rejected_spans, p.error_message))?,
        Signal::Metrics => ExportMetricsServiceResponse::decode(answer)
            .ok()?
            .partial_success
            .map(|p| (p.rejected_data_points, p.error_message))?,
    };
    (count > 0).then_some((count as u64, reason))
}

/// The collector's reason: a `google.rpc.Status` message, else printable text, cut short.
fn reason(answer: &[u8]) -> String {
    let text = match RpcStatus::decode(answer) {
        Ok(status) if !status.message.is_empty() => status.message,
        _ => String::from_utf8_lossy(answer).into_owned(),
    };
    let text: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    if text.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", text.trim())
    }
}

fn hint(status: StatusCode, signal: Signal) -> &'static str {
    match (status.as_u16(), signal) {
        (401 | 403, _) => "; check AEP_OTLP_HEADERS (the collector's credentials)",
        (404, Signal::Logs) => "; check AEP_OTLP_ENDPOINT (the logs route is <base>/v1/logs)",
        (404, Signal::Traces) => {
            "; the collector has no traces route (<base>/v1/traces): give it a traces pipeline, or set AEP_OTLP_TRACES=0"
        }
        (404, Signal::Metrics) => {
            "; the collector has no metrics route (<base>/v1/metrics): give it a metrics pipeline, or set AEP_OTLP_METRICS=0"
        }
        (413, _) => "; lower AEP_OTLP_BATCH or raise the collector's max_request_body_size",
        _ => "",
    }
}

/// `Retry-After`: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// A failed request, said so an operator knows what to fix: a refused certificate names the
/// collector and `AEP_OTLP_CA`. The connector hands rustls's error over boxed inside an I/O
/// error, so it is recognised by its text (`invalid peer certificate: …`).
fn connection_error(e: &hyper_util::client::legacy::Error, collector: &str) -> String {
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        let text = err.to_string();
        if text.starts_with("invalid peer certificate") {
            return format!(
                "the TLS certificate of the collector at {collector} was refused ({text}): if a private CA signed it, \
                 set AEP_OTLP_CA to that CA's certificate (PEM)"
            );
        }
        chain.push_str(": ");
        chain.push_str(&text);
        source = err.source();
    }
    format!("cannot reach the collector at {collector}: {chain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Tue, 01 Dec 2026 10:00:00 GMT").unwrap();
        assert_eq!(retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("Tue, 01 Dec 2026 10:00:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Tue, 01 Dec 2026 09:00:00 GMT", now),
            Some(Duration::ZERO),
            "in the past: now"
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn a_collectors_reason_is_read_from_its_status_or_text() {
        let status = RpcStatus {
            code: 3,
            message: "bad\nrecord".into(),
        };
        assert_eq!(reason(&status.encode_to_vec()), ": badrecord");
        assert_eq!(reason(b"plain words"), ": plain words");
        assert_eq!(reason(b""), "");
    }
}
