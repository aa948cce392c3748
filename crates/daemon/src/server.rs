//! The daemon's HTTP surface on its loopback listener: `POST /hook` (the shim's door),
//! `GET /healthz`, and the embedded AEP endpoint's routes (`endpoint/`).

use crate::endpoint::{self, Endpoint};
use crate::relay::Relay;
use crate::sessions::{IngestError, Ingested, Sessions};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Header carrying the shim's id for one hook firing (see `sessions::DELIVERY_EXTENSION`).
pub const DELIVERY_HEADER: &str = "x-aep-cline-delivery";

#[derive(Clone)]
pub struct AppState {
    pub sessions: Arc<Sessions>,
    pub token: Arc<str>,
    pub started: Instant,
    /// The embedded AEP endpoint, unless `AEP_ENDPOINT=0`.
    pub endpoint: Option<Arc<Endpoint>>,
    /// The relay binding, when `AEP_RELAY_URL` is set.
    pub relay: Option<Arc<Relay>>,
}

pub fn router(state: AppState, max_body: usize) -> Router {
    let endpoint = state.endpoint.clone();
    let daemon = Router::new()
        .route("/hook", post(hook))
        .route("/healthz", get(healthz))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state);
    match endpoint {
        Some(endpoint) => daemon.merge(endpoint::routes(endpoint)),
        None => daemon,
    }
}

fn error(status: StatusCode, code: &str, detail: impl std::fmt::Display) -> Response {
    (status, Json(json!({"error": code, "detail": detail.to_string()}))).into_response()
}

/// The discovery-file token, compared without stopping at the first differing byte.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    endpoint::bearer(headers).is_some_and(|given| endpoint::same_token(given, token))
}

async fn hook(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&headers, &state.token) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token: the shim reads it from the daemon's discovery file",
        );
    }
    let delivery = headers
        .get(DELIVERY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let sessions = state.sessions.clone();
    let outcome = tokio::task::spawn_blocking(move || sessions.ingest_hook(&body, delivery.as_deref())).await;
    match outcome {
        Ok(Ok(Ingested::Appended { session, events })) => (
            StatusCode::OK,
            Json(json!({"ok": true, "session": session, "events": events.len()})),
        )
            .into_response(),
        Ok(Ok(Ingested::Duplicate { session })) => (
            StatusCode::OK,
            Json(json!({"ok": true, "session": session, "events": 0, "duplicate": true})),
        )
            .into_response(),
        Ok(Err(IngestError::Payload(e))) => {
            tracing::warn!(error = %e, "hook refused");
            error(StatusCode::BAD_REQUEST, "invalid-hook", e)
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "hook not recorded");
            error(StatusCode::INTERNAL_SERVER_ERROR, "log-write-failed", e)
        }
        Err(e) => {
            tracing::error!(error = %e, "hook ingest task failed");
            error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e)
        }
    }
}

async fn healthz(State(state): State<AppState>) -> Response {
    Json(json!({
        "ok": true,
        "version": env!("CARGO_PKG_VERSION"),
        "sessions": state.sessions.live_count(),
        "uptime_s": state.started.elapsed().as_secs(),
        "relay": state.relay.as_ref().map(|r| r.status()),
    }))
    .into_response()
}
