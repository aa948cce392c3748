//! What the hub's events and replies do to a session's lane. Synchronous and small: each call
//! takes one session's lock once (through [`Sessions::append_in`]), plans with the pure
//! `cline-hub` table and mapping, and appends.
//!
//! Lock order: the intake's record lock, then a session's lock, never the reverse. So an ack
//! is settled (record lock, then session lock) before a reply's outcomes are appended (session
//! lock alone), and nothing here calls the intake while holding a session's lock.

use crate::control::intake::withdraw;
use crate::control::{Intake, Kind, Request};
use crate::lane::reconcile::StoreSession;
use crate::lane::{Lane, Sessions};
use crate::notify::Waiting;
use crate::person::{self, Action};
use crate::policy::rules::Timeout;
use crate::policy::{self, Answer, Asked, PolicyFile};
use aep_core::types::{RUN_CANCELLED, SESSION_ENDED};
use cline_hooks::Planned;
use cline_hub::ack::{self, HubOutcome};
use cline_hub::frame::{ApprovalRequested, ApprovalResolved, HubError, HubEvent};
use cline_hub::{attention, control, AttentionContext};

use crate::lane::sessions::now_ms;

fn context<'a>(sessions: &'a Sessions, control: bool) -> AttentionContext<'a> {
    AttentionContext {
        capture: sessions.capture(),
        redactor: sessions.redactor(),
        control,
    }
}

fn append(sessions: &Sessions, session: &str, plan: impl FnOnce(Lane<'_>) -> Vec<Planned>) {
    if let Err(e) = sessions.append_in(session, plan) {
        tracing::error!(%session, error = %e, "hub tap: events not recorded");
    }
}

/// `approval.requested` → `attention.requested` on the session the hooks own (the hub
/// `sessionId` is the hooks' `sessionContext.rootSessionId`), in the agent's open run, caused
/// by the tool call it gates. With a policy (`AEP_CLINE_POLICY`) the request is decided as it
/// is mirrored (the rule is named on it), and an approve or deny is then submitted to the
/// intake as a person's answer would be. Returns the approval that waits for a person (for
/// notifications): `None` when a rule answered it, or when nothing new was mirrored (the hub
/// re-sends what is pending at each subscribe).
pub fn approval_requested(
    sessions: &Sessions,
    intake: &Intake,
    event: &HubEvent,
    control: bool,
    policy: Option<&policy::Active>,
) -> Option<Waiting> {
    let approval: ApprovalRequested = match event.payload_as() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "hub tap: approval.requested ignored");
            return None;
        }
    };
    let session = approval.session_id.clone();
    let ctx = context(sessions, control);
    // What it asks, for the owner's local view (never an Event): made off the session's lock.
    let detail = sessions
        .local()
        .is_on()
        .then(|| cline_hub::Detail::requested(&approval, sessions.redactor()));
    let file = policy.map(policy::Active::current);
    let mut decided = None;
    let mut later = None;
    let published = sessions.append_in(&session, |lane| {
        let run = approval
            .agent_id
            .as_deref()
            .and_then(|a| lane.tracker.open_run(a))
            .or_else(|| lane.tracker.active_run())
            .map(str::to_string);
        let cause = approval
            .tool_call_id
            .as_deref()
            .and_then(|c| lane.tracker.tool_requested(c))
            .map(str::to_string);
        let mut planned =
            lane.approvals
                .request(&approval, event.timestamp, run, cause, &ctx, &mut aep_core::id::new_id);
        if let Some(detail) = detail {
            // Held before the request is published, so the dashboard's first view of it has
            // it; a request already mirrored (recovered from the log after a restart) too.
            let request = planned.as_ref().map(|p| p.id.as_str());
            if let Some(request) = request.or_else(|| lane.approvals.request_event(&approval.approval_id)) {
                sessions.local().hold(request, &approval.approval_id, detail);
            }
        }
        // Only a request mirrored now is decided: the hub re-sends pending ones at subscribe.
        if let (Some(file), Some(request)) = (&file, planned.as_mut()) {
            let mut asked = Asked::from_text(
                approval.tool_name.as_deref().unwrap_or_default(),
                approval.input_json.as_deref(),
                lane.tracker.workspace(),
                &file.programs,
            )
            .with_home(std::env::var("HOME").ok().as_deref());
            crate::policy::links::resolve(&mut asked);
            (decided, later) = decide(file, &asked, control, &session, request);
        }
        planned.into_iter().collect()
    });
    let requested = match published {
        Ok(published) => published.into_iter().next()?,
        Err(e) => {
            tracing::error!(%session, error = %e, "hub tap: events not recorded");
            return None;
        }
    };
    if let Some((request, rule, answer, reason)) = decided {
        let action = match answer {
            Answer::Approve => Action::Approve { request, reason: None },
            _ => Action::Deny { request, reason },
        };
        let command = person::command(&action, &session, POLICY_AGENT, sessions.host());
        match intake.submit_policy(&command, &rule) {
            Ok(_) => return None,
            Err(e) => {
                tracing::error!(%session, rule, error = %e, "policy: the answer could not be submitted; a person answers")
            }
        }
    }
    Some(Waiting {
        session,
        request: requested.value["id"].as_str()?.to_string(),
        tool: approval.tool_name,
        input_json: approval.input_json,
        since: requested.value["time"].as_str().unwrap_or_default().to_string(),
        timeout: later,
    })
}

