//! `POST /hook`: the shim's door. The body is one Cline hook payload, the bearer is the
//! discovery file's token, and the firing headers ([`crate::firing`]) name it. The hook is mapped
//! and appended (on a blocking thread) before it is answered, in firing order: its session's
//! spooled firings go first (other sessions' never hold it up), and a request that arrives
//! after its shim gave up goes through the spool itself.
//! Every answer carries the proof that this daemon holds the discovery token.

use super::AppState;
use crate::firing::{
    self, Firing, CLINE_DATA_HEADER, CONTROL_HEADER, DELIVERY_HEADER, FIRED_HEADER, PARENT_HEADER, PROOF_HEADER,
    WAIT_HEADER, WAIT_MS_HEADER,
};
use crate::guard::Guard;
use crate::http::auth::authorized;
use crate::http::error::error;
use crate::lane::spool::Spooled;
use crate::lane::{IngestError, Ingested};
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
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
            asks,
        }))) => {
            let legacy = firing::is_legacy(&body_head);
            if control.as_ref().is_some_and(|c| c["cancel"] == true) && legacy {
                end_legacy_task(parent);
            }
            if let Some(request) = &asks {
                hold(&state, &session, request, &events);
            }
            let mut response = answered(json!({"ok": true, "session": session, "events": events.len()}), control);
            waits(&state, &mut response, asks.as_deref());
            response
        }
        Ok(Ok(Some(Ingested::Duplicate { session, control, asks }))) => {
            let mut response = answered(
                json!({"ok": true, "session": session, "events": 0, "duplicate": true}),
                control,
            );
            waits(&state, &mut response, asks.as_deref());
            response
        }
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

/// Cline 2.18 waits at `resume_task` forever after a cancel: the CLI that ran the hook is ended.
fn end_legacy_task(parent: Option<(u32, Option<u64>)>) {
    if let Some(cli) = parent.and_then(|(pid, started)| crate::lane::parent::Parent::new(pid, started)) {
        crate::guard::task_end::end(cli);
    }
}

/// A call held while a person answers (an `ask` rule): its expiry set (the rule's
/// `on_timeout` answers when nobody did), and the person told as for a hub approval.
fn hold(state: &AppState, session: &str, request: &str, events: &[std::sync::Arc<crate::lane::Published>]) {
    let Some(ask) = state.sessions.asks().get(request) else {
        return;
    };
    let (intake, id, after) = (state.intake.clone(), request.to_string(), ask.after);
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let expired = tokio::task::spawn_blocking(move || intake.expire_held(&id)).await;
        if let Err(e) = expired {
            tracing::error!(error = %e, "a held call's expiry failed");
        }
    });
    if let Some(notify) = &state.notify {
        let requested = events.iter().find(|e| e.value["id"] == request);
        let since = requested
            .and_then(|e| e.value["time"].as_str())
            .unwrap_or_default()
            .to_string();
        let on_timeout = match ask.on_timeout {
            crate::lane::asks::OnTimeout::Approve => crate::policy::Answer::Approve,
            crate::lane::asks::OnTimeout::Deny => crate::policy::Answer::Deny,
        };
        notify.approval(crate::notify::Waiting {
            session: session.to_string(),
            request: request.to_string(),
            tool: Some(ask.tool.clone()),
            input_json: Some(ask.input.clone()),
            since,
            timeout: Some((
                crate::policy::rules::Timeout {
                    after: ask.after,
                    answer: on_timeout,
                },
                ask.rule.clone(),
            )),
        });
    }
}

/// Tells the shim to wait on held request `asks`, for at most how long.
fn waits(state: &AppState, response: &mut Response, asks: Option<&str>) {
    let Some(request) = asks else { return };
    // A copy of the firing asking after the call was settled waits on nothing: it reads the
    // settled answer at once.
    let ms = state
        .sessions
        .asks()
        .get(request)
        .map_or(0, |a| a.after.as_millis() as u64)
        + WAIT_SLACK_MS;
    let headers = response.headers_mut();
    if let (Ok(id), Ok(ms)) = (HeaderValue::from_str(request), HeaderValue::from_str(&ms.to_string())) {
        headers.insert(WAIT_HEADER, id);
        headers.insert(WAIT_MS_HEADER, ms);
    }
}

/// What the shim waits beyond a held call's expiry (the expiry's own write, a loaded machine).
const WAIT_SLACK_MS: u64 = 3000;

/// `GET /hook/wait/<request>`: the shim of a held call waits here for its answer, then prints
/// it. 404 when no call is held for it (the daemon restarted meanwhile): the shim then follows
/// `AEP_CLINE_ENFORCE`. A 2.x call denied here has its CLI ended, as at the hook.
pub async fn wait(State(state): State<AppState>, headers: HeaderMap, Path(request): Path<String>) -> Response {
    if !authorized(&headers, &state.token) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token",
        );
    }
    let within = header(&headers, WAIT_MS_HEADER)
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(std::time::Duration::from_secs(120), std::time::Duration::from_millis)
        .min(std::time::Duration::from_secs(600));
    let held = state.sessions.asks().get(&request);
    match state.sessions.asks().wait(&request, within).await {
        Some(crate::lane::asks::Outcome::Go) => answered(json!({"ok": true, "answered": "approve"}), None),
        Some(crate::lane::asks::Outcome::Stop(control)) => {
            if held.is_some_and(|a| a.legacy) && control["cancel"] == true {
                let parent = header(&headers, PARENT_HEADER).and_then(firing::parse_parent);
                end_legacy_task(parent);
            }
            answered(json!({"ok": true, "answered": "deny"}), Some(control))
        }
        None => error(
            StatusCode::NOT_FOUND,
            "not-held",
            format!("no call is held for request {request}: it was never held here, or the daemon restarted"),
        ),
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
