//! `POST /control`: one AEP command Event (AEP-0004) over plain HTTP, for tools and tests on
//! this machine. It is authenticated like the shim, with the token in the daemon's owner-only
//! discovery file, and goes to the command intake like a command from any other transport.
//!
//! The response says whether the command was taken, not how it was decided: the ack is an
//! Event, appended to the session's log and published (AEP-0004 §3), as for every transport.
//! `202 {"ok": true}` taken (or a redelivery); `400 invalid-command`; `404 no-route` (a session
//! this daemon does not emit); `401`; `500 log-write-failed`.
//!
//! `?wait=MS` (what `aep-cline approve` and the other terminal commands use) waits up to MS
//! (at most 30 000) for the ack Event and, once accepted, briefly for the outcome, and answers
//! `200 {"command", "ack", "outcome"}` (`ack`/`outcome` null when they did not come in time),
//! with `detail`, the daemon's words, for a refusal whose logged ack keeps none (capture).

use super::AppState;
use crate::http::auth::authorized;
use crate::http::error::{error, refused};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

pub async fn control(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&headers, &state.token) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token: use the token in the daemon's discovery file (~/.aep/cline/daemon.json)",
        );
    }
    let command: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid-command",
                format!("the body is not JSON: {e}"),
            )
        }
    };
    let wait = match crate::person::wait_query(query.as_deref()) {
        Ok(wait) => wait,
        Err(detail) => return error(StatusCode::BAD_REQUEST, "invalid-query", detail),
    };
    if let Some(wait) = wait {
        let waited = crate::person::submit_and_wait(
            &state.sessions,
            &state.intake,
            command,
            wait,
            crate::person::OUTCOME_WAIT,
        )
        .await;
        return match waited {
            Ok(waited) => (StatusCode::OK, Json(json!(waited))).into_response(),
            Err(e) => refused(e),
        };
    }
    let intake = state.intake.clone();
    match tokio::task::spawn_blocking(move || intake.submit_local(&command)).await {
        Ok(Ok(())) => (StatusCode::ACCEPTED, Json(json!({"ok": true}))).into_response(),
        Ok(Err(e)) => refused(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
    }
}
