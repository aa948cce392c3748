//! The command intake: the one door for AEP commands (AEP-0004), whatever transport brought
//! them (the relay binding, the embedded endpoint, `POST /control`, a test). It decides once per
//! command `(source, id)`, appends the ack (`control.accepted` / `control.rejected`, `cause` =
//! the command id) to the target session's lane, and re-emits the recorded ack byte-identically
//! when the same command arrives again (AEP-0004 §3), never deciding or executing twice. A
//! command seen again while its decision is pending gets nothing.
//!
//! What it accepts comes from the control gate (`AEP_CLINE_HUB_CONTROL=1`): the three verbs the
//! hub tap actuates ([`cline_hub::control::ACCEPTS`]); with the gate off, nothing, and every
//! command is nacked `unsupported` (AEP-0004 §4.2, defense-in-depth behind `hello`).
//!
//! A command the hub must carry out is checked against the session's lane (the request it
//! answers is pending, the run it cancels is the active one), marked there, and handed to the
//! tap; the hub's reply, the ack guard or the loss of the connection then decides it through
//! [`Intake::settle`]. Everything else is decided at once.

use crate::control::{Kind, Link, Request};
use crate::lane::{IngestError, Lane, Published, Sessions};
use aep_core::bounded::BoundedMap;
use aep_core::types::{ATTENTION_ROUTED, CONTROL_ACCEPTED};
use aep_core::{EventType, Scope};
use cline_hooks::Planned;
use cline_hub::ack::{self, Ack, HubOutcome, Nack, NackReason};
use cline_hub::control::{self, Command};
use cline_hub::{Answering, CommandKey, Dedupe, Seen};
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;

/// Commands whose recorded ack is kept for redelivery.
const MAX_RECORDED: usize = 4096;

/// Why a command was not taken at all: answered by the transport (an `error` frame, a 4xx),
/// never by an Event (AEP-0004 §4.2).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("not a command Event: {0}")]
    Invalid(String),
    #[error("no session {0:?} is emitted by this daemon")]
    NoRoute(String),
    #[error(transparent)]
    Log(#[from] IngestError),
}

pub struct Intake {
    sessions: Arc<Sessions>,
    accepts: Vec<String>,
    /// The hub tap's control leg, when its gate is on.
    hub: Option<Link>,
    recorded: Mutex<Dedupe<Arc<Published>>>,
    /// The daemon's own words for its latest refusals, by command id: the log keeps a
    /// `control.rejected`'s `detail` only at `redacted`/`full` (free text, AEP-0003), but a
    /// person who sent the command on this machine should read why ([`Intake::refusal`]).
    refusals: Mutex<BoundedMap<String, String>>,
}

/// Refusals whose words are kept for their senders.
const MAX_REFUSALS: usize = 256;

impl Intake {
    /// `hub` is the control leg (`AEP_CLINE_HUB_CONTROL=1`); `None` accepts nothing.
    pub fn new(sessions: Arc<Sessions>, hub: Option<Link>) -> Self {
        let accepts = match hub {
            Some(_) => control::ACCEPTS.iter().map(|t| t.to_string()).collect(),
            None => Vec::new(),
        };
        Intake {
            sessions,
            accepts,
            hub,
            recorded: Mutex::new(Dedupe::new(MAX_RECORDED)),
            refusals: Mutex::new(BoundedMap::new(MAX_REFUSALS)),
        }
    }

    /// Why the command `command_id` was refused, in the daemon's words, while it is among the
    /// latest refusals. For a local door only: the log is what every other reader gets.
    pub fn refusal(&self, command_id: &str) -> Option<String> {
        self.refusals.lock().get(command_id).cloned()
    }

    /// The command types this daemon declares (`control.accepts`, authoritative, AEP-0004 §4.2).
    pub fn accepts(&self) -> &[String] {
        &self.accepts
    }

    /// The sessions' lane the intake writes to.
    pub(super) fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// Whether `session` is one this daemon emits.
    pub fn owns(&self, session: &str) -> bool {
        self.sessions.owns(session)
    }

    /// Takes one command. `Ok` means it is the target's to decide: its ack reaches the
    /// session's lane and the bus (at once, or within the ack window), never through a return
    /// value, so every transport sees acks the same way.
    pub fn submit(&self, command: &Value) -> Result<(), Refusal> {
        self.submit_from(command, false, None)
    }

