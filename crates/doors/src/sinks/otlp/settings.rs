//! The OTLP exporter's settings (`AEP_OTLP_*`), one clap struct flattened into `aep-cline
//! daemon`, and what they resolve to at start. The exporter is on only when
//! `AEP_OTLP_ENDPOINT` names a collector; a malformed value stops the daemon at start, naming
//! the setting (a typo in a header or a filter must not silently export everything, or
//! nothing).

use crate::setting;
use aep_core::filter::Filter;
use aep_core::CapturePolicy;
use anyhow::{bail, Context};
use clap::Args;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Uri;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "OTLP export (logs, traces, metrics)")]
pub struct OtlpArgs {
    /// An OpenTelemetry collector's OTLP/HTTP base URL (http://collector:4318, or https://);
    /// Events are sent to its /v1/logs, spans to /v1/traces and metrics to /v1/metrics, as
    /// protobuf. The exporter is off without it.
    #[arg(long, env = "AEP_OTLP_ENDPOINT", value_name = "URL", hide_env_values = true)]
    pub otlp_endpoint: Option<String>,
    /// Headers sent with every export, e.g. `authorization=Bearer%20t,x-tenant=a`
    /// (OTEL_EXPORTER_OTLP_HEADERS' form: comma-separated key=value, values percent-decoded).
    #[arg(long, env = "AEP_OTLP_HEADERS", value_name = "K=V,...", hide_env_values = true)]
    pub otlp_headers: Option<String>,
    /// For https://: a private CA's certificate (PEM), trusted beside the system's roots.
    #[arg(long, env = "AEP_OTLP_CA", value_name = "PEM_FILE")]
    pub otlp_ca: Option<PathBuf>,
    /// The exporter's own capture ceiling (AEP-0005 §3.3): Events above it are down-leveled
    /// before export. Same form as AEP_CAPTURE, e.g. `none` or `metadata,tool=redacted`.
    #[arg(long, env = "AEP_OTLP_CAPTURE", default_value = "metadata", value_name = "LEVEL[,CATEGORY=LEVEL]",
          value_parser = capture)]
    pub otlp_capture: CapturePolicy,
    /// Only Events this attr-match filter (AEP-0003 §6) matches are exported, e.g.
    /// `{"type":["run.*","tool.failed"],"severity":{"gte":"notice"}}` [default: every Event]
    #[arg(long, env = "AEP_OTLP_FILTER", value_name = "JSON")]
    pub otlp_filter: Option<String>,
    /// The resource's service.name [default: each Event's agent, `cline`]
    #[arg(long, env = "AEP_OTLP_SERVICE_NAME", value_name = "NAME")]
    pub otlp_service_name: Option<String>,
    /// Events per export request, at most.
    #[arg(long, env = "AEP_OTLP_BATCH", default_value = "512", value_name = "EVENTS",
          value_parser = setting::events("AEP_OTLP_BATCH"))]
    pub otlp_batch: usize,
    /// The longest an Event waits for its batch to fill before it is sent.
    #[arg(long, env = "AEP_OTLP_FLUSH", default_value = "1s", value_name = "DURATION",
          value_parser = setting::duration("AEP_OTLP_FLUSH", Duration::ZERO, "1s or 500ms"))]
    pub otlp_flush: Duration,
    /// Events held in memory while the collector is slow or away; beyond it they are
    /// resent from the logs (nothing is dropped).
    #[arg(long, env = "AEP_OTLP_OUTBOX", default_value = "10000", value_name = "EVENTS",
          value_parser = setting::events("AEP_OTLP_OUTBOX"))]
    pub otlp_outbox: usize,
    /// Spans too (`<base>/v1/traces`): a trace per run, `invoke_agent` with an `execute_tool`
    /// child per tool call (OpenTelemetry GenAI conventions): 1 or 0.
    #[arg(long, env = "AEP_OTLP_TRACES", default_value = "1", value_name = "1|0",
          value_parser = setting::gate("AEP_OTLP_TRACES"), action = clap::ArgAction::Set)]
    pub otlp_traces: bool,
    /// Metrics too (`<base>/v1/metrics`): tokens by class and model, cost, tool calls by
    /// outcome, cumulative since the daemon started: 1 or 0.
    #[arg(long, env = "AEP_OTLP_METRICS", default_value = "1", value_name = "1|0",
          value_parser = setting::gate("AEP_OTLP_METRICS"), action = clap::ArgAction::Set)]
    pub otlp_metrics: bool,
    /// How often the metrics are sent.
    #[arg(long, env = "AEP_OTLP_METRICS_INTERVAL", default_value = "60s", value_name = "DURATION",
          value_parser = setting::duration("AEP_OTLP_METRICS_INTERVAL", Duration::from_secs(1), "60s or 5m"))]
    pub otlp_metrics_interval: Duration,
    /// One export request's time limit (then it is retried).
    #[arg(long, env = "AEP_OTLP_TIMEOUT", default_value = "10s", value_name = "DURATION",
          value_parser = setting::duration("AEP_OTLP_TIMEOUT", Duration::ZERO, "1s or 500ms"))]
    pub otlp_timeout: Duration,
}

