//! What a guard above the lane (`crate::guard`: the policy and the budgets) answers a hook
//! before Cline goes on: the lane asks it under the session's lock, while it plans the hook's
//! Events, so the decision, its audit on the hook's own Events and the answer the shim prints
//! are one step, and a copy of the same firing (Cline runs every hook folder's file) gets the
//! same answer ([`Sessions::ingest_judged`](super::Sessions::ingest_judged)).
//!
//! The lane knows nothing of rules or money: a [`Judge`] is handed in by the hook door, the
//! dependency inverted as the command intake's [`crate::control::Link`] is.

use cline_hooks::{HookPayload, Planned, SessionTracker};
use serde_json::{Map, Value};

/// A guard's answer to one hook.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// What the shim prints on stdout for Cline (its hook control, e.g. `{"cancel": true,
    /// "errorMessage": ...}`); `None`: Cline goes on as it would have.
    pub control: Option<Value>,
    /// Fields added to the `data` of the hook's first Event (its `tool.requested`): the rule,
    /// the answer, why, where it was enforced. Nothing at capture `none`, where there is no data.
    pub audit: Map<String, Value>,
    /// Audit members that quote content (why a rule matched quotes the command and its paths):
    /// added only where the Event's capture allows content, redacted at `redacted`
    /// (AEP-0003 §9.2); never at `metadata`.
    pub audit_content: Map<String, Value>,
    /// The tool call was blocked: the hook's `tool.requested` is resolved by a `tool.denied`
    /// naming the rule, in the same write.
    pub denied: Option<Denial>,
    /// Events the guard adds to the hook's write, after its first (a budget's notices).
    pub planned: Vec<Planned>,
    /// The call is held at its hook while a person answers (an `ask` rule where Cline asks
    /// nobody): the lane plans the `attention.requested` and holds the call
    /// ([`crate::lane::asks`]).
    pub ask: Option<AskPlan>,
}

/// What a guard's `ask` holds a call for.
#[derive(Debug, Clone, PartialEq)]
pub struct AskPlan {
    pub rule: String,
    /// What Cline is told on a deny (soft where Cline has one, else a cancel).
    pub deny: Value,
    pub deny_ends_run: bool,
    /// How long a person has (the rule's timeout, within Cline's deadline for the hook).
    pub after: std::time::Duration,
    pub on_timeout: crate::lane::asks::OnTimeout,
    /// The call's tool (3.x name) and input, for the request's prompt.
    pub tool: String,
    pub input: Value,
    pub legacy: bool,
}

/// A tool call a guard blocked.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// What blocked it, as `tool.denied.rule` says: a policy rule's name, or a budget's
    /// (`budget.run`).
    pub rule: String,
    /// The control ends the run (a cancel): its terminal, whatever Cline reports, is
    /// `run.cancelled {by: "policy"}` with [`Denial::data`], caused by the `tool.denied`.
    pub ends_run: bool,
    /// What that terminal carries: `{rule}` or `{budget: {..}}`.
    pub data: Map<String, Value>,
    /// What the `tool.denied` shows besides the rule (metadata: the operator's own words):
    /// `cline.policy_line`, `cline.policy_reason`.
    pub shown: Map<String, Value>,
}

/// Decides a hook, given the session's tracker (its runs and workspace) as planned so far, and
/// Cline's store as read for this hook (when the judge asked for it: [`Judging::reads_store`]).
pub type Judge<'a> =
    &'a (dyn Fn(&HookPayload, &SessionTracker, Option<&cline_usage::Session>) -> Option<Verdict> + Sync);

/// A [`Judge`] and whether it wants Cline's store read for the steps it decides (a
/// `tool_call`, a `prompt_submit`): the budgets count what a run without the hub has spent so
/// far from it. Read off the session's lock, as every store read is.
#[derive(Clone, Copy)]
pub struct Judging<'a> {
    pub judge: Judge<'a>,
    pub reads_store: bool,
}
