//! `POST /events` (AEP-0003 §3.2): the endpoint as a collector. One Event as
//! `application/json`, or a batch as `application/x-ndjson` (order kept). A batch is checked
//! whole before anything is admitted: one bad line refuses the batch, naming the first bad
//! index, so a retry of the fixed batch never half-duplicates.
//!
//! Commands are refused here: control flows only on the authenticated WebSocket binding
//! (AEP-0004 §4.1). An Event longer than `AEP_MAX_EVENT` refuses its request (413). At most
//! [`INGESTS`] bodies are read at once, so a flood of large posts cannot hold more than that
//! many bodies in memory; the others wait their turn (or get 503 after [`INGEST_WAIT`]).

use super::{one_line, Endpoint};
use crate::http::error::Rejection;
use crate::lane::Published;
use aep_core::types::ATTENTION_ROUTED;
use aep_core::{EventType, Scope, AEP_VERSION};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;

/// Request bodies read and parsed at once.
pub const INGESTS: usize = 2;
/// How long a request waits for its turn.
const INGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn reject(status: StatusCode, error: &str, detail: impl std::fmt::Display) -> Rejection {
    Rejection::new(status, error, detail)
}

pub async fn post(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap, body: Body) -> Response {
    // §3.2.2: the version header is required; anything else gets 426 and what we speak.
    if headers.get("aep-version").and_then(|v| v.to_str().ok()) != Some(AEP_VERSION) {
        return (StatusCode::UPGRADE_REQUIRED, Json(json!({"versions": [AEP_VERSION]}))).into_response();
    }
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let ndjson = match media.as_str() {
        "application/json" => false,
        "application/x-ndjson" => true,
        other => {
            return reject(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                format!(
                    "Content-Type {other:?}: send one Event as application/json or a batch as application/x-ndjson"
                ),
            )
            .into_response()
        }
    };
    let Ok(Ok(_turn)) = tokio::time::timeout(INGEST_WAIT, endpoint.ingests.acquire()).await else {
        return reject(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "the collector is reading other large posts: retry with the same Events (ids make it safe)",
        )
        .into_response();
    };
    let max_body = endpoint.settings.max_body;
    let bytes = match axum::body::to_bytes(body, max_body).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                format!("the body is over {max_body} bytes (AEP_MAX_BODY): split the batch"),
            )
            .with("max_bytes", max_body)
            .into_response()
        }
    };
    let (max_batch, max_event) = (endpoint.settings.max_batch, endpoint.settings.max_event);
    let parsed = tokio::task::spawn_blocking(move || parse(&bytes, ndjson, max_batch, max_event)).await;
    let events = match parsed {
        Ok(Ok(events)) => events,
        Ok(Err(rejection)) => return rejection.into_response(),
        Err(e) => return reject(StatusCode::INTERNAL_SERVER_ERROR, "internal", e).into_response(),
    };
    let total = events.len();
    let held = events
        .into_iter()
        .filter(|e| endpoint.feed.admit(e.clone(), false))
        .count();
    (
        StatusCode::ACCEPTED,
        Json(json!({"accepted": total, "duplicates": total - held})),
    )
        .into_response()
}

