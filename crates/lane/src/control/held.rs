//! The answers to tool calls held at their hook (an `ask` rule where Cline asks nobody,
//! [`crate::lane::asks`]): a person's `control.attention.respond` (the dashboard, `aep-cline
//! approve`/`deny`, a notification's link), or nobody's in time. No hub is in between: the
//! daemon holds the call, so the answer applies at once, in one write (the command's ack,
//! `attention.answered`, `attention.resolved`, and a deny's `tool.denied`), then the held hook
//! is told. A person on this machine answers whatever the hub control gate says (the `ask`
//! rule is the operator's own setting); a remote transport only with the gate on.

use super::intake::{Intake, Refusal};
use crate::lane::asks::{Ask, OnTimeout, Outcome};
use crate::lane::Published;
use aep_core::types::ATTENTION_ANSWERED;
use cline_hooks::mapping::MapContext;
use cline_hooks::Planned;
use cline_hub::ack::{Ack, Nack, NackReason};
use cline_hub::control::{self, Command};
use cline_hub::{Answering, CommandKey};
use serde_json::Value;
use std::sync::Arc;

impl Intake {
    /// The call held for the request `command` answers, when it is one.
    pub(super) fn held_for(&self, command: &Value) -> Option<Ask> {
        let ty = command.get("type").and_then(Value::as_str)?;
        if ty != control::RESPOND {
            return None;
        }
        let request = command.get("subject").and_then(Value::as_str)?;
        self.sessions().asks().get(request)
    }

    /// A command answering a held call: decided here, at once.
    pub(super) fn answer_held(
        &self,
        command: &Value,
        key: &CommandKey,
        ask: Ask,
        local: bool,
        gate: bool,
    ) -> Result<Option<Arc<Published>>, Refusal> {
        let session = ask.session.clone();
        let nack = |reason, detail: String| self.ack_now(&session, &key.id, Ack::Rejected(Nack::new(reason, detail)));
        if !local && !gate {
            return nack(
                NackReason::Unsupported,
                "a call held at its hook is answered on this machine (the dashboard, aep-cline approve/deny), or \
                 through AEP with the hub control gate on (AEP_CLINE_HUB_CONTROL=1)"
                    .into(),
            );
        }
        if let Err(v) = aep_core::validate::validate_event(command) {
            return nack(NackReason::Invalid, v.to_string());
        }
        let answer = match control::parse(command) {
            Ok(Command::Respond { answer, .. }) => answer,
            Ok(_) => return nack(NackReason::Invalid, "not an answer".into()),
            Err(n) => return nack(n.reason, n.detail),
        };
        let approved = answer.approved();
        let mut refused = None;
        let published = self.sessions().append_in(&session, |mut lane| {
            let answering = Answering {
                command_id: key.id.clone(),
                answer: answer.clone(),
                policy_rule: None,
            };
            if let Err(e) = lane.approvals.answer(&ask.request, answering) {
                refused = Some(e.to_string());
                return vec![self.ack_event(&key.id, &Ack::Rejected(Nack::new(NackReason::Refused, e.to_string())))];
            }
            let attention = self.sessions().attention(true);
            let mut planned = vec![self.ack_event(&key.id, &Ack::Accepted)];
            let outcomes = lane.approvals.answered_here(
                &ask.approval_id,
                crate::lane::sessions::now_ms(),
                &attention,
                &mut aep_core::id::new_id,
            );
            let answered = outcomes
                .iter()
                .find(|p| p.event.ty == ATTENTION_ANSWERED)
                .map(|p| p.id.clone());
            planned.extend(outcomes);
            if !approved {
                planned.extend(self.denial(&mut lane, &ask, answered));
            }
            planned
        })?;
        if refused.is_none() {
            let outcome = match approved {
                true => Outcome::Go,
                false => Outcome::Stop(ask.deny.clone()),
            };
            self.sessions().asks().settle(&ask.request, outcome);
        }
        Ok(published.into_iter().next())
    }

    /// Nobody answered held request `request` in time: `attention.timeout`, then what the rule
    /// says applies (a deny's `tool.denied`), and the held hook is told. Nothing when it was
    /// answered already (a person's answer first stands).
    pub fn expire_held(&self, request: &str) {
        let Some(ask) = self.sessions().asks().get(request) else {
            return;
        };
        let mut timed_out = false;
        let written = self.sessions().append_in(&ask.session, |mut lane| {
            let attention = self.sessions().attention(true);
            let after = u64::try_from(ask.after.as_millis()).unwrap_or(u64::MAX);
            let Some(timeout) = lane
                .approvals
                .timed_out(&ask.request, after, &attention, &mut aep_core::id::new_id)
            else {
                return Vec::new();
            };
            timed_out = true;
            let id = timeout.id.clone();
            let mut planned = vec![timeout];
            if ask.on_timeout == OnTimeout::Deny {
                planned.extend(self.denial(&mut lane, &ask, Some(id)));
            }
            planned
        });
        if let Err(e) = &written {
            tracing::error!(session = %ask.session, request, error = %e, "a held call's timeout could not be recorded; the call is told anyway");
        }
        if timed_out || written.is_err() {
            let outcome = match ask.on_timeout {
                OnTimeout::Approve => Outcome::Go,
                OnTimeout::Deny => Outcome::Stop(ask.deny.clone()),
            };
            self.sessions().asks().settle(&ask.request, outcome);
        }
    }

    /// A held call's `tool.denied {by: "policy", rule}`, caused by what denied it (the answer,
    /// or the timeout); the run's end noted when the deny ends it.
    fn denial(&self, lane: &mut crate::lane::Lane<'_>, ask: &Ask, cause: Option<String>) -> Vec<Planned> {
        let ctx = MapContext {
            capture: self.sessions().capture(),
            redactor: self.sessions().redactor(),
        };
        let mut denied = lane.tracker.plan_denied_call(
            &ask.agent,
            &ask.tool,
            ask.call_id.as_deref(),
            Some(&ask.rule),
            &ctx,
            &mut aep_core::id::new_id,
        );
        if let Some(cause) = cause {
            denied.cause = Some(cause);
        }
        if let (true, Some(run)) = (ask.deny_ends_run, denied.run.as_deref()) {
            let mut data = serde_json::Map::new();
            data.insert("rule".into(), Value::from(ask.rule.clone()));
            lane.tracker.note_stop(run, &denied.id, data);
        }
        vec![denied]
    }
}
