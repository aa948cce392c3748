//! A hook recorded: its body read, its session's store read off the lock when the mapping
//! wants it, then under the session's lock its delivery checked (a hook that comes twice is
//! recorded once), its firing's facts taken in (parent, Cline's data folder), its Events
//! planned, a guard's verdict applied, the approvals its effects prove resolved first, and the
//! whole written in one commit ([`super::commit`]).

use super::{IngestError, Ingested, SessionState, Sessions};
use crate::firing::Firing;
use crate::lane::parent::Parent;
use crate::lane::verdict::{Judging, Verdict};
use crate::metrics::HookOutcome;
use cline_hooks::mapping::MapContext;
use cline_hooks::{HookPayload, Planned, SessionTracker};
use cline_hub::AttentionContext;
use std::time::Instant;

impl Sessions {
    /// Maps one hook body to Events and appends them to its session's log.
    pub fn ingest_hook(&self, body: &[u8], firing: &Firing) -> Result<Ingested, IngestError> {
        let payload = self.parsed(body)?;
        let hook = payload.hook_name.clone();
        let result = self.ingest_judged(payload, firing, None);
        self.count(&hook, HookOutcome::Taken, &result);
        result
    }

    /// [`Sessions::ingest_hook`] with a guard that may answer the hook ([`Judging`]), for a hook
    /// Cline waits on.
    pub fn ingest_hook_judged(
        &self,
        body: &[u8],
        firing: &Firing,
        judging: Judging<'_>,
    ) -> Result<Ingested, IngestError> {
        let payload = self.parsed(body)?;
        let hook = payload.hook_name.clone();
        let result = self.ingest_judged(payload, firing, Some(judging));
        self.count(&hook, HookOutcome::Taken, &result);
        result
    }

    /// A live hook's body read; a refusal is counted (by no name: none could be read).
    fn parsed(&self, body: &[u8]) -> Result<HookPayload, IngestError> {
        HookPayload::parse(body).map_err(|e| {
            self.metrics.hook(None, HookOutcome::Refused);
            e.into()
        })
    }

    /// Counts what came of one hook for `/metrics`; `recorded` says how it came when it was
    /// recorded (live or from the spool).
    fn count(&self, hook: &str, recorded: HookOutcome, result: &Result<Ingested, IngestError>) {
        let outcome = match result {
            Ok(Ingested::Appended { .. }) => recorded,
            Ok(Ingested::Duplicate { .. }) => HookOutcome::Duplicate,
            Err(IngestError::Payload(_)) => HookOutcome::Refused,
            Err(_) => HookOutcome::Failed,
        };
        self.metrics.hook(Some(hook), outcome);
    }

    /// Maps one parsed hook to Events and appends them to its session's log, once per
    /// delivery id. Each Event's `time` is when the hook fired (the payload's `timestamp`, else
    /// the shim's clock), not when it reached the daemon. The spool's door: a hook recorded
    /// here is counted `spooled` in `/metrics`.
    pub fn ingest(&self, payload: HookPayload, firing: &Firing) -> Result<Ingested, IngestError> {
        let hook = payload.hook_name.clone();
        let result = self.ingest_judged(payload, firing, None);
        self.count(&hook, HookOutcome::Spooled, &result);
        result
    }

