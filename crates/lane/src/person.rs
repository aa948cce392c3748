//! What a person does (approve, deny, answer, cancel, send input), as AEP commands (AEP-0004),
//! and the wait for what the daemon decided: the ack Event (`control.accepted` /
//! `control.rejected`, `cause` = the command id) and, when it lands soon after, the outcome
//! (`attention.answered`, `run.cancelled`, `x.cline.input.sent`, also caused by the command).
//! The terminal commands build their commands here and the dashboard's buttons too, so both
//! send exactly what a remote AEP client would.

use crate::control::{Intake, Refusal};
use crate::lane::{Note, Sessions};
use aep_core::types::{
    CONTROL_ACCEPTED, CONTROL_ATTENTION_RESPOND, CONTROL_CANCEL, CONTROL_REJECTED, RUN_CANCELLED, RUN_FAILED,
    RUN_FINISHED, SESSION_ENDED,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// How long a command's sender waits for its ack: the ack window (AEP-0004 §3) and a margin.
pub const ACK_WAIT: Duration = Duration::from_millis(crate::control::ACK_WINDOW_MS + 2_000);
/// How long it then waits for the outcome, once the command was accepted.
pub const OUTCOME_WAIT: Duration = Duration::from_millis(3_000);
/// How long, after an accepted run cancel whose outcome is not the run's end, the wait goes on
/// for it: the hub answers `run.abort` ok whatever it finds (a run whose client is gone goes on
/// waiting), so an ack alone says only that the command was sent.
pub const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// [`Waited::effect`] of a cancel the run outlived.
pub const NO_EFFECT: &str = "nothing";

/// One thing a person does.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Approve the pending request `request` (an `attention.requested` id).
    Approve { request: String, reason: Option<String> },
    /// Deny it, optionally saying why.
    Deny { request: String, reason: Option<String> },
    /// Answer it in words (AEP-0008: an option's name is that option, other text denies with
    /// the text as the reason).
    Answer { request: String, text: String },
    /// Cancel the session's active run.
    Cancel,
    /// End the session (`control.cancel {scope: "session"}`): for one stuck open.
    End { reason: Option<String> },
    /// Send the session a prompt: queued after the current run, or steering it.
    Send { text: String, steer: bool },
}

/// The AEP command for `action` on `session`, sent as `sender` (an agent name such as
/// `aep-cline-cli`) from `host`.
pub fn command(action: &Action, session: &str, sender: &str, host: &str) -> Value {
    let (ty, subject, data) = match action {
        Action::Approve { request, reason } | Action::Deny { request, reason } => {
            let option = if matches!(action, Action::Approve { .. }) {
                "approve"
            } else {
                "deny"
            };
            let mut answer = json!({"option": option});
            if let Some(r) = reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
                answer["text"] = json!(r);
            }
            (CONTROL_ATTENTION_RESPOND, Some(request), json!({"answer": answer}))
        }
        Action::Answer { request, text } => (
            CONTROL_ATTENTION_RESPOND,
            Some(request),
            json!({"answer": {"text": text}}),
        ),
        Action::Cancel => (CONTROL_CANCEL, None, json!({"scope": "run"})),
        Action::End { reason } => {
            let mut data = json!({"scope": "session"});
            if let Some(r) = reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
                data["reason"] = json!(r);
            }
            (CONTROL_CANCEL, None, data)
        }
        Action::Send { text, steer } => (
            cline_hooks::types::CONTROL_SEND_INPUT,
            None,
            json!({"text": text, "delivery": if *steer { "steer" } else { "queue" }}),
        ),
    };
    let mut c = json!({
        "aep": aep_core::AEP_VERSION,
        "id": aep_core::id::new_id(),
        "type": ty,
        "time": aep_core::id::now_rfc3339(),
        "source": aep_core::source::agent_source(host, sender),
        "agent": sender,
        "session": session,
        "data": data,
    });
    if let Some(s) = subject {
        c["subject"] = json!(s);
    }
    c
}