    /// [`Intake::submit`] for a command a person on this machine gave through a local door
    /// (`POST /control` with the discovery token, the dashboard): besides what the gate lets
    /// through, it may end a session (`control.cancel {scope: "session"}`, `aep-cline end`),
    /// which touches only this daemon's record, never Cline.
    pub fn submit_local(&self, command: &Value) -> Result<(), Refusal> {
        self.submit_from(command, true, None)
    }

    /// [`Intake::submit`] for the daemon's own policy answering a request by `rule`
    /// (`AEP_CLINE_POLICY`): decided like any command, and its `attention.answered` says
    /// `by: "policy"` and names the rule. No transport reaches this door.
    pub fn submit_policy(&self, command: &Value, rule: &str) -> Result<(), Refusal> {
        self.submit_from(command, false, Some(rule))
    }

    fn submit_from(&self, command: &Value, local: bool, rule: Option<&str>) -> Result<(), Refusal> {
        let s = |k: &str| command.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (ty, id, source, session) = (s("type"), s("id"), s("source"), s("session"));
        let is_command = EventType::parse(&ty).is_ok_and(|t| t.scope() == Scope::ForeignEmitter);
        if !is_command || ty == ATTENTION_ROUTED {
            return Err(Refusal::Invalid(format!(
                "{ty:?} is not a command type (control.* or x.<vendor>.control.*)"
            )));
        }
        if id.is_empty() || source.is_empty() || session.is_empty() {
            return Err(Refusal::Invalid(
                "a command needs a string `id`, `source` and `session` (AEP-0004 §2)".into(),
            ));
        }
        if !self.owns(&session) {
            return Err(Refusal::NoRoute(session));
        }
        let key = CommandKey { source, id };
        let mut recorded = self.recorded.lock();
        match recorded.begin(&key) {
            Seen::Decided(ack) => {
                self.sessions.bus().republish(ack);
                return Ok(());
            }
            Seen::Pending => return Ok(()),
            Seen::New => {}
        }
        match self.decide(command, &key, &ty, &session, local, rule) {
            Ok(Some(ack)) => {
                recorded.decide(&key, ack);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                recorded.abandon(&key);
                Err(e)
            }
        }
    }

    /// Decides a command the hub took, answered, or never answered. `false` when it was
    /// decided already (the first decision wins: the reply, the guard, the disconnect, or a
    /// hook's effect that wrote the answer first).
    pub fn settle(&self, key: &CommandKey, session: &str, command_id: &str, ack: Ack) -> bool {
        if !self.recorded.lock().is_pending(key) {
            return false;
        }
        self.settle_with(key, session, command_id, ack, |_| Vec::new())
    }

