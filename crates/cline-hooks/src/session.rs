//! The per-session identity tracker: the one owned place that remembers a session's runs,
//! pending tool calls, delegation pairs and whether it started or ended.
//!
//! It turns [`Mapped`] events into [`Planned`] ones: each gets its id, its `run`, its `cause`,
//! or is dropped where the protocol forbids it. Pure state: ids come from the caller, there is
//! no clock and no I/O. [`SessionTracker::recover`] rebuilds the state from the events a
//! session already logged, so a daemon restart continues runs instead of orphaning them.
//!
//! Decisions (not pinned by the fixtures):
//! - Runs are tracked per Cline agent (`agent_id`): a subagent has runs of its own.
//! - A second terminal for a run is dropped (AEP-0002 §2: at most one terminal per run).
//! - A hook with no open run for its agent (the daemon was not running at `agent_start`
//!   and nothing was logged) is still emitted, without `run`: late and orphan events are
//!   legal, and inventing a run would be a lie.
//! - `session.ended` closes every open run first with `run.cancelled {by: "shutdown"}` and
//!   is emitted at most once (AEP-0002 §2).
//! - At most one open run per agent: a Cline agent runs one run at a time (`@cline/agents`
//!   0.0.86 `AgentRuntime.execute` throws "Agent runtime is already running"), so a start
//!   (`agent_start`, `agent_resume`) for an agent whose run is still open proves that run is
//!   over though its end hook never came (lost, or never fired). It is closed first, with
//!   `run.cancelled` and no `by` ([`crate::mapping::run_superseded`]), instead of staying open
//!   forever: an open run reads as a hung one (AEP-0002 §2.1). A child's delegation that a new
//!   start of the same child supersedes is stopped after that terminal, as Annex A.9 orders.
//! - Run terminals carry `duration_ms`: from the start's hook `timestamp` to the terminal's
//!   (the hook that closes the run: its end, abort or error, `session_shutdown`, the next
//!   start). After a restart the start time is the logged `run.started`'s `time`. A terminal
//!   the hub lane reports ([`SessionTracker::close_cancelled`]) has no hook timestamp and no
//!   duration.
//! - A run a control command asked to cancel ([`SessionTracker::note_cancel`]) ends as
//!   `run.cancelled {by: "control"}` caused by the command (AEP-0004 §6), whichever lane
//!   reports the abort first: a hook terminal that cancels it (`agent_abort`, or the
//!   `session_shutdown` Cline 3.0.65's hub fires after a `run.abort`), or the hub's own
//!   `run.aborted` ([`SessionTracker::close_cancelled`]). The other report finds the run
//!   closed and is dropped, as any second terminal is.
//! - Cline 2.x ([`crate::legacy`]) fires `TaskCancel` 60-200 ms after every `TaskComplete` of a
//!   successful run (its CLI disposes of the task), and the two hook processes can start in
//!   either order, so the daemon can see the cancel first. A 2.x `TaskCancel` is therefore
//!   held, not applied: the run's `TaskComplete` arriving after it makes the run
//!   `run.finished` and the cancel is dropped (as it is when the completion came first: the
//!   run is closed); any other hook of the session (but a `Notification`, which 2.x fires beside
//!   them) releases it first, as does the caller once its hold time has passed
//!   ([`SessionTracker::release_held`]): then it is `run.cancelled {by: "user"}`, unless the run's
//!   model request failed for good first (a `Notification {source: "api_req_failed"}`, which 2.x
//!   fires when it gives up on a 429 or 500, before or racing the `TaskCancel` it then fires
//!   though no user acted; or the task's record says so, [`SessionTracker::note_api_failure`]):
//!   then the run failed, `run.failed {reason: "api_req_failed", error:
//!   {type, status}}` with the provider's error type and HTTP status. The hold is
//!   memory only: a daemon restarted during it forgets the cancel, and the run ends when Cline's
//!   process does.
//! - Tool calls without a call id (2.x gives none) are paired by tool name and order: a result
//!   answers the oldest pending request of its tool (2.x runs one tool at a time).

