//! `POST /hook`: the shim's door. The body is one Cline hook payload, the bearer is the
//! discovery file's token, and [`crate::DELIVERY_HEADER`] names the firing. The hook is mapped
//! and appended (on a blocking thread) before it is answered.

use super::auth::authorized;
use super::error::error;
use super::AppState;
use crate::lane::{IngestError, Ingested};
use crate::DELIVERY_HEADER;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

pub async fn hook(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
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