/// What came back for a command.
#[derive(Debug, Clone, Serialize)]
pub struct Waited {
    pub command: String,
    /// The ack Event; `None` if it did not come within the wait.
    pub ack: Option<Value>,
    /// The first other Event the command caused, if it came within the wait.
    pub outcome: Option<Value>,
    /// Why it was refused, in the daemon's words, for a command from this machine
    /// ([`Sender::Local`]) whose logged ack does not say (its capture level keeps no free text);
    /// for a cancel that did nothing ([`NO_EFFECT`]), that and what to do instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For an accepted run cancel: what became of the run, the type of the Event that ended it
    /// (`run.cancelled`, `run.finished`, `run.failed`, `session.ended`), or [`NO_EFFECT`] when it
    /// was still open after [`CANCEL_WAIT`]: a person is told the cancel did nothing, never a
    /// bare "accepted".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

/// Whether `e` ends a run or the session: the effect a cancel is for.
pub fn ends_run(e: &Value) -> bool {
    matches!(
        e["type"].as_str(),
        Some(RUN_CANCELLED | RUN_FAILED | RUN_FINISHED | SESSION_ENDED)
    )
}

/// What a person is told when a cancel did nothing, and what to do instead.
pub fn nothing_happened(session: &str, waited: Duration) -> String {
    format!(
        "the cancel was accepted but nothing happened: the run of {session} is still open after {}s. Cline did not \
         act on it (the client that drove the session may be gone). Ending the session (`aep-cline end {session}`, \
         the dashboard's End) closes it",
        waited.as_secs()
    )
}

/// Who sent a command: a person on this machine, or a sender elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// A person on this machine (`POST /control`, the dashboard, a notification's link):
    /// [`Intake::submit_local`].
    Local,
    /// A sender elsewhere (control over NATS): [`Intake::submit`], the gate alone decides.
    Remote,
}

/// Submits `command` to the intake and waits for its ack (at most `ack_wait`) and, if it was
/// accepted, for its outcome (at most `outcome_wait` more). Listens before it submits, so
/// nothing is missed; a listener that fell behind reads the session's log instead.
pub async fn submit_and_wait(
    sessions: &Arc<Sessions>,
    intake: &Arc<Intake>,
    command: Value,
    ack_wait: Duration,
    outcome_wait: Duration,
) -> Result<Waited, Refusal> {
    submit_through(Sender::Local, sessions, intake, command, ack_wait, outcome_wait).await
}

/// [`submit_and_wait`] for a command `sender` sent.
pub async fn submit_through(
    sender: Sender,
    sessions: &Arc<Sessions>,
    intake: &Arc<Intake>,
    command: Value,
    ack_wait: Duration,
    outcome_wait: Duration,
) -> Result<Waited, Refusal> {
    let id = command["id"].as_str().unwrap_or_default().to_string();
    let session = command["session"].as_str().unwrap_or_default().to_string();
    let run_cancel = command["type"] == CONTROL_CANCEL && command["data"]["scope"] == "run";
    let mut bus = sessions.bus().subscribe();
    let submitted = {
        let intake = intake.clone();
        tokio::task::spawn_blocking(move || match sender {
            Sender::Local => intake.submit_local(&command),
            Sender::Remote => intake.submit(&command),
        })
        .await
        .map_err(|e| Refusal::Invalid(format!("the intake failed: {e}")))?
    };
    submitted?;
    let mut waited = Waited {
        command: id.clone(),
        ack: None,
        outcome: None,
        detail: None,
        effect: None,
    };
    let mut deadline = Instant::now() + ack_wait;
    let mut lagged = false;
    loop {
        if waited.ack.is_some() && (waited.outcome.is_some() || !accepted(&waited)) {
            break;
        }
        let note = match tokio::time::timeout_at(deadline, bus.recv()).await {
            Err(_) => break,
            Ok(Err(RecvError::Closed)) => break,
            Ok(Err(RecvError::Lagged(_))) => {
                lagged = true;
                continue;
            }
            Ok(Ok(note)) => note,
        };
        let Note::Event(published) = note else { continue };
        let e = &published.value;
        if e["session"] != session.as_str() || e["cause"] != id.as_str() {
            continue;
        }
        note_event(&mut waited, e);
        if waited.ack.is_some() && accepted(&waited) && waited.outcome.is_none() {
            deadline = deadline.min(Instant::now() + outcome_wait);
        }
    }
    if lagged && (waited.ack.is_none() || waited.outcome.is_none()) {
        let logged = logged(sessions, &session).await;
        for e in logged.iter().filter(|e| e["cause"] == id.as_str()) {
            note_event(&mut waited, e);
        }
    }
    // A caller that waits for outcomes waits for a cancel's effect too (NATS control answers
    // with the ack alone: its sender follows the stream); after the log was read for what the
    // bus dropped, so an ack or an end heard only there counts.
    if run_cancel && accepted(&waited) && !outcome_wait.is_zero() {
        let ended = waited.outcome.as_ref().filter(|o| ends_run(o)).cloned();
        let mut effect = match ended {
            Some(e) => e["type"].as_str().unwrap_or_default().to_string(),
            None => run_end(&mut bus, &session, CANCEL_WAIT).await,
        };
        // "Nothing happened" is said only after the log agrees: a bus that lagged past the
        // run's end dropped the very Event the wait was for.
        if effect == NO_EFFECT {
            if let Some(ty) = end_after(&logged(sessions, &session).await, &id) {
                effect = ty;
            }
        }
        waited.effect = Some(effect);
        if waited.effect.as_deref() == Some(NO_EFFECT) {
            waited.detail = Some(nothing_happened(&session, CANCEL_WAIT));
        }
    }
    let unexplained = waited
        .ack
        .as_ref()
        .is_some_and(|a| a["type"] == CONTROL_REJECTED && a["data"]["detail"].is_null());
    if sender == Sender::Local && unexplained {
        waited.detail = intake.refusal(&id);
    }
    Ok(waited)
}

