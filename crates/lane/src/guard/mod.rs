//! Guardrails where the tool call is decided: the hook door's answer to Cline.
//!
//! Cline waits on its `tool_call` hook (2.x: `PreToolUse`) before every tool, in every mode
//! (hub or not, auto-approve or not, TUI, `--json`), and reads the hook's stdout as control.
//! With a policy (`AEP_CLINE_POLICY`) or budgets (`AEP_CLINE_BUDGET`) set, the daemon decides
//! each such hook while it records it ([`crate::lane::Sessions::ingest_judged`]) and the shim
//! prints the answer; without either, nothing is decided and the shim prints nothing, as ever.
//!
//! - [`decide`]: the pure decision (the policy's answer, a budget reached) and the control
//!   that carries it out.
//! - this file: the daemon's side: the policy in force, the budgets' ledger, the clock.
//!
//! One decision per firing: Cline runs the hook file of every hook folder, and each copy of a
//! firing gets the answer the first one got (the lane keeps it by delivery id).

pub mod decide;
pub mod task_end;

use crate::budget::Watch;
use crate::lane::Verdict;
use crate::policy::Active;
use aep_core::types::ATTENTION_REQUESTED;
use cline_hooks::{HookPayload, SessionTracker};
use std::sync::Arc;

pub use decide::{control_for, Step};

/// The policy and the budgets, as the hook door asks them.
pub struct Guard {
    policy: Option<Arc<Active>>,
    budget: Arc<Watch>,
    hub: Hub,
    /// The capture ceilings: a budget notice carries its data only where they allow.
    capture: aep_core::CapturePolicy,
}

/// What the hub tap does for the sessions Cline's hub hosts: there the hub decides, as it did
/// before the hook door did (a deny at the hub's approval fails only the tool; a budget cancels
/// through the hub at the model call that crossed it), and the hook decides every other session,
/// and the policy of a hosted one whose tools Cline auto-approves (no approval would come).
#[derive(Debug, Clone, Copy, Default)]
pub struct Hub {
    /// The tap is on (`AEP_CLINE_HUB`): the budgets of hosted sessions cancel through it.
    pub tapped: bool,
    /// It answers (`AEP_CLINE_HUB_CONTROL=1`): the policy of hosted sessions answers there.
    pub answers: bool,
}

impl Guard {
    pub fn new(policy: Option<Arc<Active>>, budget: Arc<Watch>, hub: Hub, capture: aep_core::CapturePolicy) -> Guard {
        Guard {
            policy,
            budget,
            hub,
            capture,
        }
    }

    /// Whether the hooks it decides need Cline's store read: budgets are set (a run without
    /// the hub is charged from it at each step).
    pub fn counts_from_store(&self) -> bool {
        !self.budget.budgets().is_empty()
    }

    /// Whether anything is to be decided: a policy, or a budget.
    pub fn is_on(&self) -> bool {
        self.policy.is_some() || !self.budget.budgets().is_empty()
    }

    /// The verdict on one hook, under its session's lock (the budgets' ledger lock is taken
    /// inside it, the one order); `None` for a hook nobody decides. `hub_asks`: the hub said
    /// this session's tools wait on an approval (`autoApproveTools: false`), where the tap's
    /// policy answers; otherwise (auto-approve, or not said) the hook is the only door a tool
    /// passes, and the policy is decided here even for a session the hub hosts.
    ///
    /// `store`: Cline's store as read for this hook ([`Guard::counts_from_store`]): what a run
    /// without the hub has spent so far is charged before the budgets are asked, so the tool
    /// call after a model call that passed a limit does not run.
    pub fn judge(
        &self,
        payload: &HookPayload,
        tracker: &SessionTracker,
        hub_asks: bool,
        store: Option<&cline_usage::Session>,
    ) -> Option<Verdict> {
        let hosted = tracker.is_hosted();
        let step = Step::of(payload)?;
        let session = payload.session_key()?;
        let run = match step {
            Step::Tool { .. } => tracker.open_run(payload.agent()).or_else(|| tracker.active_run()),
            Step::Prompt => None,
        };
        let mut notices = Vec::new();
        let over = match hosted && self.hub.tapped {
            true => None,
            false => {
                if let Some(total) = store.and_then(crate::lane::run_usage::session_cost) {
                    let level = self.capture.ceiling(ATTENTION_REQUESTED);
                    // A prompt starts a run not yet known: its spend counts in the session and day.
                    notices = self.budget.store_spend(session, run, total, tracker.workspace(), level);
                }
                self.budget.over(session, run, tracker.workspace())
            }
        };
        let policy = match hosted && self.hub.answers && hub_asks {
            true => None,
            false => self.policy.as_ref().map(|p| p.current()),
        };
        let home = std::env::var("HOME").ok();
        let place = decide::Place {
            workspace: tracker.workspace(),
            home: home.as_deref(),
            follow: &crate::policy::links::follow,
        };
        let over = over.as_ref().map(|(crossing, words)| decide::Over {
            crossing,
            words,
            stop: self.budget.stop(),
        });
        let mut verdict = decide::decide(&step, policy.as_deref(), &place, over.as_ref());
        if !notices.is_empty() {
            verdict.get_or_insert_with(Verdict::default).planned = notices;
        }
        if let Some(v) = &verdict {
            tracing::info!(
                %session,
                hook = %payload.hook_name,
                stopped = v.control.is_some(),
                audit = %serde_json::Value::Object(v.audit.clone()),
                "guard: decided at the hook"
            );
            // The daemon's log holds no content above debug: why a rule matched quotes it.
            if let Some(why) = v.audit_content.get(decide::WHY) {
                tracing::debug!(%session, %why, "guard: why");
            }
        }
        verdict
    }
}