    /// [`Intake::settle`], with `outcomes` (what the decision caused in the lane) appended in the
    /// same write right after the ack, so nothing another lane reports can come between the
    /// answer and its effects. The outcomes are appended even when the command was decided
    /// already (by the guard).
    ///
    /// A hook's effect of an answer (the gated tool's result) may have reached the lane first
    /// and written the ack ahead of itself (`cline_hub::answers_before_effects`): that ack is the
    /// decision, recorded here, and none is written again.
    pub fn settle_with(
        &self,
        key: &CommandKey,
        session: &str,
        command_id: &str,
        ack: Ack,
        outcomes: impl FnOnce(Lane<'_>) -> Vec<Planned>,
    ) -> bool {
        let mut recorded = self.recorded.lock();
        let pending = recorded.is_pending(key);
        let mut first = None;
        let planned = self.sessions.append_in(session, |lane| {
            let mut planned = Vec::new();
            if pending {
                first = lane.acks_first.remove(command_id);
                if first.is_none() {
                    lane.approvals.acked(command_id);
                    planned.push(self.ack_event(command_id, &ack));
                }
            }
            planned.extend(outcomes(lane));
            planned
        });
        match planned {
            Ok(published) if pending => {
                let decision = match first {
                    Some(first) => {
                        if let Ack::Rejected(nack) = &ack {
                            // The effect showed the hub applied this very answer: another
                            // client's identical answer won the race, with the same effect.
                            tracing::warn!(%session, command = command_id, detail = %nack.detail,
                                "the hub refused an answer whose effect was already logged as it; the log keeps it accepted");
                        }
                        Some(first)
                    }
                    None => published.into_iter().next(),
                };
                decision.is_some_and(|ack| recorded.decide(key, ack))
            }
            Ok(_) => false,
            Err(e) => {
                // A redelivery gets nothing rather than a second execution (bounded, not pending).
                tracing::error!(%session, command = command_id, error = %e, "the ack could not be recorded");
                recorded.fail(key);
                false
            }
        }
    }

    /// `Some(ack)` when decided now; `None` when handed to the hub.
    fn decide(
        &self,
        command: &Value,
        key: &CommandKey,
        ty: &str,
        session: &str,
        local: bool,
        rule: Option<&str>,
    ) -> Result<Option<Arc<Published>>, Refusal> {
        let nack = |reason, detail: String| self.ack_now(session, &key.id, Ack::Rejected(Nack::new(reason, detail)));
        if let Some(ask) = self.held_for(command).filter(|a| a.session == session) {
            return self.answer_held(command, key, ask, local, self.hub.is_some());
        }
        let ends_session = ty == control::CANCEL && command.pointer("/data/scope") == Some(&Value::from("session"));
        if ends_session && (local || self.hub.is_some()) {
            return self.end_session(command, key, session);
        }
        let Some(link) = self.hub.as_ref().filter(|_| self.accepts.iter().any(|a| a == ty)) else {
            let detail = match &self.hub {
                Some(_) => format!(
                    "{ty} is not in this daemon's control.accepts ({})",
                    self.accepts.join(", ")
                ),
                None => "this daemon accepts no commands: the hub control gate (AEP_CLINE_HUB_CONTROL=1) is off".into(),
            };
            return nack(NackReason::Unsupported, detail);
        };
        if let Err(v) = aep_core::validate::validate_event(command) {
            return nack(NackReason::Invalid, v.to_string());
        }
        let parsed = match control::parse(command) {
            Ok(parsed) => parsed,
            Err(n) => return nack(n.reason, n.detail),
        };
        if !matches!(parsed, Command::Respond { .. }) && self.sessions.has_ended(session) == Some(true) {
            let detail = format!("session {session} has ended: nothing runs in it to cancel or to take input");
            return nack(NackReason::Refused, detail);
        }
        if !link.connected() {
            return self.ack_now(
                session,
                &key.id,
                ack::decide(HubOutcome::Unreachable("the hub tap is not connected")),
            );
        }
        // Checked and marked in the lane under the session's lock; a refusal is the ack.
        // A cancel is accepted there and then, before the hub can act on it: the hub answers
        // `run.abort` ok whatever it finds, so its reply decides nothing, and the abort's
        // effects (a dismissed approval, the aborted tool, `run.cancelled`) may reach the lane
        // before that reply does. Sequenced now, the answer precedes every effect it caused.
        let mut forward = None;
        let published = self
            .sessions
            .append_in(session, |lane| match prepare(lane, parsed, key, session, rule) {
                Ok(request) => {
                    let early = matches!(request.kind, Kind::Cancel { .. });
                    forward = Some(request);
                    match early {
                        true => vec![self.ack_event(&key.id, &Ack::Accepted)],
                        false => Vec::new(),
                    }
                }
                Err(n) => vec![self.ack_event(&key.id, &Ack::Rejected(n))],
            })?;
        let Some(request) = forward else {
            return Ok(published.into_iter().last());
        };
        let accepted = published.into_iter().last();
        match link.send(request) {
            Ok(()) => Ok(accepted),
            Err(request) => {
                withdraw(&self.sessions, &request);
                if accepted.is_some() {
                    // The tap stopped (the daemon is shutting down) between the check and the send.
                    tracing::warn!(%session, command = %key.id, "an accepted cancel could not reach the hub: the tap stopped");
                    return Ok(accepted);
                }
                self.ack_now(
                    session,
                    &key.id,
                    ack::decide(HubOutcome::Unreachable("the hub tap stopped")),
                )
            }
        }
    }

    /// `control.cancel {scope: "session"}`: a person ends a session the reconciler cannot
    /// decide. Accepted (the ack first), then the session's open runs are cancelled by the
    /// command and the session ends, each caused by the command (AEP-0004 §6); refused when it
    /// has ended already.
    fn end_session(&self, command: &Value, key: &CommandKey, session: &str) -> Result<Option<Arc<Published>>, Refusal> {
        if let Err(v) = aep_core::validate::validate_event(command) {
            return self.ack_now(
                session,
                &key.id,
                Ack::Rejected(Nack::new(NackReason::Invalid, v.to_string())),
            );
        }
        let reason = command.pointer("/data/reason").and_then(Value::as_str);
        if self.sessions.has_ended(session) == Some(true) {
            let detail = format!("session {session} has ended already: there is nothing to end");
            return self.ack_now(session, &key.id, Ack::Rejected(Nack::new(NackReason::Refused, detail)));
        }
        let ack = self.ack_now(session, &key.id, Ack::Accepted)?;
        self.sessions.end_by_person(session, &key.id, reason)?;
        Ok(ack)
    }

    pub(super) fn ack_now(&self, session: &str, command_id: &str, ack: Ack) -> Result<Option<Arc<Published>>, Refusal> {
        let mut published = self
            .sessions
            .append(session, || vec![self.ack_event(command_id, &ack)])?;
        Ok(published.pop())
    }

    /// The ack Event for a command: `cause` = the command id (AEP-0004 §3).
    pub(super) fn ack_event(&self, command_id: &str, ack: &Ack) -> Planned {
        if let Ack::Rejected(nack) = ack {
            self.refusals.lock().insert(command_id.to_string(), nack.detail.clone());
        }
        let level = self.sessions.capture().ceiling(CONTROL_ACCEPTED);
        Planned {
            id: aep_core::id::new_id(),
            run: None,
            cause: Some(command_id.to_string()),
            agent: None,
            event: ack.mapped(level, self.sessions.redactor()),
        }
    }
}

/// What a command needs from the session's lane, marked there so the hub's answer finds it.
fn prepare(
    lane: Lane<'_>,
    command: Command,
    key: &CommandKey,
    session: &str,
    rule: Option<&str>,
) -> Result<Request, Nack> {
    let refused = |detail: String| Nack::new(NackReason::Refused, detail);
    let (hub, kind) = match command {
        Command::Respond { request, answer } => {
            let approval_id = lane
                .approvals
                .answer(
                    &request,
                    Answering {
                        command_id: key.id.clone(),
                        answer: answer.clone(),
                        policy_rule: rule.map(str::to_string),
                    },
                )
                .map_err(|e| refused(e.to_string()))?;
            let hub = control::approval_respond(session, &approval_id, &answer);
            (hub, Kind::Respond { approval_id })
        }
        Command::Cancel { run, reason } => {
            // The hub aborts the session's active run and answers ok even when there is none,
            // so the run is checked here, against what the hooks reported.
            if lane.tracker.has_ended() {
                return Err(refused(format!(
                    "session {session} has ended: nothing is running to cancel"
                )));
            }
            let Some(active) = lane.tracker.active_run().map(str::to_string) else {
                return Err(refused(format!(
                    "session {session} has no running run to cancel: it is idle"
                )));
            };
            if let Some(named) = run.filter(|r| *r != active) {
                return Err(refused(format!(
                    "run {named} is not the session's active run ({active}): the hub cancels only the active run"
                )));
            }
            // Nor whether it hosts the session: `run.abort` of a session that runs in its own
            // process (`cline --json` without the hub) is answered ok and changes nothing. A
            // hosted session is named by the hub's frames as it works.
            if !lane.tracker.is_hosted() {
                return Err(refused(format!(
                    "session {session} does not run in Cline's hub (no hub frame has named it since the tap connected), \
                     and only the hub can cancel a run: stop it where it runs (Ctrl+C), or `aep-cline end` it once its Cline is gone"
                )));
            }
            lane.tracker.note_cancel(&active, &key.id);
            let hub = control::run_abort(session, reason.as_deref(), &key.id);
            (hub, Kind::Cancel { run: active })
        }
        Command::SendInput { .. } if lane.tracker.has_ended() => {
            return Err(refused(format!(
                "session {session} has ended: Cline no longer takes input for it; start a new task"
            )))
        }
        Command::SendInput { text, delivery } => (
            control::send_input(session, &text, delivery),
            Kind::SendInput { delivery },
        ),
    };
    Ok(Request {
        key: key.clone(),
        session: session.to_string(),
        command_id: key.id.clone(),
        hub,
        kind,
    })
}

/// Undoes what [`prepare`] marked in the lane for a command that will get no hub reply.
pub fn withdraw(sessions: &Sessions, request: &Request) {
    let undone = sessions.append_in(&request.session, |lane| {
        match &request.kind {
            Kind::Respond { approval_id } => lane.approvals.withdraw(approval_id),
            Kind::Cancel { run } => {
                lane.tracker.forget_cancel(run);
            }
            Kind::SendInput { .. } => {}
        }
        Vec::new()
    });
    if let Err(e) = undone {
        tracing::error!(session = %request.session, error = %e, "a withdrawn command could not be undone in the lane");
    }
}