/// The rule name a file's default timeout is audited under.
pub const DEFAULT_TIMEOUT_RULE: &str = "timeout";

/// Nobody answered `request` in time: the policy's `on_timeout` answer is submitted as a rule's
/// would be, with words that say so. A request answered meanwhile is refused by the intake
/// (it no longer waits), which is the point: the person's answer stands.
pub fn timed_out(intake: &Intake, sessions: &Sessions, session: &str, request: &str, timeout: Timeout, rule: &str) {
    let minutes = timeout.after.as_secs().div_ceil(60);
    let reason = format!(
        "aep-cline: nobody answered within {minutes} min; policy rule {rule:?} answers {}",
        timeout.answer
    );
    let action = match timeout.answer {
        Answer::Approve => Action::Approve {
            request: request.to_string(),
            reason: Some(reason.clone()),
        },
        _ => Action::Deny {
            request: request.to_string(),
            reason: Some(reason.clone()),
        },
    };
    let mut open = false;
    let looked = sessions.append_in(session, |lane| {
        open = lane.approvals.unanswered(request);
        Vec::new()
    });
    if looked.is_err() || !open {
        tracing::info!(%session, %request, rule, "policy: timeout not applied (answered meanwhile, or gone)");
        return;
    }
    let command = person::command(&action, session, POLICY_AGENT, sessions.host());
    match intake.submit_policy(&command, rule) {
        Ok(()) => tracing::info!(%session, %request, rule, answer = %timeout.answer, "policy: answered on timeout"),
        Err(e) => {
            tracing::info!(%session, %request, rule, error = %e, "policy: timeout not applied (answered meanwhile, or gone)")
        }
    }
}

/// The agent name the policy's commands are sent as.
const POLICY_AGENT: &str = "aep-cline-policy";