use crate::mapping::{
    delegation_stopped, map_hook, run_cancelled_by_shutdown, run_superseded, session_started, Link, MapContext, Mapped,
};
use crate::payload::HookPayload;
use crate::timestamp::{duration_ms, epoch_ms};
use crate::usage::{self, HookUsage, Usage};
use aep_core::bounded::BoundedMap;
use aep_core::types::{
    DELEGATION_SUBAGENT_STARTED, DELEGATION_SUBAGENT_STOPPED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED,
    SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};

/// Extension attribute on `run.started`: the Cline agent the run belongs to, so recovery can
/// reopen it (AEP-0001 §5.4 names: `[a-z0-9]{1,20}`).
pub const AGENT_EXTENSION: &str = "clineagent";

/// Pending tool calls kept per session; older ones are forgotten (their results then carry no
/// `cause`), so a runaway session cannot grow memory without bound.
const MAX_PENDING_TOOLS: usize = 1024;

/// Tool names with pending id-less calls kept per session (see [`MAX_PENDING_TOOLS`]).
const MAX_PENDING_NAMES: usize = 256;

/// A Cline 2.x `TaskCancel` not applied yet (see the module docs).
#[derive(Debug, Clone)]
struct HeldCancel {
    agent: String,
    event: Mapped,
    at: Option<i64>,
}

/// An event with its identity decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub id: String,
    pub run: Option<String>,
    pub cause: Option<String>,
    /// The Cline agent of a `run.started` (see [`AGENT_EXTENSION`]).
    pub agent: Option<String>,
    pub event: Mapped,
}

#[derive(Debug, Clone)]
struct OpenRun {
    id: String,
    started_event: String,
    /// Opening order, so the session's active run is the oldest open one (the root agent's).
    order: u64,
    /// When it started (epoch ms), for the terminal's `duration_ms`.
    started_at: Option<i64>,
}

#[derive(Debug)]
pub struct SessionTracker {
    started: bool,
    ended: bool,
    /// The session lives in Cline's hub, which outlives `session_shutdown` (a `run.abort` or an
    /// Esc fires it): the hook then closes the open runs, and the session ends only when the
    /// hub says so.
    hosted: bool,
    runs: HashMap<String, OpenRun>,
    /// Agents whose last run was closed, so a duplicate terminal is recognized.
    closed: HashSet<String>,
    /// Pending tool call id → its `tool.requested` Event, the oldest forgotten first.
    tools: BoundedMap<String, String>,
    delegations: HashMap<String, String>,
    opened: u64,
    /// Run id → the control command that asked to cancel it, and what its terminal adds to
    /// its data (a budget's name, limit and cost).
    cancels: HashMap<String, (String, Map<String, Value>)>,
    /// Pending id-less tool calls: tool name → their `tool.requested` Events, oldest first.
    by_name: HashMap<String, VecDeque<String>>,
    held: Option<HeldCancel>,
    /// Cline 2.x said the open run's model request failed for good (see the module docs).
    api_failed: Option<ApiFailure>,
    /// The workspace folder the latest hook named (what a policy rule's `workspace` matches).
    workspace: Option<String>,
}

/// What a 2.x `Notification {source: "api_req_failed"}` said of the failure: its `message` is the
/// provider error's JSON (`status`, `details.type`), the same text as the task's `ask:
/// api_req_failed` message in its `ui_messages.json` (which the daemon's reconciler reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    status: Option<u64>,
    kind: Option<String>,
}

impl ApiFailure {
    fn of(payload: &HookPayload) -> Option<ApiFailure> {
        let n = payload.legacy.as_ref()?.notification.as_ref()?;
        if n.source.as_deref() != Some("api_req_failed") {
            return None;
        }
        Some(ApiFailure::said(n.message.as_deref().unwrap_or_default()))
    }

