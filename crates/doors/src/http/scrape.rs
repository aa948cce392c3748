//! How the daemon's and the fleet console's metrics are served: the answer to a scrape (the
//! format Prometheus asks for) and [`Metric`], a metric whose series are read at scrape time
//! (what `/healthz` already reports, the fleet console's view) rather than counted as they
//! happen.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;

/// The OpenMetrics text format's media type, as Prometheus asks for it.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer to a scrape of `registry`: OpenMetrics when `Accept` asks for it, else the
/// Prometheus text format; encoded off the async threads (a collector may read files).
pub async fn respond(registry: Arc<Registry>, headers: &HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let encoded = tokio::task::spawn_blocking(move || {
        let mut body = String::new();
        if openmetrics {
            prometheus_client::encoding::text::encode(&mut body, &registry).map(|()| (body, OPENMETRICS))
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut body, &registry)
                .map(|()| (body, prometheus_client::encoding::prometheus_text::CONTENT_TYPE))
        }
    })
    .await;
    match encoded {
        Ok(Ok((body, content_type))) => {
            let mut response = body.into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "the metrics could not be encoded");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "the metrics task failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// One metric and its series; a metric without series (a sink that is off) is left out.
pub struct Metric {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    counter: bool,
    series: Vec<(Vec<(&'static str, &'static str)>, f64)>,
}

impl Metric {
    pub fn gauge(name: &'static str, help: &'static str) -> Self {
        Metric {
            name,
            help,
            unit: None,
            counter: false,
            series: Vec::new(),
        }
    }

    pub fn counter(name: &'static str, help: &'static str) -> Self {
        Metric {
            counter: true,
            ..Metric::gauge(name, help)
        }
    }

    pub fn unit(mut self, unit: Unit) -> Self {
        self.unit = Some(unit);
        self
    }

    /// A series, when there is a number (a sink that is off has none).
    pub fn at(&mut self, labels: Vec<(&'static str, &'static str)>, value: Option<f64>) -> &mut Self {
        if let Some(value) = value {
            self.series.push((labels, value));
        }
        self
    }

    pub fn one(mut self, value: f64) -> Self {
        self.series.push((Vec::new(), value));
        self
    }

    pub fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if self.series.is_empty() {
            return Ok(());
        }
        let kind = if self.counter {
            MetricType::Counter
        } else {
            MetricType::Gauge
        };
        // Ended with a full stop, as the registry's own metrics are.
        let help = format!("{}.", self.help);
        let mut metric = encoder.encode_descriptor(self.name, &help, self.unit.as_ref(), kind)?;
        for (labels, value) in &self.series {
            let series = metric.encode_family(labels)?;
            // Whole numbers (every count, most gauges) are written as integers.
            let whole = value.fract() == 0.0 && value.abs() < 2f64.powi(53);
            match (self.counter, whole) {
                (true, true) if *value >= 0.0 => ConstCounter::new(*value as u64).encode(series)?,
                (true, _) => ConstCounter::new(*value).encode(series)?,
                (false, true) => ConstGauge::new(*value as i64).encode(series)?,
                (false, false) => ConstGauge::new(*value).encode(series)?,
            }
        }
        Ok(())
    }
}