/// Decides `request` by `file`, logs the decision and names the rule on the request. First:
/// `Some` (request id, rule, answer, reason) when the policy answers it itself; second: the
/// timeout and its rule when a person has until then (marked on the request as `expires_at`).
fn decide(
    file: &PolicyFile,
    asked: &Asked,
    control: bool,
    session: &str,
    request: &mut Planned,
) -> (Decided, Option<(Timeout, String)>) {
    let decision = file.decide(asked);
    let later = file.timeout_for(&decision).filter(|_| control).map(|t| {
        let rule = decision.rule.map_or(DEFAULT_TIMEOUT_RULE, |r| r.name.as_str()).to_string();
        let at = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(t.after.as_secs() as i64))
            .unwrap_or(jiff::Timestamp::MAX);
        attention::expires(
            &mut request.event,
            &aep_core::time::seconds(at),
            t.after.as_secs(),
            t.answer.as_str(),
            &rule,
        );
        tracing::info!(%session, request = %request.id, rule, answer = %t.answer, after_s = t.after.as_secs(), "policy: a person has until the timeout");
        (t, rule)
    });
    let Some(rule) = decision.rule else {
        tracing::info!(%session, request = %request.id, tool = %asked.tool, "policy: no rule matched; a person answers");
        return (None, later);
    };
    let answer = rule.answer;
    if answer != Answer::Ask && !control {
        tracing::warn!(%session, request = %request.id, tool = %asked.tool, rule = %rule.name, %answer,
            "policy: not applied: answering needs the hub control gate (AEP_CLINE_HUB_CONTROL=1); a person answers");
        return (None, later);
    }
    tracing::info!(%session, request = %request.id, tool = %asked.tool, rule = %rule.name, %answer, "policy: decided");
    // Why quotes the command: content, never in the daemon's log above debug.
    tracing::debug!(%session, request = %request.id, why = %decision.why, "policy: why");
    attention::by_policy(&mut request.event, &rule.name, Some(answer.as_str()));
    let decided = (answer != Answer::Ask).then(|| (request.id.clone(), rule.name.clone(), answer, rule.reason.clone()));
    (decided, later)
}

/// The policy's own answer: (request id, rule, answer, reason).
type Decided = Option<(String, String, Answer, Option<String>)>;

/// `approval.resolved` → the answer and the resolution (or nothing yet, while our own answer's
/// reply is outstanding).
pub fn approval_resolved(sessions: &Sessions, session: &str, event: &HubEvent) {
    let resolved: ApprovalResolved = match event.payload_as() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "hub tap: approval.resolved ignored");
            return;
        }
    };
    sessions.local().resolved(&resolved.approval_id);
    let ctx = context(sessions, false);
    append(sessions, session, |lane| {
        lane.approvals
            .resolved(&resolved, event.timestamp, &ctx, &mut aep_core::id::new_id)
    });
}

/// The hub's `run.aborted`: closes the run a control cancel asked for, if the hooks have not
/// reported its end first. Aborts nobody asked us for are the hooks' to report.
pub fn run_aborted(sessions: &Sessions, session: &str) {
    if !sessions.owns(session) {
        return;
    }
    let event = control::run_cancelled_by_control(sessions.capture().ceiling(RUN_CANCELLED));
    append(sessions, session, |lane| {
        let closed = lane.tracker.close_cancelled(&event, &mut aep_core::id::new_id);
        // On Cline 3.0.65 either lane may come first; `closed = 0`: the hooks already did.
        tracing::debug!(%session, closed = closed.len(), "hub tap: run.aborted");
        closed
    });
}

/// The hub answered a command: settle its ack (unless the guard did), then the outcome. An
/// answer's outcomes (`attention.answered`, `attention.resolved`) go in the ack's own write, so
/// no hook's effect (the denied tool's `tool.failed`) lands between the answer and them. When
/// that effect reached the lane first, it wrote the answer ahead of itself
/// (`cline_hub::answers_before_effects`): the reply then records that ack and writes nothing.
///
/// Returns what to send the hub next: a cancel the hub took denies the run's approvals still
/// waiting (the hub's abort does not always end the wait; the run must not go on waiting).
pub fn replied(sessions: &Sessions, intake: &Intake, request: &Request, result: Result<(), &HubError>) -> Vec<Request> {
    let ok = result.is_ok();
    let decided = ack::decide(HubOutcome::Replied(result));
    if let Kind::Respond { approval_id } = &request.kind {
        let ctx = context(sessions, false);
        intake.settle_with(&request.key, &request.session, &request.command_id, decided, |lane| {
            lane.approvals.replied(approval_id, ok, &ctx, &mut aep_core::id::new_id)
        });
        return Vec::new();
    }
    intake.settle(&request.key, &request.session, &request.command_id, decided);
    match &request.kind {
        Kind::Respond { .. } => {}
        Kind::Cancel { run } if !ok => {
            append(sessions, &request.session, |lane| {
                lane.tracker.forget_cancel(run);
                Vec::new()
            });
        }
        Kind::Cancel { run } => return deny_waiting(sessions, request, run),
        Kind::SendInput { delivery } if ok => {
            let event = control::input_sent(*delivery, sessions.capture().ceiling("x.cline.input.sent"));
            append(sessions, &request.session, |_| {
                vec![Planned {
                    id: aep_core::id::new_id(),
                    run: None,
                    cause: Some(request.command_id.clone()),
                    agent: None,
                    event,
                }]
            });
        }
        Kind::SendInput { .. } => {}
    }
    Vec::new()
}