    /// The failure 2.x's error text `message` describes; a text that is not its JSON says
    /// neither status nor type.
    pub fn said(message: &str) -> ApiFailure {
        let said: Value = serde_json::from_str(message).unwrap_or_default();
        let token = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .filter(|t| !t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                .map(str::to_string)
        };
        ApiFailure {
            status: said.get("status").and_then(Value::as_u64),
            kind: token(said.pointer("/details/type")).or_else(|| token(said.pointer("/error/type"))),
        }
    }

    /// A run's `run.cancelled` (the held `TaskCancel`'s, or one the daemon synthesized) as the
    /// failure it was.
    pub fn fail(&self, mut event: Mapped) -> Mapped {
        event.ty = RUN_FAILED.to_string();
        event.severity = Some(aep_core::Severity::Error);
        if let Some(data) = event.data.as_mut() {
            data.remove("by");
            data.insert("reason".to_string(), json!("api_req_failed"));
            let kind = match (&self.kind, self.status) {
                (Some(kind), _) => kind.clone(),
                (None, Some(status)) => format!("http_{status}"),
                (None, None) => "api_req_failed".to_string(),
            };
            let mut error = json!({"type": kind});
            if let Some(status) = self.status {
                error["status"] = json!(status);
            }
            data.insert("error".to_string(), error);
        }
        event
    }
}

impl Default for SessionTracker {
    fn default() -> Self {
        SessionTracker {
            started: false,
            ended: false,
            hosted: false,
            runs: HashMap::new(),
            closed: HashSet::new(),
            tools: BoundedMap::new(MAX_PENDING_TOOLS),
            delegations: HashMap::new(),
            opened: 0,
            cancels: HashMap::new(),
            by_name: HashMap::new(),
            held: None,
            api_failed: None,
            workspace: None,
        }
    }
}

