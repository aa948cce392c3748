//! The plan of what one hook does to a session: its mapped events, each given its id, its
//! `run` and its `cause`, or dropped where the protocol forbids it.
//!
//! Apart from the state it changes ([`crate::session`]) so each [`Link`] reads as one short
//! step: a helper per link family (runs, tools, delegations, the session's end), all pure
//! (payload, usage and ids in, [`Planned`] out; no clock, no I/O).

use super::{with_usage, OpenRun, Planned, SessionTracker};
use crate::mapping::{
    delegation_stopped, map_hook, run_cancelled_by_shutdown, run_superseded, session_started, Link, MapContext, Mapped,
};
use crate::payload::HookPayload;
use crate::timestamp::epoch_ms;
use crate::usage::{self, HookUsage};

impl SessionTracker {
    /// Maps one payload and plans its events. `new_id` mints event and run ids.
    pub fn plan(
        &mut self,
        payload: &HookPayload,
        ctx: &MapContext,
        new_id: &mut dyn FnMut() -> String,
    ) -> Vec<Planned> {
        self.plan_with(payload, ctx, &HookUsage::default(), new_id)
    }

    /// A tool call a guard blocked before it ran: its `tool.denied` (AEP-0002 §4.1, a block
    /// with no human loop), planned as the resolution of the call's `tool.requested`, as its
    /// `tool_result` would have been. `None` for a payload that is no `tool_call`.
    pub fn plan_denied(
        &mut self,
        payload: &HookPayload,
        rule: Option<&str>,
        ctx: &MapContext,
        new_id: &mut dyn FnMut() -> String,
    ) -> Option<Planned> {
        let event = crate::mapping::tool_denied(payload, rule, ctx)?;
        Some(self.plan_denial(payload.agent(), event, new_id))
    }

    /// [`SessionTracker::plan_denied`] for a call whose hook is no longer at hand (a person
    /// denied a call the hook held): `agent`'s call `call_id` of tool `tool`.
    pub fn plan_denied_call(
        &mut self,
        agent: &str,
        tool: &str,
        call_id: Option<&str>,
        rule: Option<&str>,
        ctx: &MapContext,
        new_id: &mut dyn FnMut() -> String,
    ) -> Planned {
        let event = crate::mapping::tool_denied_call(tool, call_id, rule, None, ctx);
        self.plan_denial(agent, event, new_id)
    }

    fn plan_denial(&mut self, agent: &str, event: Mapped, new_id: &mut dyn FnMut() -> String) -> Planned {
        let cause = match &event.link {
            Link::ToolResolved { call_id } => {
                self.denied.insert(call_id.clone());
                self.tools.remove(call_id)
            }
            Link::ToolResolvedByName { tool } => self.pop_by_name(tool),
            _ => None,
        };
        self.in_run(agent, cause, event, new_id)
    }