/// The three OTLP signals this daemon sends, each on its own route with its own answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Logs,
    Traces,
    Metrics,
}

/// What the exporter runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The full URL of the logs route (`…/v1/logs`).
    pub url: Uri,
    /// The traces route (`…/v1/traces`), when spans are sent too.
    pub traces: Option<Uri>,
    /// The metrics route (`…/v1/metrics`), when metrics are sent too.
    pub metrics: Option<Uri>,
    pub metrics_interval: Duration,
    /// For https://: the system's roots and `AEP_OTLP_CA`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub capture: CapturePolicy,
    pub filter: Filter,
    pub service_name: Option<String>,
    pub batch: usize,
    pub flush: Duration,
    pub outbox: usize,
    pub timeout: Duration,
}

impl Settings {
    /// The collector as it may be shown (never its query or credentials).
    pub fn shown(&self) -> String {
        shown(&self.url)
    }

    /// The route of a signal (the logs route for a signal that is off: never asked).
    pub fn url_of(&self, signal: Signal) -> Uri {
        match signal {
            Signal::Logs => None,
            Signal::Traces => self.traces.clone(),
            Signal::Metrics => self.metrics.clone(),
        }
        .unwrap_or_else(|| self.url.clone())
    }
}

fn shown(url: &Uri) -> String {
    crate::http::redact::url(&url.to_string())
}

impl OtlpArgs {
    /// `None` when no collector is named.
    pub fn settings(&self) -> anyhow::Result<Option<Settings>> {
        let Some(endpoint) = self.otlp_endpoint.as_deref().map(str::trim) else {
            return Ok(None);
        };
        let url = route(endpoint, "/v1/logs")?;
        let traces = match self.otlp_traces {
            true => Some(route(endpoint, "/v1/traces")?),
            false => None,
        };
        let metrics = match self.otlp_metrics {
            true => Some(route(endpoint, "/v1/metrics")?),
            false => None,
        };
        let secure = url.scheme_str() == Some("https");
        let tls = match (secure, &self.otlp_ca) {
            (true, ca) => Some(crate::http::tls::client_config_for(ca.as_deref(), "AEP_OTLP_CA")?),
            (false, Some(_)) => bail!(
                "AEP_OTLP_CA is set but AEP_OTLP_ENDPOINT={:?} is not https://: the CA is for a TLS collector",
                shown(&url)
            ),
            (false, None) => None,
        };
        let headers = match &self.otlp_headers {
            Some(text) => headers(text)?,
            None => Vec::new(),
        };
        let filter = match &self.otlp_filter {
            None => Filter::default(),
            Some(text) => {
                let value: serde_json::Value = serde_json::from_str(text).with_context(|| {
                    "AEP_OTLP_FILTER is not JSON: give an attr-match object such as {\"type\":\"run.*\"}".to_string()
                })?;
                Filter::parse(&value).map_err(|e| anyhow::anyhow!("AEP_OTLP_FILTER: {e}"))?
            }
        };
        if let Some(name) = &self.otlp_service_name {
            if name.trim().is_empty() {
                bail!("AEP_OTLP_SERVICE_NAME is empty: name the service, or unset it to use each Event's agent");
            }
        }
        Ok(Some(Settings {
            url,
            traces,
            metrics,
            metrics_interval: self.otlp_metrics_interval,
            tls,
            headers,
            capture: self.otlp_capture.clone(),
            filter,
            service_name: self.otlp_service_name.clone(),
            batch: self.otlp_batch,
            flush: self.otlp_flush,
            outbox: self.otlp_outbox,
            timeout: self.otlp_timeout,
        }))
    }
}

