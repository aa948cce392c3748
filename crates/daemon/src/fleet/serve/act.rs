//! The console's buttons (`POST /api/act`): a command built as `aep-cline fleet approve` builds
//! it, checked against the console's view (the approval still pending and answerable, the
//! session known, its machine reachable), sent to the owning host's control subject, and
//! answered with that daemon's ack; each step that can keep it from being decided says so in
//! words, apart, so the route reads as its steps.

use super::Console;
use crate::fleet::command::{self, Sent};
use crate::fleet::effect::Watch;
use crate::fleet::health::{self, Status};
use crate::fleet::View;
use crate::http::error::{error, Rejection};
use crate::person::{self, Action};
use aep_core::types::CONTROL_ACCEPTED;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::SystemTime;

#[derive(Deserialize)]
struct ActBody {
    host: String,
    session: String,
    #[serde(flatten)]
    action: Action,
}

/// A button: the command is built as `aep-cline fleet approve` builds it, sent to the owning
/// host's control subject, and answered with that daemon's ack (200, accepted or rejected);
/// what kept it from being decided is said in words (409 not sendable, 502 nobody or the
/// server's permissions, 504 no ack in time).
pub(super) async fn act_on(State(c): State<Arc<Console>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let ActBody { host, session, action } = match read(&headers, &body) {
        Ok(b) => b,
        Err(refused) => return refused.into_response(),
    };
    let status = {
        let v = c.view.read();
        if let Err(refused) = target(&v, &host, &session, &action) {
            return refused.into_response();
        }
        health::status(v.record(&host), SystemTime::now(), c.offline_after)
    };
    if !status.reachable() {
        return unreachable(&host, status);
    }
    let command = person::command(&action, &session, "aep-cline-fleet", &crate::state::host());
    let id = command["id"].as_str().unwrap_or_default().to_string();
    // A run cancel's effect is read from the stream, followed from before the command is sent.
    let watch = match action {
        Action::Cancel => match Watch::start(&c.client, &c.source.stream, &host, &session).await {
            Ok(watch) => Some(watch),
            Err(e) => return error(StatusCode::BAD_GATEWAY, "not-sent", format!("{e:#}")),
        },
        _ => None,
    };
    let sent = {
        let mut refusals = c.refusals.lock().await;
        command::send(&c.client, &mut refusals, &host, &command, person::ACK_WAIT).await
    };
    let effect = match (&sent, watch) {
        (Ok(Sent::Ack(ack)), Some(watch)) if ack["type"] == CONTROL_ACCEPTED => {
            Some(watch.run_end(person::CANCEL_WAIT).await)
        }
        _ => None,
    };
    answer(sent, &host, &id, effect.map(|e| (e, session)))
}

/// The body, JSON by its `Content-Type` (415 otherwise) and of the button's shape (400).
fn read(headers: &HeaderMap, body: &[u8]) -> Result<ActBody, Rejection> {
    crate::dashboard::guard::json_body(headers)?;
    serde_json::from_slice(body).map_err(|e| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            format!("want {{host, session, action: approve|deny|answer|cancel|send, ...}}: {e}"),
        )
    })
}

/// What the command is about, in the console's view: an answer's approval still pending and
/// answerable there, any other command's session known (409 otherwise).
fn target(v: &View, host: &str, session: &str, action: &Action) -> Result<(), Rejection> {
    let request = match action {
        Action::Approve { request, .. } | Action::Deny { request, .. } | Action::Answer { request, .. } => {
            Some(request.as_str())
        }
        _ => None,
    };
    let Some(request) = request else {
        if v.has_session(host, session) {
            return Ok(());
        }
        return Err(Rejection::new(
            StatusCode::CONFLICT,
            "no-session",
            format!("no session {session} on {host}"),
        ));
    };
    let found = v
        .approvals()
        .into_iter()
        .find(|a| a.host == host && a.pending.session == session && a.pending.id == request);
    match found {
        None => Err(Rejection::new(
            StatusCode::CONFLICT,
            "no-approval",
            format!("no pending approval {request} of session {session} on {host}: it may have been answered"),
        )),
        Some(a) if !a.pending.answerable => Err(Rejection::new(
            StatusCode::CONFLICT,
            "not-answerable",
            format!("this approval can only be answered in Cline on {host}: its daemon has control off"),
        )),
        Some(_) => Ok(()),
    }
}

/// 409: the machine is offline (or stale) in its health record, so nothing is sent.
fn unreachable(host: &str, status: Status) -> Response {
    error(
        StatusCode::CONFLICT,
        "machine-unreachable",
        format!("machine {host} is {}: the command was not sent", status.as_str()),
    )
}

/// The daemon's ack (200), with a run cancel's effect and, when it did nothing, that in words;
/// or why there is no ack: nobody subscribes, the server's permissions, no ack in time, a reply
/// that is no ack.
fn answer(sent: anyhow::Result<Sent>, host: &str, id: &str, effect: Option<(String, String)>) -> Response {
    let sent = match sent {
        Ok(sent) => sent,
        Err(e) => return error(StatusCode::BAD_GATEWAY, "not-sent", format!("{e:#}")),
    };
    let (status, code) = match &sent {
        Sent::Ack(ack) => {
            let mut said = json!({"host": host, "command": id, "ack": ack});
            if let Some((effect, session)) = effect {
                if effect == person::NO_EFFECT {
                    said["detail"] = json!(format!(
                        "{} (on {host})",
                        person::nothing_happened(&session, person::CANCEL_WAIT)
                    ));
                }
                said["effect"] = json!(effect);
            }
            return Json(said).into_response();
        }
        Sent::NoResponders => (StatusCode::BAD_GATEWAY, "no-responders"),
        Sent::Refused(_) => (StatusCode::BAD_GATEWAY, "not-permitted"),
        Sent::TimedOut => (StatusCode::GATEWAY_TIMEOUT, "no-ack"),
        Sent::BadReply(_) => (StatusCode::BAD_GATEWAY, "bad-reply"),
    };
    let detail = sent.why_not(host, person::ACK_WAIT).unwrap_or_default();
    error(status, code, detail)
}