    /// [`Sessions::ingest`], asking `judge` (when given) what to answer the hook, under the
    /// session's lock, after its Events are planned and before they are written: the audit goes
    /// on them, and a blocked tool call's `tool.denied` in the same write.
    pub fn ingest_judged(
        &self,
        payload: HookPayload,
        firing: &Firing,
        judging: Option<Judging<'_>>,
    ) -> Result<Ingested, IngestError> {
        let session = payload.session_key().expect("parse checks the session key").to_string();
        let delivery = firing.delivery.as_deref();
        let time = fired_at(&payload, firing);
        for field in &payload.dropped {
            tracing::warn!(%session, field, "a hook payload field had the wrong type and was read as absent");
        }
        // Cline's store is read off the session's lock (`crate::lane::run_usage`): only whether to
        // read, and where, is asked under it.
        let store = self
            .with(&session, |state| {
                let judged = judging.is_some_and(|j| j.reads_store)
                    && matches!(payload.hook_name.as_str(), "tool_call" | "prompt_submit");
                let wanted = judged || crate::lane::run_usage::wanted(&payload, &state.tracker);
                Ok(wanted.then(|| firing.cline_data.clone().or_else(|| state.cline_data.clone())))
            })?
            .flatten()
            .and_then(|dir| crate::lane::run_usage::read_store(&dir, &session));
        self.with(&session, |state| {
            if let Some(d) = delivery {
                if state.deliveries.contains(d) {
                    let said = state.verdicts.get(d).cloned();
                    return Ok(Ingested::Duplicate {
                        session: session.clone(),
                        control: said.as_ref().and_then(|s| s.control.clone()),
                        asks: said.and_then(|s| s.asks),
                    });
                }
            }
            let ctx = MapContext {
                capture: &self.capture,
                redactor: &self.redactor,
            };
            if firing.cline_data.is_some() && firing.cline_data != state.cline_data {
                state.cline_data.clone_from(&firing.cline_data);
                state.cline_data_logged = false;
            }
            if let Some(pid) = firing
                .parent
                .filter(|p| state.parent.is_none_or(|known| known.pid != *p))
            {
                // The shim's own reading of its parent's start time, taken while the hook ran:
                // a pid reused by the time a spooled hook is ingested is not taken for Cline.
                let started = firing.parent_started.or_else(|| crate::lane::parent::start_time(pid));
                if let Some(parent) = Parent::new(pid, started) {
                    state.parent = Some(parent);
                    state.parent_logged = false;
                }
            }
            // I/O at the edge: the store was read above, the mapping gets what it said as data.
            let usage = crate::lane::run_usage::of(&payload, &state.tracker, store.as_ref());
            let mut planned = state
                .tracker
                .plan_with(&payload, &ctx, &usage, &mut aep_core::id::new_id);
            let verdict = judging.and_then(|j| (j.judge)(&payload, &state.tracker, store.as_ref()));
            if let Some(verdict) = &verdict {
                apply(verdict, &payload, &mut state.tracker, &ctx, &mut planned);
            }
            let held = match verdict.as_ref().and_then(|v| v.ask.as_ref()) {
                Some(plan) => self.hold(plan, &payload, &session, state, &mut planned),
                None => None,
            };
            let acks = self.answers_before_effects(&mut planned, state);
            self.dismiss_before_end(&mut planned, state);
            let events = self.commit(&session, state, &planned, delivery, &time)?;
            for ack in acks {
                if let Some(event) = events.iter().find(|e| e.value["id"] == ack.event.as_str()) {
                    state.acks_first.insert(ack.command, event.clone());
                }
            }
            let control = verdict.and_then(|v| v.control);
            let asks = held.map(|ask| {
                let request = ask.request.clone();
                self.asks.open(ask);
                request
            });
            if let Some(d) = delivery {
                state.deliveries.insert(d.to_string());
                if control.is_some() || asks.is_some() {
                    let said = super::Said {
                        control: control.clone(),
                        asks: asks.clone(),
                    };
                    state.verdicts.insert(d.to_string(), said);
                }
            }
            if state.last_hook.as_deref().is_none_or(|last| *last < *time) {
                state.last_hook = Some(time.clone());
            }
            match (state.tracker.has_ended(), state.ended.is_some()) {
                (true, false) => state.ended = Some(Instant::now()),
                // Taken up again after its end (a new run): open, watched and ended as any.
                (false, true) => state.ended = None,
                _ => {}
            }
            match (state.tracker.holds_cancel(), state.held.is_some()) {
                (true, false) => state.held = Some((Instant::now(), time.clone())),
                (false, true) => state.held = None,
                _ => {}
            }
            Ok(Ingested::Appended {
                session: session.clone(),
                events,
                control,
                asks,
            })
        })
    }

    /// Holds a tool call at its hook while a person answers: its `attention.requested`
    /// (caused by the call's `tool.requested`, named by the rule, expiring when the policy
    /// answers) planned after the call, and the held call for [`crate::lane::asks`].
    fn hold(
        &self,
        plan: &crate::lane::AskPlan,
        payload: &HookPayload,
        session: &str,
        state: &mut SessionState,
        planned: &mut Vec<Planned>,
    ) -> Option<crate::lane::asks::Ask> {
        let requested = planned
            .iter()
            .find(|p| p.event.ty == aep_core::types::TOOL_REQUESTED)?
            .clone();
        let call = payload.tool_call.clone().unwrap_or_default();
        let approval = cline_hub::frame::ApprovalRequested {
            approval_id: format!("{}{}", cline_hub::approvals::HOOK, requested.id),
            session_id: session.to_string(),
            agent_id: Some(payload.agent().to_string()),
            conversation_id: None,
            iteration: payload.iteration,
            tool_call_id: call.id.clone(),
            tool_name: Some(plan.tool.clone()),
            input_json: Some(plan.input.to_string()),
        };
        let now = super::now_ms();
        let mut request = state.approvals.request(
            &approval,
            Some(now),
            requested.run.clone(),
            Some(requested.id.clone()),
            &self.attention(true),
            &mut aep_core::id::new_id,
        )?;
        let (answer, after_s) = (
            match plan.on_timeout {
                crate::lane::asks::OnTimeout::Approve => "approve",
                crate::lane::asks::OnTimeout::Deny => "deny",
            },
            plan.after.as_secs(),
        );
        let expires = aep_core::time::seconds(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(after_s as i64));
        if self.local().is_on() {
            // What it asks, for the owner's local view (never an Event), as a hub approval's.
            self.local().hold(
                &request.id,
                &approval.approval_id,
                cline_hub::Detail::requested(&approval, &self.redactor),
            );
        }
        cline_hub::attention::by_policy(&mut request.event, &plan.rule, Some("ask"));
        cline_hub::attention::expires(&mut request.event, &expires, after_s, answer, &plan.rule);
        let ask = crate::lane::asks::Ask {
            session: session.to_string(),
            request: request.id.clone(),
            approval_id: approval.approval_id.clone(),
            rule: plan.rule.clone(),
            agent: payload.agent().to_string(),
            tool: plan.tool.clone(),
            call_id: call.id,
            run: requested.run.clone(),
            deny: plan.deny.clone(),
            deny_ends_run: plan.deny_ends_run,
            input: plan.input.to_string(),
            after: plan.after,
            on_timeout: plan.on_timeout,
            legacy: plan.legacy,
        };
        planned.push(request);
        Some(ask)
    }