/// A signal's route: the base URL plus `/v1/logs`, `/v1/traces` or `/v1/metrics` (as
/// OTEL_EXPORTER_OTLP_ENDPOINT); a URL that already names one of the three routes is read as
/// its base.
fn route(endpoint: &str, signal_path: &str) -> anyhow::Result<Uri> {
    let uri: Uri = endpoint.parse().map_err(|_| {
        anyhow::anyhow!("AEP_OTLP_ENDPOINT is not a URL: use http://collector:4318 (OTLP/HTTP) or https://…")
    })?;
    let shown_now = shown(&uri);
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => bail!(
            "AEP_OTLP_ENDPOINT={shown_now:?} is not http:// or https://: OTLP/HTTP, e.g. http://collector:4318 (gRPC's 4317 is not spoken)"
        ),
    }
    if uri.host().is_none_or(str::is_empty) {
        bail!("AEP_OTLP_ENDPOINT={shown_now:?} names no host: use http://collector:4318");
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        bail!("AEP_OTLP_ENDPOINT carries credentials in the URL: put them in AEP_OTLP_HEADERS (e.g. authorization=Basic%20…)");
    }
    let path = uri.path().trim_end_matches('/');
    let base = ["/v1/logs", "/v1/traces", "/v1/metrics"]
        .iter()
        .find_map(|p| path.strip_suffix(p))
        .unwrap_or(path);
    let path = format!("{base}{signal_path}");
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let full = format!(
        "{}://{}{path}{query}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    full.parse()
        .map_err(|_| anyhow::anyhow!("AEP_OTLP_ENDPOINT={shown_now:?} is not a usable URL"))
}

/// `key=value,key2=value2`, values percent-decoded (the OTEL_EXPORTER_OTLP_HEADERS form).
/// Values never appear in an error: they are often tokens.
fn headers(text: &str) -> anyhow::Result<Vec<(HeaderName, HeaderValue)>> {
    let mut out = Vec::new();
    for (i, pair) in text.split(',').map(str::trim).enumerate() {
        if pair.is_empty() {
            continue;
        }
        let Some((key, value)) = pair.split_once('=') else {
            bail!(
                "AEP_OTLP_HEADERS: entry {} has no `=`: write key=value, comma-separated",
                i + 1
            );
        };
        let key = key.trim();
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| anyhow::anyhow!("AEP_OTLP_HEADERS: {key:?} is not a header name"))?;
        let decoded = percent_encoding::percent_decode_str(value.trim()).collect::<Vec<u8>>();
        let value = HeaderValue::from_bytes(&decoded).map_err(|_| {
            anyhow::anyhow!("AEP_OTLP_HEADERS: the value of {key:?} is not a header value (control characters?)")
        })?;
        out.push((name, value));
    }
    Ok(out)
}