/// Parses and checks a body: every Event valid (AEP-0001 §5, AEP-0002 §5), none a command,
/// none longer than `max_event` bytes.
pub fn parse(body: &[u8], ndjson: bool, max_batch: usize, max_event: usize) -> Result<Vec<Arc<Published>>, Rejection> {
    let lines: Vec<&[u8]> = if ndjson {
        body.split(|b| *b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .collect()
    } else {
        vec![body]
    };
    if lines.len() > max_batch {
        return Err(reject(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-many-events",
            format!(
                "{} Events in one batch; at most {max_batch} (AEP_MAX_BATCH): split the batch",
                lines.len()
            ),
        )
        .with("max", max_batch));
    }
    let at =
        |line: usize, error: &str, detail: String| reject(StatusCode::BAD_REQUEST, error, detail).with("line", line);
    let mut events = Vec::with_capacity(lines.len());
    for (i, raw) in lines.into_iter().enumerate() {
        if raw.trim_ascii().len() > max_event {
            return Err(reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "event-too-large",
                format!(
                    "Event {i} is {} bytes; this collector takes Events up to {max_event} bytes (AEP_MAX_EVENT)",
                    raw.trim_ascii().len()
                ),
            )
            .with("line", i)
            .with("max_bytes", max_event));
        }
        let value: Value = serde_json::from_slice(raw).map_err(|e| {
            at(
                i,
                "invalid-json",
                format!("not JSON ({e}); send one Event object per line"),
            )
        })?;
        if !value.is_object() {
            return Err(at(
                i,
                "invalid-event",
                "an Event is a JSON object (a batch goes as application/x-ndjson, one Event per line)".into(),
            ));
        }
        aep_core::validate::validate_event(&value).map_err(|v| at(i, "invalid-event", v.to_string()))?;
        let ty = value["type"].as_str().unwrap_or_default();
        if EventType::parse(ty).is_ok_and(|t| t.scope() == Scope::ForeignEmitter) && ty != ATTENTION_ROUTED {
            return Err(reject(
                StatusCode::FORBIDDEN,
                "control-needs-socket",
                format!("{ty} is a command: commands flow only on the authenticated WebSocket binding (AEP-0004 §4.1); send it on /socket"),
            )
            .with("line", i));
        }
        let line = one_line(&String::from_utf8_lossy(raw), &value);
        events.push(Arc::new(Published { value, line }));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, seq: u64) -> String {
        json!({"aep": "0.1", "id": id, "type": "session.started", "time": "2026-01-01T00:00:00Z",
               "source": "aep://h/agent/a/session/s", "agent": "a", "session": "s", "seq": seq})
        .to_string()
    }

    #[test]
    fn a_batch_is_refused_whole_at_its_first_bad_line() {
        let body = format!(
            "{}\n\n{}\r\n{{\"aep\":\"0.1\"}}\nnot json\n",
            event("a", 0),
            event("b", 1)
        );
        let r = parse(body.as_bytes(), true, 10, 1000).unwrap_err();
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            (r.body["error"].as_str(), r.body["line"].as_u64()),
            (Some("invalid-event"), Some(2))
        );
        let ok = parse(
            format!("{}\n{}\r\n", event("a", 0), event("b", 1)).as_bytes(),
            true,
            10,
            1000,
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(
            ok[1].line,
            event("b", 1),
            "the line is kept byte for byte, without its CR"
        );
        let r = parse(b"not json", false, 10, 1000).unwrap_err();
        assert_eq!(r.body["error"], "invalid-json");
        assert_eq!(
            parse(b"[]", false, 10, 1000).unwrap_err().body["error"],
            "invalid-event"
        );
        let r = parse(
            format!("{}\n{}\n", event("a", 0), event("b", 1)).as_bytes(),
            true,
            1,
            1000,
        )
        .unwrap_err();
        assert_eq!(
            (r.status, r.body["error"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("too-many-events"))
        );
        let short = event("a", 0).len();
        let r = parse(
            format!("{}\n{}\n", event("a", 0), event("bb", 1)).as_bytes(),
            true,
            10,
            short,
        )
        .unwrap_err();
        assert_eq!(
            (r.status, r.body["error"].as_str(), r.body["line"].as_u64()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("event-too-large"), Some(1))
        );
    }

    #[test]
    fn pretty_json_is_forwarded_on_one_line_and_commands_are_refused() {
        let pretty = serde_json::to_string_pretty(&serde_json::from_str::<Value>(&event("a", 0)).unwrap()).unwrap();
        let ok = parse(pretty.as_bytes(), false, 10, 1000).unwrap();
        assert!(!ok[0].line.contains('\n'));
        let command = json!({"aep": "0.1", "id": "c", "type": "control.pause", "time": "2026-01-01T00:00:00Z",
                             "source": "aep://h/agent/x", "agent": "x", "session": "s", "data": {}});
        let r = parse(command.to_string().as_bytes(), false, 10, 1000).unwrap_err();
        assert_eq!(r.status, StatusCode::FORBIDDEN);
    }
}