    /// [`SessionTracker::plan`] with what the daemon read of the session's usage: each run
    /// this hook closes carries its agent's entry of `usage.runs`, `session.ended` the
    /// session's, `session.started` the model ([`crate::usage`]).
    pub fn plan_with(
        &mut self,
        payload: &HookPayload,
        ctx: &MapContext,
        usage: &HookUsage,
        new_id: &mut dyn FnMut() -> String,
    ) -> Vec<Planned> {
        let agent = payload.agent().to_string();
        if let Some(ws) = payload.workspace() {
            self.workspace = Some(ws.to_string());
        }
        let at = payload.timestamp.as_deref().and_then(epoch_ms);
        let mut out: Vec<Planned> = self.open_session(payload, ctx, usage, new_id).into_iter().collect();
        let legacy = payload.legacy_hook();
        out.extend(self.settle_held(legacy, &agent, new_id));
        self.note_notification(payload);
        let mut mapped = map_hook(payload, ctx);
        if legacy == Some("TaskCancel") {
            let run_usage = usage.runs.get(&agent);
            self.hold_cancel(agent, mapped.pop(), at, run_usage);
            return out;
        }
        if mapped.iter().any(|m| m.link == Link::OpenRun) {
            self.api_failed = None; // a new run: an earlier failure is not its
            self.supersede(&agent, &mapped, at, ctx, new_id, &mut out);
        }
        // A terminal dropped as a second one drops its delegation's stop with it.
        let mut dropped_terminal = false;
        for event in mapped {
            match event.link.clone() {
                Link::None => out.push(self.stand_alone(event, new_id)),
                Link::OpenRun => {
                    let planned = self.open_planned_run(&agent, event, at, &out, new_id);
                    out.push(planned);
                }
                Link::CloseRun => match self.close_run(&agent, event, at, usage.runs.get(&agent), new_id) {
                    Some(planned) => out.push(planned),
                    None => dropped_terminal = true,
                },
                Link::ToolRequested { .. }
                | Link::ToolResolved { .. }
                | Link::ToolRequestedByName { .. }
                | Link::ToolResolvedByName { .. } => out.extend(self.plan_tool(&agent, event, new_id)),
                Link::DelegationStarted { .. } | Link::DelegationStopped { .. } => {
                    out.extend(self.plan_delegation(event, dropped_terminal, new_id));
                }
                Link::SessionEnded => out.extend(self.end_session(event, at, ctx, usage, new_id)),
            }
        }
        out
    }

    /// `session.started`, the first time the session is seen, with the model the daemon read
    /// ([`crate::usage`]); `None` once it was planned (or logged).
    fn open_session(
        &mut self,
        payload: &HookPayload,
        ctx: &MapContext,
        usage: &HookUsage,
        new_id: &mut dyn FnMut() -> String,
    ) -> Option<Planned> {
        if self.started {
            return None;
        }
        self.started = true;
        let mut started = session_started(payload, ctx);
        if let Some(data) = started.data.as_mut() {
            usage::attach_model(
                data,
                usage.model.as_deref(),
                usage.provider.as_deref(),
                usage.app.as_deref(),
            );
        }
        Some(self.stand_alone(started, new_id))
    }

    /// Before a start opens a run for `agent`: closes the agent's run still open (at most one
    /// open run per agent, see the [`crate::session`] docs), then stops the delegation of a
    /// child this start opens anew, if the last one never stopped.
    fn supersede(
        &mut self,
        agent: &str,
        mapped: &[Mapped],
        at: Option<i64>,
        ctx: &MapContext,
        new_id: &mut dyn FnMut() -> String,
        out: &mut Vec<Planned>,
    ) {
        if let Some(open) = self.runs.remove(agent) {
            let (event, cause) = self.terminal(&open, run_superseded(ctx), at);
            out.push(Planned {
                id: new_id(),
                run: Some(open.id),
                cause: Some(cause),
                agent: None,
                event,
            });
        }
        for m in mapped {
            if let Link::DelegationStarted { child } = &m.link {
                if let Some(started) = self.delegations.remove(child) {
                    out.push(Planned {
                        id: new_id(),
                        run: None,
                        cause: Some(started),
                        agent: None,
                        event: delegation_stopped(child, ctx),
                    });
                }
            }
        }
    }

    /// `run.started` (`Link::OpenRun`): opens a run for `agent`, caused by the delegation that
    /// spawned it when that is in the same batch (`planned` so far).
    fn open_planned_run(
        &mut self,
        agent: &str,
        event: Mapped,
        at: Option<i64>,
        planned: &[Planned],
        new_id: &mut dyn FnMut() -> String,
    ) -> Planned {
        let run = new_id();
        let id = new_id();
        let cause = planned
            .iter()
            .rev()
            .find(|p| matches!(p.event.link, Link::DelegationStarted { .. }))
            .map(|p| p.id.clone());
        self.start_run(agent, run.clone(), id.clone(), at);
        Planned {
            id,
            run: Some(run),
            cause,
            agent: Some(agent.to_string()),
            event,
        }
    }