impl SessionTracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn has_ended(&self) -> bool {
        self.ended
    }

    /// Whether `session.started` was planned (or logged) already.
    pub fn has_started(&self) -> bool {
        self.started
    }

    /// Whether the session lives in Cline's hub (see [`SessionTracker::set_hosted`]).
    pub fn is_hosted(&self) -> bool {
        self.hosted
    }

    /// Marks the session as one Cline's hub hosts (its `session_shutdown` closes runs, not the
    /// session), or, with `false`, lets the next `session_shutdown` end it.
    pub fn set_hosted(&mut self, hosted: bool) {
        self.hosted = hosted;
    }

    /// The session's workspace folder, as the latest hook (or the logged `cwd`) said it.
    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    /// The run currently open for `agent`, if any.
    pub fn open_run(&self, agent: &str) -> Option<&str> {
        self.runs.get(agent).map(|r| r.id.as_str())
    }

    /// Any open run of the session (the hub speaks of the session's run, not an agent's):
    /// the root agent's when several are open.
    pub fn active_run(&self) -> Option<&str> {
        self.runs.values().min_by_key(|r| r.order).map(|r| r.id.as_str())
    }

    /// Whether a Cline 2.x `TaskCancel` is held (see the module docs): the caller releases it
    /// with [`SessionTracker::release_held`] once it has waited long enough for the completion.
    pub fn holds_cancel(&self) -> bool {
        self.held.is_some()
    }

    /// Cline 2.x's own record of the task says its model request failed for good (its `ask:
    /// api_req_failed`), read by the caller when the `Notification` that says so is late or lost:
    /// a held cancel is then that failure, as if the `Notification` had come.
    pub fn note_api_failure(&mut self, failure: ApiFailure) {
        self.api_failed.get_or_insert(failure);
    }

    /// Applies the held `TaskCancel`: `run.cancelled {by: "user"}` for its run if that is still
    /// open (nothing when it closed meanwhile).
    pub fn release_held(&mut self, new_id: &mut dyn FnMut() -> String) -> Vec<Planned> {
        let Some(held) = self.held.take() else {
            return Vec::new();
        };
        let event = self.cancel_or_failure(held.event);
        self.close_run(&held.agent, event, held.at, new_id)
            .into_iter()
            .collect()
    }

    /// A held 2.x cancel: the user's, or the run's model failure (see the module docs).
    fn cancel_or_failure(&mut self, event: Mapped) -> Mapped {
        match self.api_failed.take() {
            Some(failure) => failure.fail(event),
            None => event,
        }
    }

    /// A terminal for `agent`'s run: closes it, or, with none open, is emitted alone unless
    /// the agent's last run is closed already (a second terminal is dropped).
    fn close_run(
        &mut self,
        agent: &str,
        event: Mapped,
        at: Option<i64>,
        new_id: &mut dyn FnMut() -> String,
    ) -> Option<Planned> {
        match self.runs.remove(agent) {
            Some(open) => {
                self.closed.insert(agent.to_string());
                let (event, cause) = self.terminal(&open, event, at);
                Some(Planned {
                    id: new_id(),
                    run: Some(open.id),
                    cause: Some(cause),
                    agent: None,
                    event,
                })
            }
            None if self.closed.contains(agent) => None,
            None => Some(self.stand_alone(event, new_id)),
        }
    }

    /// The `tool.requested` Event of a tool call still waiting for its result.
    pub fn tool_requested(&self, call_id: &str) -> Option<&str> {
        self.tools.get(call_id).map(String::as_str)
    }

    /// Notes that control command `command` asked to cancel `run`; `false` when `run` is not
    /// open. Its terminal, from whichever lane reports it first, is then
    /// `run.cancelled {by: "control"}` with `cause` = the command.
    pub fn note_cancel(&mut self, run: &str, command: &str) -> bool {
        self.note_cancel_with(run, command, Map::new())
    }

    /// [`SessionTracker::note_cancel`] whose terminal also carries `data` (the daemon's budget
    /// names itself, its limit and the cost reached there).
    pub fn note_cancel_with(&mut self, run: &str, command: &str, data: Map<String, Value>) -> bool {
        if !self.runs.values().any(|r| r.id == run) {
            return false;
        }
        self.cancels.insert(run.to_string(), (command.to_string(), data));
        true
    }

    /// Whether a control cancel of `run` is noted and its terminal not reported yet.
    pub fn cancelling(&self, run: &str) -> bool {
        self.cancels.contains_key(run)
    }

    /// Forgets a cancel note (the hub refused the abort).
    pub fn forget_cancel(&mut self, run: &str) -> Option<String> {
        self.cancels.remove(run).map(|(command, _)| command)
    }

    /// The hub reported the session's run aborted: closes each still-open run whose cancel
    /// was noted with `event` (a `run.cancelled {by: "control"}`), caused by its command.
    /// Nothing when the hooks closed them already or no cancel was asked for.
    pub fn close_cancelled(&mut self, event: &Mapped, new_id: &mut dyn FnMut() -> String) -> Vec<Planned> {
        let mut noted: Vec<(String, OpenRun)> = self
            .runs
            .iter()
            .filter(|(_, run)| self.cancels.contains_key(&run.id))
            .map(|(agent, run)| (agent.clone(), run.clone()))
            .collect();
        noted.sort_by_key(|(_, run)| run.order);
        noted
            .into_iter()
            .map(|(agent, run)| {
                self.runs.remove(&agent);
                self.closed.insert(agent);
                let (command, extra) = self.cancels.remove(&run.id).expect("filtered on a note");
                let mut event = event.clone();
                if let Some(data) = event.data.as_mut() {
                    data.extend(extra);
                }
                Planned {
                    id: new_id(),
                    run: Some(run.id),
                    cause: Some(command),
                    agent: None,
                    event,
                }
            })
            .collect()
    }

    /// A run's terminal and its `cause`: the run's start, or, for a cancel a control command
    /// asked for, that command with `by: "control"`. `at` is when the run ended (epoch ms):
    /// with the start time it gives `duration_ms`.
    /// Opens `agent`'s run `run` (started by Event `started_event` at `started_at`, epoch ms) as
    /// the newest open run: one way for a run planned now and one recovered from the log.
    fn start_run(&mut self, agent: &str, run: String, started_event: String, started_at: Option<i64>) {
        self.opened += 1;
        let open = OpenRun {
            id: run,
            started_event,
            order: self.opened,
            started_at,
        };
        self.runs.insert(agent.to_string(), open);
        self.closed.remove(agent);
    }

    fn terminal(&mut self, run: &OpenRun, mut event: Mapped, at: Option<i64>) -> (Mapped, String) {
        if let (Some(duration), Some(data)) = (duration_ms(run.started_at, at), event.data.as_mut()) {
            data.insert("duration_ms".to_string(), json!(duration));
        }
        match self.cancels.remove(&run.id) {
            Some((command, extra)) if event.ty == RUN_CANCELLED => {
                if let Some(data) = event.data.as_mut() {
                    data.insert("by".to_string(), json!("control"));
                    data.extend(extra);
                }
                (event, command)
            }
            _ => (event, run.started_event.clone()),
        }
    }

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
        let cause = match &event.link {
            Link::ToolResolved { call_id } => self.tools.remove(call_id),
            Link::ToolResolvedByName { tool } => self.pop_by_name(tool),
            _ => None,
        };
        Some(self.in_run(payload.agent(), cause, event, new_id))
    }

    /// When the open run of `agent` started (epoch ms), if known: the start of the window
    /// whose model calls are that run's share.
    pub fn run_started_at(&self, agent: &str) -> Option<i64> {
        self.runs.get(agent).and_then(|r| r.started_at)
    }

    /// The agents with an open run, and when each started.
    pub fn open_agents(&self) -> Vec<(String, Option<i64>)> {
        self.runs.iter().map(|(a, r)| (a.clone(), r.started_at)).collect()
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
        let mut out = Vec::new();
        if !self.started {
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
            out.push(self.stand_alone(started, new_id));
        }
        let legacy = payload.legacy_hook();
        if let Some(held) = self.held.take() {
            match legacy {
                // The completion of the run the cancel was about: 2.x's trailing cancel.
                Some("TaskComplete") if held.agent == agent => {}
                Some("Notification" | "TaskCancel") => self.held = Some(held),
                _ => {
                    let event = self.cancel_or_failure(held.event);
                    out.extend(self.close_run(&held.agent, event, held.at, new_id));
                }
            }
        }
        if legacy == Some("Notification") {
            if let Some(failure) = ApiFailure::of(payload) {
                self.api_failed = Some(failure);
            }
        }
        let mut mapped = map_hook(payload, ctx);
        if legacy == Some("TaskCancel") {
            let closed = !self.runs.contains_key(&agent) && self.closed.contains(&agent);
            if !closed && self.held.is_none() {
                if let Some(event) = mapped.pop() {
                    self.held = Some(HeldCancel { agent, event, at });
                }
            }
            return out;
        }
        if mapped.iter().any(|m| m.link == Link::OpenRun) {
            self.api_failed = None; // a new run: an earlier failure is not its
            self.supersede(&agent, &mapped, at, ctx, new_id, &mut out);
        }
        let mut dropped_terminal = false;
        for event in mapped {
            match event.link.clone() {
                Link::None => out.push(self.stand_alone(event, new_id)),
                Link::OpenRun => {
                    let run = new_id();
                    let id = new_id();
                    // A run may be caused by the delegation that spawned it (same batch).
                    let cause = out
                        .iter()
                        .rev()
                        .find(|p| matches!(p.event.link, Link::DelegationStarted { .. }))
                        .map(|p| p.id.clone());
                    self.start_run(&agent, run.clone(), id.clone(), at);
                    out.push(Planned {
                        id,
                        run: Some(run),
                        cause,
                        agent: Some(agent.clone()),
                        event,
                    });
                }
                Link::CloseRun => match self.runs.remove(&agent) {
                    Some(open) => {
                        self.closed.insert(agent.clone());
                        let (event, cause) = self.terminal(&open, event, at);
                        let event = with_usage(event, usage.runs.get(&agent));
                        out.push(Planned {
                            id: new_id(),
                            run: Some(open.id),
                            cause: Some(cause),
                            agent: None,
                            event,
                        });
                    }
                    None if self.closed.contains(&agent) => dropped_terminal = true,
                    None => out.push(self.stand_alone(event, new_id)),
                },
                Link::ToolRequested { call_id } => {
                    let planned = self.in_run(&agent, None, event, new_id);
                    self.tools.insert(call_id, planned.id.clone());
                    out.push(planned);
                }
                Link::ToolResolved { call_id } => {
                    let cause = self.tools.remove(&call_id);
                    out.push(self.in_run(&agent, cause, event, new_id));
                }
                Link::ToolRequestedByName { tool } => {
                    let planned = self.in_run(&agent, None, event, new_id);
                    self.push_by_name(tool, planned.id.clone());
                    out.push(planned);
                }
                Link::ToolResolvedByName { tool } => {
                    let cause = self.pop_by_name(&tool);
                    out.push(self.in_run(&agent, cause, event, new_id));
                }
                Link::DelegationStarted { child } => {
                    let id = new_id();
                    self.delegations.insert(child, id.clone());
                    out.push(Planned {
                        id,
                        run: None,
                        cause: None,
                        agent: None,
                        event,
                    });
                }
                Link::DelegationStopped { child } => match self.delegations.remove(&child) {
                    Some(started) => out.push(Planned {
                        id: new_id(),
                        run: None,
                        cause: Some(started),
                        agent: None,
                        event,
                    }),
                    None if dropped_terminal => {}
                    None => out.push(self.stand_alone(event, new_id)),
                },
                Link::SessionEnded => {
                    if self.ended {
                        continue;
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
                        continue; // the hub's session goes on; the next run opens in it
                    }
                    self.ended = true;
                    out.push(self.stand_alone(with_usage(event, usage.session.as_ref()), new_id));
                }
            }
        }
        out
    }

    /// Before a start opens a run for `agent`: closes the agent's run still open (at most one
    /// open run per agent, see the module docs), then stops the delegation of a child this
    /// start opens anew, if the last one never stopped.
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

    fn push_by_name(&mut self, tool: String, requested: String) {
        if !self.by_name.contains_key(&tool) && self.by_name.len() >= MAX_PENDING_NAMES {
            self.by_name.clear(); // a runaway session: forget, as the bounded id map does
        }
        let pending = self.by_name.entry(tool).or_default();
        if pending.len() >= MAX_PENDING_TOOLS {
            pending.pop_front();
        }
        pending.push_back(requested);
    }

    fn pop_by_name(&mut self, tool: &str) -> Option<String> {
        let pending = self.by_name.get_mut(tool)?;
        let requested = pending.pop_front();
        if pending.is_empty() {
            self.by_name.remove(tool);
        }
        requested
    }

    fn stand_alone(&self, event: Mapped, new_id: &mut dyn FnMut() -> String) -> Planned {
        Planned {
            id: new_id(),
            run: None,
            cause: None,
            agent: None,
            event,
        }
    }

    fn in_run(&self, agent: &str, cause: Option<String>, event: Mapped, new_id: &mut dyn FnMut() -> String) -> Planned {
        Planned {
            id: new_id(),
            run: self.open_run(agent).map(str::to_string),
            cause,
            agent: None,
            event,
        }
    }

    /// Replays one logged event (in log order) into the state.
    pub fn recover(&mut self, event: &Value) {
        let s = |k: &str| event.get(k).and_then(Value::as_str);
        let ty = s("type").unwrap_or("");
        let id = s("id").unwrap_or("").to_string();
        match ty {
            SESSION_STARTED => {
                self.started = true;
                // Logged at `redacted` and above only; redaction writes the home as `~`, which
                // is no folder a rule can match.
                if let Some(cwd) = event
                    .pointer("/data/cwd")
                    .and_then(Value::as_str)
                    .filter(|c| c.starts_with('/'))
                {
                    self.workspace = Some(cwd.to_string());
                }
            }
            SESSION_ENDED => {
                self.started = true;
                self.ended = true;
            }
            RUN_STARTED => {
                self.started = true;
                // No `clineagent`: the payloads named no agent (Cline 2.x, the fixtures).
                if let (agent, Some(run)) = (s(AGENT_EXTENSION).unwrap_or(""), s("run")) {
                    self.start_run(agent, run.to_string(), id, s("time").and_then(epoch_ms));
                }
            }
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => {
                if let Some(run) = s("run") {
                    let agent = self.runs.iter().find(|(_, r)| r.id == run).map(|(a, _)| a.clone());
                    if let Some(agent) = agent {
                        self.runs.remove(&agent);
                        self.closed.insert(agent);
                    }
                }
            }
            TOOL_REQUESTED => match event.pointer("/data/tool/call_id").and_then(Value::as_str) {
                Some(call) => {
                    self.tools.insert(call.to_string(), id);
                }
                None => {
                    if let Some(tool) = tool_name(event) {
                        self.push_by_name(tool.to_string(), id);
                    }
                }
            },
            TOOL_COMPLETED | TOOL_FAILED | TOOL_DENIED => {
                match event.pointer("/data/tool/call_id").and_then(Value::as_str) {
                    Some(call) => {
                        self.tools.remove(call);
                    }
                    None => {
                        if let Some(tool) = tool_name(event) {
                            self.pop_by_name(tool);
                        }
                    }
                }
            }
            DELEGATION_SUBAGENT_STARTED => {
                if let Some(child) = s("subject") {
                    self.delegations.insert(child.to_string(), id);
                }
            }
            DELEGATION_SUBAGENT_STOPPED => {
                if let Some(child) = s("subject") {
                    self.delegations.remove(child);
                }
            }
            _ => {}
        }
    }
}