/// The denies a cancel of `run` the hub took sends for the run's approvals nobody answers,
/// each marked in the lane as that command's answer (its reason: the cancel's).
fn deny_waiting(sessions: &Sessions, cancel: &Request, run: &str) -> Vec<Request> {
    let reason = cancel.hub.payload["reason"]
        .as_str()
        .unwrap_or("aep-cline: the run was cancelled")
        .to_string();
    let mut ids = Vec::new();
    append(sessions, &cancel.session, |lane| {
        ids = lane.approvals.deny_for_cancel(run, &cancel.command_id, &reason);
        Vec::new()
    });
    let answer = attention::Answer {
        option: attention::DENY,
        text: Some(reason),
    };
    ids.into_iter()
        .map(|approval_id| {
            tracing::info!(session = %cancel.session, command = %cancel.command_id, approval = %approval_id,
                "a cancelled run's approval still waits: denied, so the run does not wait on it");
            Request {
                key: cancel.key.clone(),
                session: cancel.session.clone(),
                command_id: cancel.command_id.clone(),
                hub: control::approval_respond(&cancel.session, &approval_id, &answer),
                kind: Kind::Respond { approval_id },
            }
        })
        .collect()
}

/// A command the hub never answered because the connection is gone: `busy`, unless the guard
/// already accepted it, and the lane forgets what it was waiting for.
pub fn unanswered(sessions: &Sessions, intake: &Intake, request: &Request, why: &str) {
    intake.settle(
        &request.key,
        &request.session,
        &request.command_id,
        ack::decide(HubOutcome::Unreachable(why)),
    );
    withdraw(sessions, request);
}

/// The hub connection is gone: every pending request is dismissed (AEP-0002 §7.2; the hub
/// re-sends the ones still pending when the tap subscribes again, as new requests).
pub fn disconnected(sessions: &Sessions) {
    sessions.hub_connected(false);
    sessions.local().dismissed_all();
    let ctx = context(sessions, false);
    let now = now_ms();
    for session in sessions.live_sessions() {
        append(sessions, &session, |lane| {
            lane.approvals.dismiss_all(now, &ctx, &mut aep_core::id::new_id)
        });
    }
}

/// A hub frame naming a session tells the lane the hub hosts it (so its `session_shutdown`
/// closes runs, not the session); a `session.updated` whose snapshot says the session ended
/// (`endedAt`, `exitCode`, a final status), or a session-removal event, ends it.
pub fn session_news(sessions: &Sessions, session: &str, event: &HubEvent) {
    sessions.hosted_by_hub(session);
    if let Some(asks) = hub_asks(event) {
        tracing::debug!(%session, asks, "hub tap: whether the session's tools wait on the hub's approval");
        sessions.hub_asks(session, asks);
    }
    if !session_is_over(event) {
        return;
    }
    match sessions.hub_ended(session, ended_at(event), &StoreSession::of_hub(&event.payload)) {
        Ok(true) => tracing::info!(%session, "hub tap: the hub ended this session"),
        Ok(false) => {}
        Err(e) => tracing::error!(%session, error = %e, "hub tap: the session's end was not recorded"),
    }
}