fn capture(value: &str) -> Result<CapturePolicy, String> {
    CapturePolicy::parse(value).map_err(|e| format!("AEP_OTLP_CAPTURE={value:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        otlp: OtlpArgs,
    }

    fn settings(flags: &[&str]) -> Result<Option<Settings>, String> {
        let cmd =
            Cmd::try_parse_from(std::iter::once("daemon").chain(flags.iter().copied())).map_err(|e| e.to_string())?;
        cmd.otlp.settings().map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn off_without_an_endpoint_and_defaults_otherwise() {
        assert!(settings(&[]).unwrap().is_none());
        let s = settings(&["--otlp-endpoint", "http://collector:4318"])
            .unwrap()
            .unwrap();
        assert_eq!(s.url.to_string(), "http://collector:4318/v1/logs");
        assert_eq!(
            (s.batch, s.outbox, s.flush, s.timeout),
            (512, 10_000, Duration::from_secs(1), Duration::from_secs(10))
        );
        assert_eq!(s.capture.to_string(), "metadata");
        assert!(s.tls.is_none() && s.headers.is_empty());
        let s = settings(&["--otlp-endpoint", "http://c:4318/otlp/v1/logs/"])
            .unwrap()
            .unwrap();
        assert_eq!(s.url.path(), "/otlp/v1/logs", "a full logs URL is used as it is");
        assert_eq!(
            s.url_of(Signal::Traces).path(),
            "/otlp/v1/traces",
            "its base gives the other routes"
        );
        let s = settings(&["--otlp-endpoint", "https://c/prefix"]).unwrap().unwrap();
        assert_eq!(s.url.to_string(), "https://c/prefix/v1/logs");
        assert_eq!(s.url_of(Signal::Traces).to_string(), "https://c/prefix/v1/traces");
        assert_eq!(s.url_of(Signal::Metrics).to_string(), "https://c/prefix/v1/metrics");
        assert_eq!(s.metrics_interval, Duration::from_secs(60));
        assert!(s.tls.is_some());
        let s = settings(&[
            "--otlp-endpoint",
            "http://c",
            "--otlp-traces",
            "0",
            "--otlp-metrics",
            "off",
        ])
        .unwrap()
        .unwrap();
        assert!(
            s.traces.is_none() && s.metrics.is_none(),
            "each signal has its own gate"
        );
        for (flag, value, needle) in [
            ("--otlp-traces", "yes", "AEP_OTLP_TRACES=\"yes\": use 1 (on) or 0 (off)"),
            ("--otlp-metrics-interval", "0s", "AEP_OTLP_METRICS_INTERVAL"),
            ("--otlp-metrics-interval", "500ms", "at least 1s"),
        ] {
            let e = settings(&["--otlp-endpoint", "http://c", flag, value]).unwrap_err();
            assert!(e.contains(needle), "{flag} {value}: {e}");
        }
    }

    #[test]
    fn malformed_settings_are_refused_naming_the_setting_and_never_a_secret() {
        let cases: &[(&[&str], &str)] = &[
            (&["--otlp-endpoint", "collector:4318"], "AEP_OTLP_ENDPOINT"),
            (&["--otlp-endpoint", "grpc://c:4317"], "not http:// or https://"),
            (&["--otlp-endpoint", "http://user:s3cret@c:4318"], "AEP_OTLP_HEADERS"),
            (&["--otlp-endpoint", "http://c", "--otlp-ca", "/ca.pem"], "AEP_OTLP_CA"),
            (
                &["--otlp-endpoint", "https://c", "--otlp-ca", "/nowhere/ca.pem"],
                "AEP_OTLP_CA=/nowhere/ca.pem",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-headers", "authorization"],
                "no `=`",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-headers", "bad name=s3cret"],
                "not a header name",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-headers", "a=s3cret%0A"],
                "not a header value",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-filter", "{type"],
                "AEP_OTLP_FILTER is not JSON",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-filter", r#"{"data":1}"#],
                "AEP_OTLP_FILTER",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-capture", "meta"],
                "AEP_OTLP_CAPTURE",
            ),
            (
                &["--otlp-endpoint", "http://c", "--otlp-batch", "0"],
                "AEP_OTLP_BATCH=0",
            ),
            (&["--otlp-endpoint", "http://c", "--otlp-flush", "0s"], "AEP_OTLP_FLUSH"),
            (
                &["--otlp-endpoint", "http://c", "--otlp-service-name", " "],
                "AEP_OTLP_SERVICE_NAME",
            ),
        ];
        for (flags, says) in cases {
            let e = match settings(flags) {
                Err(e) => e,
                Ok(_) => panic!("{flags:?} was accepted"),
            };
            assert!(e.contains(says), "{flags:?}: {e}");
            assert!(!e.contains("s3cret"), "{flags:?} shows a secret: {e}");
        }
    }

    #[test]
    fn headers_are_percent_decoded_and_a_filter_parses() {
        let s = settings(&[
            "--otlp-endpoint",
            "http://c",
            "--otlp-headers",
            "authorization=Bearer%20t0k, x-tenant = a ,",
            "--otlp-filter",
            r#"{"type":"run.*","severity":{"gte":"notice"}}"#,
        ])
        .unwrap()
        .unwrap();
        let h: Vec<(String, String)> = s
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        assert_eq!(
            h,
            [
                ("authorization".to_string(), "Bearer t0k".to_string()),
                ("x-tenant".into(), "a".into())
            ]
        );
        assert!(s
            .filter
            .matches(&serde_json::json!({"type": "run.failed", "severity": "error"})));
        assert!(!s.filter.matches(&serde_json::json!({"type": "run.started"})));
    }
}