/// The longest `?wait=` a request may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// `wait=MS` in a query string: `None` without it; an error naming what is wrong otherwise.
pub fn wait_query(query: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(query) = query else { return Ok(None) };
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == "wait" {
            return match v.parse::<u64>() {
                Ok(ms) if ms > 0 && ms <= MAX_WAIT.as_millis() as u64 => Ok(Some(Duration::from_millis(ms))),
                _ => Err(format!(
                    "wait must be a number of milliseconds from 1 to {}",
                    MAX_WAIT.as_millis()
                )),
            };
        }
    }
    Ok(None)
}

/// The type of the next Event that ends a run of `session` or the session, heard within `wait`
/// (whatever caused it: Cline may end the run on its own); [`NO_EFFECT`] if none does.
async fn run_end(bus: &mut tokio::sync::broadcast::Receiver<Note>, session: &str, wait: Duration) -> String {
    let deadline = Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, bus.recv()).await {
            Err(_) | Ok(Err(RecvError::Closed)) => return NO_EFFECT.to_string(),
            Ok(Err(RecvError::Lagged(_))) => continue,
            Ok(Ok(Note::Event(p))) if p.value["session"] == session && ends_run(&p.value) => {
                return p.value["type"].as_str().unwrap_or_default().to_string()
            }
            Ok(Ok(_)) => continue,
        }
    }
}

