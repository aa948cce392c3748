//! What `aep-cline doctor` says of the OTLP exporter (logs, traces, metrics), from its status
//! (`/healthz` `otlp`).

use crate::doctor::Report;
use serde_json::Value;

pub fn doctor(r: &mut Report, otlp: &Value) {
    if otlp.is_null() {
        return r.info("otlp", "off (AEP_OTLP_ENDPOINT names a collector)");
    }
    leg(r, "otlp", otlp);
    match &otlp["traces"] {
        Value::Null => r.info("otlp traces", "off (AEP_OTLP_TRACES=0)"),
        traces => leg(r, "otlp traces", traces),
    }
    let metrics = &otlp["metrics"];
    let endpoint = metrics["endpoint"].as_str().unwrap_or("?");
    match (
        metrics.is_null(),
        metrics["connected"] == true,
        metrics["last_error"].as_str(),
    ) {
        (true, ..) => r.info("otlp metrics", "off (AEP_OTLP_METRICS=0)"),
        (false, true, _) => r.ok(
            "otlp metrics",
            format!("exporting to {endpoint} every {}s", metrics["interval_seconds"]),
        ),
        (false, false, Some(error)) => r.warn(
            "otlp metrics",
            format!("not exporting to {endpoint}: {error}"),
            "the next export carries the same totals once the collector takes them",
        ),
        (false, false, None) => r.info(
            "otlp metrics",
            format!(
                "nothing exported yet to {endpoint} (every {}s)",
                metrics["interval_seconds"]
            ),
        ),
    }
}

/// One route of the exporter (the logs', the traces'): its own confirmations and refusals.
fn leg(r: &mut Report, name: &'static str, otlp: &Value) {
    let endpoint = otlp["endpoint"].as_str().unwrap_or("?");
    let (confirmed, pending) = (&otlp["confirmed"], &otlp["pending"]);
    let refused = otlp["dropped"]["refused_events"].as_u64().unwrap_or(0);
    let error = otlp["last_error"].as_str();
    match (otlp["connected"] == true, error) {
        (false, Some(error)) => r.fail(
            name,
            format!("not exporting to {endpoint}: {error}; {pending} Events wait (kept, and resent from the logs when it is back)"),
            "check that the collector runs and takes OTLP/HTTP there (its otlp receiver's http endpoint, port 4318)",
        ),
        (false, None) => r.info(name, format!("nothing exported yet to {endpoint}; {pending} Events wait")),
        (true, _) if refused > 0 => r.warn(
            name,
            format!(
                "exporting to {endpoint} ({confirmed} Events confirmed), but the collector refused {refused} Events for good: {}",
                error.unwrap_or("?")
            ),
            "fix what the collector names (credentials in AEP_OTLP_HEADERS, the endpoint's path, its size limit); \
             refused batches are not resent",
        ),
        (true, _) => r.ok(
            name,
            format!("exporting to {endpoint}: {confirmed} Events confirmed, {pending} pending"),
        ),
    }
}