    /// A tool event in `agent`'s open run: a request is remembered (by call id, or by tool name
    /// when the call has none), a result is caused by the request it answers.
    /// A tool Event, paired with its call; `None` for the result of a call a guard denied
    /// (its `tool.denied` was its terminal).
    fn plan_tool(&mut self, agent: &str, event: Mapped, new_id: &mut dyn FnMut() -> String) -> Option<Planned> {
        Some(match event.link.clone() {
            Link::ToolRequested { call_id } => {
                let planned = self.in_run(agent, None, event, new_id);
                self.tools.insert(call_id, planned.id.clone());
                planned
            }
            Link::ToolRequestedByName { tool } => {
                let planned = self.in_run(agent, None, event, new_id);
                self.push_by_name(tool, planned.id.clone());
                planned
            }
            Link::ToolResolved { call_id } if self.was_denied(&call_id) => {
                self.denied.remove(&call_id);
                return None;
            }
            Link::ToolResolved { call_id } => {
                let cause = self.tools.remove(&call_id);
                self.in_run(agent, cause, event, new_id)
            }
            Link::ToolResolvedByName { tool } => {
                let cause = self.pop_by_name(&tool);
                self.in_run(agent, cause, event, new_id)
            }
            _ => self.in_run(agent, None, event, new_id),
        })
    }

    /// A `delegation.subagent.*` event: a start is remembered for its child, a stop is caused
    /// by it; a stop with no start stands alone, unless its run's terminal was dropped as a
    /// second one (`dropped_terminal`): then it is the second stop and is dropped too.
    fn plan_delegation(
        &mut self,
        event: Mapped,
        dropped_terminal: bool,
        new_id: &mut dyn FnMut() -> String,
    ) -> Option<Planned> {
        match event.link.clone() {
            Link::DelegationStarted { child } => {
                let id = new_id();
                self.delegations.insert(child, id.clone());
                Some(Planned {
                    id,
                    run: None,
                    cause: None,
                    agent: None,
                    event,
                })
            }
            Link::DelegationStopped { child } => match self.delegations.remove(&child) {
                Some(started) => Some(Planned {
                    id: new_id(),
                    run: None,
                    cause: Some(started),
                    agent: None,
                    event,
                }),
                None if dropped_terminal => None,
                None => Some(self.stand_alone(event, new_id)),
            },
            _ => Some(self.stand_alone(event, new_id)),
        }
    }

    /// `session.ended`: every open run is closed first, oldest first, with
    /// `run.cancelled {by: "shutdown"}`, then the session ends, at most once (AEP-0002 §2): a
    /// session taken up again after its end only has its runs closed.
    /// A hosted session only closes its runs: the hub's session goes on.
    fn end_session(
        &mut self,
        event: Mapped,
        at: Option<i64>,
        ctx: &MapContext,
        usage: &HookUsage,
        new_id: &mut dyn FnMut() -> String,
    ) -> Vec<Planned> {
        let mut out = Vec::new();
        if self.ended && self.runs.is_empty() {
            return out;
        }
        let mut open: Vec<(String, OpenRun)> = self.runs.drain().collect();
        open.sort_by_key(|(_, run)| run.order);
        for (agent, run) in open {
            let (event, cause) = self.terminal(&run, run_cancelled_by_shutdown(ctx), at);
            let event = with_usage(event, usage.runs.get(&agent));
            self.closed.insert(agent);
            out.push(Planned {
                id: new_id(),
                run: Some(run.id),
                cause: Some(cause),
                agent: None,
                event,
            });
        }
        if self.hosted {
            return out; // the hub's session goes on; the next run opens in it
        }
        if self.ended {
            // Taken up again after its end (`cline --id`): its runs close, and the session,
            // which ended once, never ends twice (AEP-0002 §2 convention 5).
            return out;
        }
        self.ended = true;
        out.push(self.stand_alone(with_usage(event, usage.session.as_ref()), new_id));
        out
    }
}
