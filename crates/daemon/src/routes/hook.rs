//! `POST /hook`: the shim's door. The body is one Cline hook payload, the bearer is the
//! discovery file's token, and the firing headers ([`crate::firing`]) name it. The hook is mapped
//! and appended (on a blocking thread) before it is answered, in firing order: its session's
//! spooled firings go first (other sessions' never hold it up), and a request that arrives
//! after its shim gave up goes through the spool itself.
//! Every answer carries the proof that this daemon holds the discovery token.

use super::AppState;
use crate::firing::{
    self, Firing, CLINE_DATA_HEADER, CONTROL_HEADER, DELIVERY_HEADER, FIRED_HEADER, PARENT_HEADER, PROOF_HEADER,
};
use crate::guard::Guard;
use crate::http::auth::authorized;
use crate::http::error::error;
use crate::lane::spool::Spooled;
use crate::lane::{IngestError, Ingested};
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Adds [`PROOF_HEADER`] to every answer of the hook door, refusals included (a 413 from the
/// body limit too), so the shim can tell this daemon from whatever else holds the port.
pub async fn prove(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let delivery = header(request.headers(), DELIVERY_HEADER).map(str::to_string);
    let mut response = next.run(request).await;
    if let Some(delivery) = delivery {
        if let Ok(proof) = HeaderValue::from_str(&firing::proof(&state.token, &delivery)) {
            response.headers_mut().insert(PROOF_HEADER, proof);
        }
    }
    response
}

pub async fn hook(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&headers, &state.token) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token: the shim reads it from the daemon's discovery file",
        );
    }
    let parent = header(&headers, PARENT_HEADER).and_then(firing::parse_parent);
    let firing = Firing {
        delivery: header(&headers, DELIVERY_HEADER).map(str::to_string),
        fired: header(&headers, FIRED_HEADER).and_then(|v| v.parse().ok()),
        parent: parent.map(|(pid, _)| pid),
        parent_started: parent.and_then(|(_, started)| started),
        cline_data: header(&headers, CLINE_DATA_HEADER).and_then(firing::decode_path),
    };
    let (sessions, spool) = (state.sessions.clone(), state.spool.clone());
    let body_head = body.slice(..body.len().min(512));
    // With a policy or budgets set, the hooks Cline waits on are decided as they are recorded.
    let hub = crate::guard::Hub {
        tapped: state.hub.is_some(),
        answers: state.hub.as_ref().is_some_and(|h| h.control()),
    };
    let guard = Guard::new(
        state.policy.clone(),
        state.budget.clone(),
        hub,
        state.sessions.capture().clone(),
    );
    let outcome = tokio::task::spawn_blocking(move || {
        if firing.abandoned(firing::now_ns()) {
            // Its shim has spooled it (or is about to): order it with the spool, by firing time.
            let entry = Spooled::new(firing.clone(), &body);
            return spool
                .put(&entry, &sessions)
                .map(|()| None)
                .map_err(|e| IngestError::Spool(format!("cannot spool a late hook: {e}; check AEP_CLINE_STATE_DIR")));
        }
        // After its session's spooled firings, and only theirs (the spool's index says which).
        spool.live(&body, &sessions, || {
            if guard.is_on() {
                let judge = |p: &cline_hooks::HookPayload,
                             t: &cline_hooks::SessionTracker,
                             store: Option<&cline_usage::Session>| {
                    let asks = p.session_key().is_some_and(|s| sessions.asks_on_hub(s));
                    guard.judge(p, t, asks, store)
                };
                let judging = crate::lane::Judging {
                    judge: &judge,
                    reads_store: guard.counts_from_store(),
                };
                sessions.ingest_hook_judged(&body, &firing, judging).map(Some)
            } else {
                sessions.ingest_hook(&body, &firing).map(Some)
            }
        })
    })
    .await;
    match outcome {
        Ok(Ok(Some(Ingested::Appended {
            session,
            events,
            control,
        }))) => {
            if control.as_ref().is_some_and(|c| c["cancel"] == true) && firing::is_legacy(&body_head) {
                // Cline 2.18 waits at resume_task forever after a cancel: its CLI is ended.
                if let Some(cli) = parent.and_then(|(pid, started)| crate::lane::parent::Parent::new(pid, started)) {
                    crate::guard::task_end::end(cli);
                }
            }
            answered(json!({"ok": true, "session": session, "events": events.len()}), control)
        }
        Ok(Ok(Some(Ingested::Duplicate { session, control }))) => answered(
            json!({"ok": true, "session": session, "events": 0, "duplicate": true}),
            control,
        ),
        Ok(Ok(None)) => (StatusCode::OK, Json(json!({"ok": true, "spooled": true}))).into_response(),
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

/// A recorded hook's answer; with a guard's control, the control in it (`control`) and
/// [`CONTROL_HEADER`] set, so the shim reads the body only when there is something to print.
fn answered(mut body: serde_json::Value, control: Option<serde_json::Value>) -> Response {
    let Some(control) = control else {
        return (StatusCode::OK, Json(body)).into_response();
    };
    body["control"] = control;
    let mut response = (StatusCode::OK, Json(body)).into_response();
    response
        .headers_mut()
        .insert(CONTROL_HEADER, HeaderValue::from_static("1"));
    response
}
