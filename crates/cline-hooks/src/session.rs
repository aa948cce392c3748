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
//!
//! Where each part lives: this file holds the state and the steps every lane shares (open and
//! close a run, pair a tool call, note a control cancel); `plan.rs` what one hook does to it;
//! `held.rs` Cline 2.x's held `TaskCancel`; `recover.rs` the state rebuilt from the log;
//! `planned.rs` the [`Planned`] events the tracker hands out.

mod held;
mod plan;
mod planned;
mod recover;

pub use held::ApiFailure;
pub use planned::{Planned, AGENT_EXTENSION};

use crate::mapping::Mapped;
use crate::timestamp::duration_ms;
use crate::usage::{self, Usage};
use aep_core::bounded::{BoundedMap, BoundedSet};
use aep_core::types::{RUN_CANCELLED, RUN_FAILED};
use held::HeldCancel;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};

/// Pending tool calls kept per session; older ones are forgotten (their results then carry no
/// `cause`), so a runaway session cannot grow memory without bound.
const MAX_PENDING_TOOLS: usize = 1024;

/// Tool names with pending id-less calls kept per session (see [`MAX_PENDING_TOOLS`]).
const MAX_PENDING_NAMES: usize = 256;

#[derive(Debug, Clone)]
struct OpenRun {
    id: String,
    started_event: String,
    /// Opening order, so the session's active run is the oldest open one (the root agent's).
    order: u64,
    /// When it started (epoch ms), for the terminal's `duration_ms`.
    started_at: Option<i64>,
}

/// What asked to end a run: its cause (a control command, or a guard's `tool.denied`), who
/// (`by`: `control` or `policy`), and what its terminal adds (a budget, a rule).
#[derive(Debug, Clone)]
struct Stopping {
    cause: String,
    by: &'static str,
    data: Map<String, Value>,
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
    /// Run id → what asked to end it: a control command's cancel, or a guard's stop.
    cancels: HashMap<String, Stopping>,
    /// Tool calls a guard denied: their `tool.denied` resolved them, so the result Cline
    /// still reports (a call whose input was taken away fails) is no second terminal.
    denied: BoundedSet<String>,
    /// Pending id-less tool calls: tool name → their `tool.requested` Events, oldest first.
    by_name: HashMap<String, VecDeque<String>>,
    held: Option<HeldCancel>,
    /// Cline 2.x said the open run's model request failed for good (see the module docs).
    api_failed: Option<ApiFailure>,
    /// The workspace folder the latest hook named (what a policy rule's `workspace` matches).
    workspace: Option<String>,
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
            denied: BoundedSet::new(MAX_PENDING_TOOLS),
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

    /// The session is over: `session.ended` was emitted and no run is open. A session Cline
    /// takes up again after its end (`cline --id`) is open while its new run is (the end, once
    /// emitted, stays: AEP-0002 §2 convention 5 allows later Events, never a second end).
    pub fn has_ended(&self) -> bool {
        self.ended && self.runs.is_empty()
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

    /// A terminal for `agent`'s run: closes it, or, with none open, is emitted alone unless
    /// the agent's last run is closed already (a second terminal is dropped). A closed run's
    /// terminal carries `usage`, what the run consumed, when the daemon read it.
    fn close_run(
        &mut self,
        agent: &str,
        event: Mapped,
        at: Option<i64>,
        usage: Option<&Usage>,
        new_id: &mut dyn FnMut() -> String,
    ) -> Option<Planned> {
        match self.runs.remove(agent) {
            Some(open) => {
                self.closed.insert(agent.to_string());
                let (event, cause) = self.terminal(&open, event, at);
                let event = with_usage(event, usage);
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
        self.note(run, command, "control", data)
    }

    /// Notes that a guard stopped `run` at its tool call `denied` (the `tool.denied` Event):
    /// whatever terminal Cline then reports for it (an error, an abort, a shutdown), it is
    /// `run.cancelled {by: "policy"}` with `data` (the rule, or the budget), caused by the
    /// denial (AEP-0002 §5.3). `false` when `run` is not open.
    pub fn note_stop(&mut self, run: &str, denied: &str, data: Map<String, Value>) -> bool {
        self.note(run, denied, "policy", data)
    }

    fn note(&mut self, run: &str, cause: &str, by: &'static str, data: Map<String, Value>) -> bool {
        if !self.runs.values().any(|r| r.id == run) {
            return false;
        }
        self.cancels.insert(
            run.to_string(),
            Stopping {
                cause: cause.to_string(),
                by,
                data,
            },
        );
        true
    }

    /// Whether the result of tool call `call_id` comes after a guard denied it.
    pub fn was_denied(&self, call_id: &str) -> bool {
        self.denied.contains(call_id)
    }

    /// Whether a control cancel of `run` is noted and its terminal not reported yet.
    pub fn cancelling(&self, run: &str) -> bool {
        self.cancels.contains_key(run)
    }

    /// Forgets a cancel note (the hub refused the abort).
    pub fn forget_cancel(&mut self, run: &str) -> Option<String> {
        self.cancels.remove(run).map(|stopping| stopping.cause)
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
                let stopping = self.cancels.remove(&run.id).expect("filtered on a note");
                let mut event = event.clone();
                if let Some(data) = event.data.as_mut() {
                    data.insert("by".to_string(), json!(stopping.by));
                    data.extend(stopping.data);
                }
                Planned {
                    id: new_id(),
                    run: Some(run.id),
                    cause: Some(stopping.cause),
                    agent: None,
                    event,
                }
            })
            .collect()
    }

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

    /// A run's terminal and its `cause`: the run's start, or, for a cancel a control command
    /// asked for, that command with `by: "control"`. `at` is when the run ended (epoch ms):
    /// with the start time it gives `duration_ms`.
    fn terminal(&mut self, run: &OpenRun, mut event: Mapped, at: Option<i64>) -> (Mapped, String) {
        if let (Some(duration), Some(data)) = (duration_ms(run.started_at, at), event.data.as_mut()) {
            data.insert("duration_ms".to_string(), json!(duration));
        }
        match self.cancels.remove(&run.id) {
            Some(stopping) if event.ty == RUN_CANCELLED || (stopping.by == "policy" && event.ty == RUN_FAILED) => {
                // A run a guard stopped reports it as an error (Cline 3.0.65 fires
                // `agent_error` for a hook's cancel), or a shutdown: it was cancelled, by policy.
                event.ty = RUN_CANCELLED.to_string();
                event.severity = None;
                if let Some(data) = event.data.as_mut() {
                    // What the run spent stays (#46: a stopped run's tokens are counted).
                    data.retain(|k, _| k == "duration_ms" || k == "cost" || k.starts_with("gen_ai.usage."));
                    data.insert("by".to_string(), json!(stopping.by));
                    data.extend(stopping.data);
                }
                (event, stopping.cause)
            }
            Some(stopping) => {
                // The run ended otherwise first (it finished): the note is moot.
                let _ = stopping;
                (event, run.started_event.clone())
            }
            None => (event, run.started_event.clone()),
        }
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
}

/// `event` with `usage` in its data (nothing at capture `none`, where there is no data).
fn with_usage(mut event: Mapped, usage: Option<&Usage>) -> Mapped {
    if let (Some(u), Some(data)) = (usage, event.data.as_mut()) {
        usage::attach(data, u);
    }
    event
}