    /// What resolved an approval goes before the tool result that proves it: our answer in
    /// flight, or a cancel's dismissal (#20, answers before their effects).
    pub(super) fn answers_before_effects(
        &self,
        planned: &mut Vec<Planned>,
        state: &mut SessionState,
    ) -> Vec<cline_hub::AckFirst> {
        let attention = AttentionContext {
            capture: &self.capture,
            redactor: &self.redactor,
            control: false,
        };
        let tracker = &state.tracker;
        cline_hub::answers_before_effects(
            planned,
            &mut state.approvals,
            &|run| tracker.cancelling(run),
            &attention,
            super::now_ms(),
            &mut aep_core::id::new_id,
        )
    }

    /// Requests still pending when the plan ends the session are dismissed first (AEP-0002 §7.2).
    pub(super) fn dismiss_before_end(&self, planned: &mut Vec<Planned>, state: &mut SessionState) {
        let attention = AttentionContext {
            capture: &self.capture,
            redactor: &self.redactor,
            control: false,
        };
        cline_hub::dismiss_before_end(
            planned,
            &mut state.approvals,
            &attention,
            super::now_ms(),
            &mut aep_core::id::new_id,
        );
    }
}

/// When a hook fired: the payload's own `timestamp` (normalized to UTC milliseconds), else the
/// shim's clock at the firing, else now (a body posted by hand).
fn fired_at(payload: &HookPayload, firing: &Firing) -> String {
    let stamped = payload
        .timestamp
        .as_deref()
        .and_then(|t| aep_core::time::parse(t, true))
        .map(aep_core::time::millis);
    stamped
        .or_else(|| firing.fired.map(crate::firing::rfc3339))
        .unwrap_or_else(aep_core::id::now_rfc3339)
}

/// A guard's verdict on a hook's planned Events: its audit in the data of the call's own
/// `tool.requested` (the hook's first Event when it has none: a prompt), never on the
/// `session.started` or `run.started` a session's first hook also plans; and a blocked call's
/// `tool.denied` right after its `tool.requested`.
fn apply(
    verdict: &Verdict,
    payload: &HookPayload,
    tracker: &mut SessionTracker,
    ctx: &MapContext,
    planned: &mut Vec<Planned>,
) {
    let at = planned
        .iter()
        .position(|p| p.event.ty == aep_core::types::TOOL_REQUESTED)
        .unwrap_or(0);
    if let Some(first) = planned.get_mut(at) {
        let level = first.event.capture;
        if let Some(data) = first.event.data.as_mut() {
            data.extend(verdict.audit.clone());
            // Content only where the Event may carry it, redacted below `full` (AEP-0003 §9.2).
            if level > aep_core::Capture::Metadata {
                for (k, v) in &verdict.audit_content {
                    let v = match level {
                        aep_core::Capture::Full => v.clone(),
                        _ => ctx.redactor.redact_value(v),
                    };
                    data.insert(k.clone(), v);
                }
            }
        }
    }
    planned.extend(verdict.planned.iter().cloned());
    if let Some(denial) = &verdict.denied {
        if let Some(mut resolved) = tracker.plan_denied(payload, Some(&denial.rule), ctx, &mut aep_core::id::new_id) {
            if let Some(data) = resolved.event.data.as_mut() {
                data.extend(denial.shown.clone());
            }
            if let (true, Some(run)) = (denial.ends_run, resolved.run.as_deref()) {
                // Whatever end Cline then reports for the run, a guard stopped it.
                tracker.note_stop(run, &resolved.id, denial.data.clone());
            }
            planned.push(resolved);
        }
    }
}