/// Whether a hub `session.*` frame says its tools wait on the hub's approval: an interactive
/// session that does not auto-approve (`metadata.interactive: true`, `autoApproveTools:
/// false`, as a hub client's session asks). The CLI's own sessions say `interactive: false`
/// and approve in the CLI, never asking the hub (docs/cline-vendor-facts.md). `None`: the
/// frame does not say.
fn hub_asks(event: &HubEvent) -> Option<bool> {
    let p = &event.payload;
    let metadata = p
        .pointer("/session/metadata")
        .or_else(|| p.pointer("/snapshot/metadata"))?;
    let auto = metadata.get("autoApproveTools").and_then(serde_json::Value::as_bool)?;
    let interactive = metadata.get("interactive").and_then(serde_json::Value::as_bool);
    Some(!auto && interactive == Some(true))
}

/// When the hub says the session ended: its snapshot's `endedAt` (epoch ms or RFC 3339), else
/// the frame's own time.
fn ended_at(event: &HubEvent) -> Option<String> {
    let p = &event.payload;
    let at = p
        .get("snapshot")
        .or_else(|| p.get("session"))
        .and_then(|s| s.get("endedAt"));
    let ms = match at {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(t)) => aep_core::time::epoch_ms(t, true).and_then(|ms| u64::try_from(ms).ok()),
        _ => None,
    }
    .or(event.timestamp)?;
    aep_core::time::millis_of_epoch_ms(i64::try_from(ms).ok()?)
}

/// Whether a hub event says its session is over. Cline 3.0.65 keeps a session `idle` after a
/// run ends or is aborted, with `endedAt: null`; only an `endedAt`, an `exitCode` or a final
/// status means the session itself is over.
fn session_is_over(event: &HubEvent) -> bool {
    if matches!(
        event.event.as_str(),
        SESSION_ENDED | "session.deleted" | "session.removed" | "session.closed"
    ) {
        return true;
    }
    let p = &event.payload;
    let snapshot = p.get("snapshot").or_else(|| p.get("session"));
    let Some(s) = snapshot else { return false };
    let set = |k: &str| s.get(k).is_some_and(|v| !v.is_null());
    let status = s.get("status").and_then(serde_json::Value::as_str).unwrap_or_default();
    set("endedAt") || set("exitCode") || matches!(status, "ended" | "closed" | "exited" | "terminated")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: serde_json::Value) -> HubEvent {
        HubEvent {
            event: "session.created".into(),
            event_id: None,
            session_id: Some("s".into()),
            timestamp: None,
            sequence: None,
            payload,
        }
    }

    /// Only an interactive session that does not auto-approve waits on the hub's approval; the
    /// CLI's own (`interactive: false`, seen on 3.0.65) approves itself.
    #[test]
    fn the_hub_asks_only_for_an_interactive_session_that_does_not_auto_approve() {
        let meta = |m: serde_json::Value| frame(serde_json::json!({"session": {"metadata": m}}));
        let client = meta(serde_json::json!({"interactive": true, "autoApproveTools": false}));
        let cli = meta(serde_json::json!({"interactive": false, "autoApproveTools": false, "source": "cli"}));
        let auto = meta(serde_json::json!({"interactive": true, "autoApproveTools": true}));
        assert_eq!(hub_asks(&client), Some(true));
        assert_eq!(hub_asks(&cli), Some(false));
        assert_eq!(hub_asks(&auto), Some(false));
        let snapshot =
            frame(serde_json::json!({"snapshot": {"metadata": {"interactive": true, "autoApproveTools": false}}}));
        assert_eq!(hub_asks(&snapshot), Some(true));
        for silent in [
            serde_json::json!({}),
            serde_json::json!({"session": {"metadata": {"interactive": true}}}),
            serde_json::json!({"session": {"metadata": {"autoApproveTools": "no"}}}),
            serde_json::json!({"session": "x"}),
        ] {
            assert_eq!(hub_asks(&frame(silent.clone())), None, "{silent}");
        }
    }
}