/// The Events of `session`'s log (none when it cannot be read), read off the runtime's threads.
async fn logged(sessions: &Arc<Sessions>, session: &str) -> Vec<Value> {
    let (sessions, session) = (sessions.clone(), session.to_string());
    tokio::task::spawn_blocking(move || crate::views::logs::events(sessions.journal(), &session))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// The type of the first Event in a session's `logged` Events that ends a run or the session
/// after the ack of `command`; `None` when the log holds no such end (or no such ack).
fn end_after(logged: &[Value], command: &str) -> Option<String> {
    let ack = logged.iter().position(|e| {
        e["cause"] == command && matches!(e["type"].as_str(), Some(CONTROL_ACCEPTED | CONTROL_REJECTED))
    })?;
    logged[ack + 1..]
        .iter()
        .find(|e| ends_run(e))
        .and_then(|e| e["type"].as_str())
        .map(str::to_string)
}

fn note_event(waited: &mut Waited, e: &Value) {
    let ty = e["type"].as_str().unwrap_or_default();
    if ty == CONTROL_ACCEPTED || ty == CONTROL_REJECTED {
        waited.ack.get_or_insert_with(|| e.clone());
    } else {
        waited.outcome.get_or_insert_with(|| e.clone());
    }
}

fn accepted(waited: &Waited) -> bool {
    waited.ack.as_ref().is_some_and(|a| a["type"] == CONTROL_ACCEPTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_end_is_a_cancels_effect_and_none_is_said_with_what_to_do() {
        for ty in [RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, SESSION_ENDED] {
            assert!(ends_run(&json!({"type": ty})), "{ty}");
        }
        for e in [
            json!({"type": CONTROL_ACCEPTED}),
            json!({"type": "run.started"}),
            Value::Null,
        ] {
            assert!(!ends_run(&e), "{e}");
        }
        let said = nothing_happened("s1", CANCEL_WAIT);
        assert!(
            said.contains("nothing happened") && said.contains("aep-cline end s1") && said.contains("10s"),
            "{said}"
        );
    }

    #[test]
    fn a_run_end_the_bus_dropped_is_read_from_the_log_after_the_cancels_ack() {
        let ack = json!({"type": CONTROL_ACCEPTED, "cause": "c1"});
        let earlier_end = json!({"type": RUN_FINISHED});
        let later = json!({"type": "tool.requested"});
        let cancelled = json!({"type": RUN_CANCELLED, "cause": "c1"});
        // An end before the ack is an earlier run's, never this cancel's effect.
        assert_eq!(
            end_after(&[earlier_end.clone(), ack.clone(), later.clone()], "c1"),
            None
        );
        assert_eq!(
            end_after(&[earlier_end, ack.clone(), later, cancelled], "c1").as_deref(),
            Some(RUN_CANCELLED)
        );
        // Cline may end the run on its own; that is what became of it too.
        assert_eq!(
            end_after(&[ack.clone(), json!({"type": SESSION_ENDED})], "c1").as_deref(),
            Some(SESSION_ENDED)
        );
        // Another command's ack does not count, nor does a log without the ack.
        assert_eq!(end_after(&[ack, json!({"type": RUN_FAILED})], "c2"), None);
        assert_eq!(end_after(&[], "c1"), None);
    }

    #[test]
    fn commands_are_what_the_intake_takes() {
        let approve = command(
            &Action::Approve {
                request: "REQ".into(),
                reason: Some("  ".into()),
            },
            "s1",
            "aep-cline-cli",
            "box",
        );
        assert_eq!(approve["type"], "control.attention.respond");
        assert_eq!(approve["subject"], "REQ");
        assert_eq!(approve["data"], json!({"answer": {"option": "approve"}}));
        assert_eq!(approve["source"], "aep://box/agent/aep-cline-cli");
        assert!(approve.get("seq").is_none(), "commands carry no seq (AEP-0001 §5.2)");
        let deny = command(
            &Action::Deny {
                request: "REQ".into(),
                reason: Some("use staging".into()),
            },
            "s1",
            "a",
            "h",
        );
        assert_eq!(
            deny["data"],
            json!({"answer": {"option": "deny", "text": "use staging"}})
        );
        let send = command(
            &Action::Send {
                text: "go on".into(),
                steer: true,
            },
            "s1",
            "a",
            "h",
        );
        assert_eq!(send["data"], json!({"text": "go on", "delivery": "steer"}));
        assert_eq!(
            command(&Action::Cancel, "s1", "a", "h")["data"],
            json!({"scope": "run"})
        );
        assert_eq!(wait_query(None), Ok(None));
        assert_eq!(wait_query(Some("x=1")), Ok(None));
        assert_eq!(wait_query(Some("wait=12000")), Ok(Some(Duration::from_millis(12000))));
        for bad in ["wait=", "wait=0", "wait=abc", "wait=30001"] {
            assert!(wait_query(Some(bad)).is_err(), "{bad}");
        }
        for c in [approve, deny, send] {
            cline_hub::control::parse(&c).expect("the intake's parser takes it");
        }
    }
}