/// A logged tool event's tool name: `data.tool.name`, else its `subject` (at capture `none`).
fn tool_name(event: &Value) -> Option<&str> {
    event
        .pointer("/data/tool/name")
        .or_else(|| event.get("subject"))
        .and_then(Value::as_str)
}

/// `event` with `usage` in its data (nothing at capture `none`, where there is no data).
fn with_usage(mut event: Mapped, usage: Option<&Usage>) -> Mapped {
    if let (Some(u), Some(data)) = (usage, event.data.as_mut()) {
        usage::attach(data, u);
    }
    event
}

impl Planned {
    /// The finished Event: the planned identity plus what only the daemon knows (where the
    /// session's events come from, the time, the sequence position). `agent` is `cline`.
    pub fn to_envelope(
        &self,
        source: &str,
        session: &str,
        time: &str,
        position: aep_core::sequence::Position,
    ) -> Result<aep_core::Envelope, aep_core::EnvelopeError> {
        let m = &self.event;
        let mut e = aep_core::Envelope::new(self.id.clone(), &m.ty, time, source, "cline")?;
        e.session = Some(session.to_string());
        e.run = self.run.clone();
        e.step = m.step.clone();
        e.subject = m.subject.clone();
        e.seq = Some(position.seq);
        e.epoch = Some(position.epoch);
        e.cause = self.cause.clone();
        e.severity = m.severity;
        e.capture = Some(m.capture);
        e.data = m.data.clone();
        if let Some(agent) = self.agent.as_deref().filter(|a| !a.is_empty()) {
            e.set_extension(AGENT_EXTENSION, aep_core::ExtValue::Str(agent.to_string()))?;
        }
        Ok(e)
    }
}
