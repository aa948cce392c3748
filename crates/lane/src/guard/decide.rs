//! The guard's decision, pure: a hook Cline waits on, the policy and what the budgets say in,
//! the control for Cline and the audit out. No I/O, no clock, no environment.
//!
//! What Cline does with the control (docs/cline-vendor-facts.md, "Hook control at `tool_call`"):
//! Cline 3.0.65 reads `cancel`, `context`, `errorMessage` and `overrideInput` from a `tool_call`
//! hook. `cancel` ends the whole run ("aborted by another client"). `overrideInput: null` makes
//! each of Cline's own tools fail its input check before it acts (`✖ Invalid input`) while the
//! run goes on, and `context` is given to the model with the failed result: the soft deny.
//! Cline 2.18 reads `cancel` (the tool does not run; the task stops) and `contextModification`
//! only. So:
//! - a deny (a rule, or a budget reached at a tool call) of one of Cline 3.x's own tools, unless
//!   the rule (or the budgets' setting) says `stop = "run"`: `{"overrideInput": null, "context":
//!   why}`; the call does nothing and fails, the model is told which rule refused it and not to
//!   try another way, the run goes on;
//! - a deny of an MCP tool (its server is called whatever its input), of a 2.x tool, with
//!   `stop = "run"`, and a budget reached at a prompt: `{"cancel": true, "errorMessage": why}`;
//!   the run ends, `run.cancelled {by: "policy"}` caused by the denial;
//! - `approve`: nothing (Cline goes on; on the hub its approval, if it asks one, is answered by
//!   the same rule);
//! - `ask`: the call is held at its hook while a person answers (the dashboard, `aep-cline
//!   approve`/`deny`, a notification's link), until shortly before Cline's own deadline for the
//!   hook (120 s in 3.0.65, 30 s in 2.18), when the rule's `on_timeout` (default deny) answers;
//!   a deny then is the rule's, soft where Cline has one. Where Cline's hub asks a person
//!   itself and the tap answers it, the hook is not asked ([`super::Guard::judge`]);
//! - no rule: nothing, and no audit.

use crate::budget::account::Crossing;
use crate::lane::asks::OnTimeout;
use crate::lane::{AskPlan, Denial, Verdict};
use crate::policy::rules::Stop;
use crate::policy::{Answer, PolicyFile};
use cline_hooks::HookPayload;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The audit member that says why the rule matched. It quotes the command and its paths, so
/// the lane keeps it only on an Event whose capture allows content.
pub const WHY: &str = "cline.policy_why";

pub use cline_policy::input::tool_name;

/// A hook a guard decides: a tool about to run, or a prompt about to start a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `tool_call` (2.x `PreToolUse`), its tool named as 3.x names it ([`tool_name`]).
    /// `legacy`: Cline 2.x, which has no soft deny.
    Tool { tool: String, input: Value, legacy: bool },
    /// `prompt_submit` (2.x `UserPromptSubmit`): only the budgets are asked.
    Prompt,
}

impl Step {
    pub fn of(payload: &HookPayload) -> Option<Step> {
        match payload.hook_name.as_str() {
            "tool_call" => {
                let call = payload.tool_call.clone().unwrap_or_default();
                let name = call.name.unwrap_or_default();
                let legacy = payload.legacy.is_some();
                Some(Step::Tool {
                    tool: tool_name(&name, legacy).to_string(),
                    input: call.input,
                    legacy,
                })
            }
            "prompt_submit" => Some(Step::Prompt),
            _ => None,
        }
    }

    /// Whether a deny of this step can fail the tool alone and let the run go on: a 3.x tool
    /// of Cline's own whose input check refuses `null` before it acts.
    fn soft_deniable(&self) -> bool {
        match self {
            Step::Tool { tool, legacy, .. } => !legacy && cline_policy::input::fails_on_null(tool),
            Step::Prompt => false,
        }
    }
}

/// The hook control that ends the run, with the words Cline shows.
pub fn control_for(words: &str) -> Value {
    json!({"cancel": true, "errorMessage": words})
}

/// The hook control that makes one of Cline's own tools do nothing and fail, the run going
/// on, with `context` for the model.
pub fn soft_control(context: &str) -> Value {
    json!({"overrideInput": null, "context": context})
}

/// Where a step's paths lie: the session's workspace, the home `~` stands for, and a path with
/// its symbolic links resolved (the disk, given by the caller).
pub struct Place<'a> {
    pub workspace: Option<&'a str>,
    pub home: Option<&'a str>,
    pub follow: &'a dyn Fn(&str) -> Option<String>,
}

/// A budget at or past its limit: what was crossed, the words for Cline, and what its stop ends
/// (`AEP_CLINE_BUDGET_STOP`: the tool call, the default, or the run).
pub struct Over<'a> {
    pub crossing: &'a Crossing,
    pub words: &'a str,
    pub stop: Stop,
}

/// Decides one step.
pub fn decide(step: &Step, policy: Option<&PolicyFile>, place: &Place, over: Option<&Over>) -> Option<Verdict> {
    if let Some(over) = over {
        return Some(budget_stop(step, over));
    }
    let Step::Tool { tool, input, .. } = step else {
        return None;
    };
    let file = policy?;
    let mut asked = file.asked(tool, input, place.workspace).with_home(place.home);
    asked.follow_links(place.follow);
    let decision = file.decide(&asked);
    let rule = decision.rule?;
    let mut audit = Map::new();
    audit.insert("cline.policy_rule".into(), json!(rule.name));
    audit.insert("cline.policy_answer".into(), json!(rule.answer.as_str()));
    let audit_content = Map::from_iter([(WHY.to_string(), json!(decision.why))]);
    audit.insert("cline.enforced_at".into(), json!("hook"));
    let verdict = Verdict {
        audit,
        audit_content,
        ..Verdict::default()
    };
    match rule.answer {
        Answer::Deny => {
            let soft = rule.stop == Stop::Tool && step.soft_deniable();
            let reason = rule.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            let control = match soft {
                true => soft_control(&format!(
                    "aep-cline: policy rule {:?} (line {}) refused this {tool} call{reason}. The call did nothing. \
                     Do not try to get the same effect another way (another command, tool or spelling); if it is \
                     needed, stop and ask the user.",
                    rule.name, rule.line
                )),
                false => control_for(&format!(
                    "aep-cline: denied by policy rule {:?} (line {}){reason}",
                    rule.name, rule.line
                )),
            };
            let mut shown = Map::new();
            shown.insert("cline.policy_line".into(), json!(rule.line));
            if let Some(reason) = &rule.reason {
                shown.insert("cline.policy_reason".into(), json!(reason));
            }
            Some(denied(
                verdict,
                control,
                rule.name.clone(),
                !soft,
                json!({"rule": rule.name}),
                shown,
            ))
        }
        Answer::Approve => Some(verdict),
        Answer::Ask => {
            let Step::Tool { legacy, .. } = step else {
                return Some(verdict);
            };
            // Held at the hook while a person answers: at most until shortly before Cline's own
            // deadline for the hook, when the rule's `on_timeout` (default deny) answers.
            let (deadline, margin) = match legacy {
                true => (CLINE_2X_HOOK_DEADLINE, Duration::from_secs(5)),
                false => (CLINE_3X_HOOK_DEADLINE, Duration::from_secs(15)),
            };
            let cap = deadline - margin;
            let timeout = file.timeout_for(&decision);
            let after = timeout.map_or(cap, |t| t.after.min(cap));
            let on_timeout = match timeout.map(|t| t.answer) {
                Some(Answer::Approve) => OnTimeout::Approve,
                _ => OnTimeout::Deny,
            };
            let soft = rule.stop == Stop::Tool && step.soft_deniable();
            let reason = rule.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            let words = format!(
                "aep-cline: policy rule {:?} (line {}) asks a person before this {tool} call, and it was not allowed \
                 (denied, or nobody answered within {} s){reason}",
                rule.name,
                rule.line,
                after.as_secs()
            );
            let deny = match soft {
                true => soft_control(&format!(
                    "{words}. The call did nothing. Do not try to get the same effect another way; if it is \
                     needed, stop and ask the user."
                )),
                false => control_for(&words),
            };
            let mut verdict = verdict;
            verdict.audit.insert(
                "cline.policy_note".into(),
                json!("held at the hook while a person answers"),
            );
            verdict.ask = Some(AskPlan {
                rule: rule.name.clone(),
                deny,
                deny_ends_run: !soft,
                after,
                on_timeout,
                tool: tool.clone(),
                input: input.clone(),
                legacy: *legacy,
            });
            Some(verdict)
        }
    }
}

/// How long Cline 3.0.65 waits on a `tool_call` hook before it kills it and runs the tool
/// (docs/cline-vendor-facts.md).
pub const CLINE_3X_HOOK_DEADLINE: Duration = Duration::from_secs(120);
/// How long Cline 2.18 waits on a `PreToolUse` hook before it ends it and runs the tool.
pub const CLINE_2X_HOOK_DEADLINE: Duration = Duration::from_secs(30);

/// A budget reached: the step is stopped (the tool alone, or the run), its request resolved
/// by a denial naming the budget.
fn budget_stop(step: &Step, over: &Over) -> Verdict {
    let crossing = over.crossing;
    let budget = json!({
        "name": crossing.scope.as_str(),
        "limit": crossing.limit,
        "cost": crossing.cost,
        "currency": crate::budget::account::CURRENCY,
    });
    let mut audit = Map::new();
    audit.insert("cline.budget_stop".into(), budget.clone());
    audit.insert("cline.enforced_at".into(), json!("hook"));
    let verdict = Verdict {
        audit,
        ..Verdict::default()
    };
    let soft = over.stop == Stop::Tool && step.soft_deniable();
    let control = match soft {
        true => soft_control(&format!(
            "{}. This tool call did nothing. Stop here: finish with what you have, and tell the user the budget is spent.",
            over.words
        )),
        false => control_for(over.words),
    };
    match step {
        Step::Tool { .. } => denied(
            verdict,
            control,
            format!("budget.{}", crossing.scope.as_str()),
            !soft,
            json!({"budget": budget.clone()}),
            Map::from_iter([("cline.budget_stop".to_string(), budget)]),
        ),
        // A prompt has no tool call to resolve; the run it would start does not start.
        Step::Prompt => Verdict {
            control: Some(control),
            ..verdict
        },
    }
}

/// `verdict` with its control and the denial the lane plans (`tool.denied`, and the run's end
/// noted when the control ends it), the stop in the audit.
fn denied(
    mut verdict: Verdict,
    control: Value,
    rule: String,
    ends_run: bool,
    ended_with: Value,
    shown: Map<String, Value>,
) -> Verdict {
    verdict
        .audit
        .insert("cline.policy_stop".into(), json!(if ends_run { "run" } else { "tool" }));
    verdict.control = Some(control);
    verdict.denied = Some(Denial {
        rule,
        ends_run,
        data: match ended_with {
            Value::Object(map) => map,
            _ => Map::new(),
        },
        shown,
    });
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::account::{Level, Scope};

    const NO_LINKS: fn(&str) -> Option<String> = |_| None;
    const HERE: Place = Place {
        workspace: None,
        home: None,
        follow: &NO_LINKS,
    };

    const POLICY: &str = r#"
[[rule]]
name = "no-rm"
tool = "run_commands"
command = "rm"
answer = "deny"
reason = "no deleting"

[[rule]]
name = "no-push"
tool = "run_commands"
command = "git push *"
answer = "deny"
stop = "run"

[[rule]]
name = "ls"
tool = "run_commands"
command = "ls *"
answer = "approve"

[[rule]]
name = "no-mcp-writes"
tool = "fs__write*"
answer = "deny"

[[rule]]
name = "edits"
tool = "editor"
answer = "ask"
"#;

    fn tool(name: &str, input: Value) -> Step {
        Step::Tool {
            tool: name.into(),
            input,
            legacy: false,
        }
    }

    #[test]
    fn a_deny_fails_the_tool_alone_and_tells_the_model_why() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let v = decide(
            &tool("run_commands", json!({"commands": ["rm -rf victim"]})),
            Some(&p),
            &HERE,
            None,
        )
        .unwrap();
        let control = v.control.unwrap();
        assert_eq!(control["overrideInput"], Value::Null);
        assert!(control.get("cancel").is_none(), "the run goes on: {control}");
        let context = control["context"].as_str().unwrap();
        assert!(
            context.contains("policy rule \"no-rm\" (line 2) refused this run_commands call: no deleting")
                && context.contains("another way"),
            "{context}"
        );
        let denial = v.denied.unwrap();
        assert_eq!((denial.rule.as_str(), denial.ends_run), ("no-rm", false));
        assert_eq!(v.audit["cline.policy_rule"], "no-rm");
        assert_eq!(v.audit["cline.policy_answer"], "deny");
        assert_eq!(v.audit["cline.policy_stop"], "tool");
        assert_eq!(v.audit["cline.enforced_at"], "hook");
    }

    #[test]
    fn stop_run_an_mcp_tool_or_cline_2x_end_the_run() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let hard = |step: Step| {
            let v = decide(&step, Some(&p), &HERE, None).unwrap();
            let control = v.control.unwrap();
            assert_eq!(control["cancel"], true, "{control}");
            let denial = v.denied.unwrap();
            assert!(denial.ends_run);
            assert_eq!(v.audit["cline.policy_stop"], "run");
            (control["errorMessage"].as_str().unwrap().to_string(), denial)
        };
        let (words, denial) = hard(tool("run_commands", json!({"commands": ["git push origin main"]})));
        assert_eq!(words, "aep-cline: denied by policy rule \"no-push\" (line 9)");
        assert_eq!(denial.data["rule"], "no-push");
        let (words, _) = hard(tool("fs__write_file", json!({"path": "x"})));
        assert!(words.contains("\"no-mcp-writes\""), "{words}");
        let (words, _) = hard(Step::Tool {
            tool: "run_commands".into(),
            input: json!({"command": "rm -rf victim"}),
            legacy: true,
        });
        assert!(words.ends_with("(line 2): no deleting"), "{words}");
    }

    #[test]
    fn approve_and_ask_let_cline_go_on_and_say_so_and_no_rule_says_nothing() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let v = decide(
            &tool("run_commands", json!({"commands": ["ls -la"]})),
            Some(&p),
            &HERE,
            None,
        )
        .unwrap();
        assert_eq!((v.control, v.denied), (None, None));
        assert_eq!(v.audit["cline.policy_answer"], "approve");
        let v = decide(&tool("editor", json!({"path": "a.rs"})), Some(&p), &HERE, None).unwrap();
        assert!(v.control.is_none());
        assert_eq!(v.audit["cline.policy_answer"], "ask");
        let ask = v.ask.unwrap();
        assert_eq!(ask.rule, "edits");
        assert_eq!(
            ask.after,
            CLINE_3X_HOOK_DEADLINE - Duration::from_secs(15),
            "no timeout: up to Cline's deadline"
        );
        assert_eq!(ask.on_timeout, OnTimeout::Deny);
        assert_eq!(ask.deny["overrideInput"], Value::Null, "a deny of the editor is soft");
        assert_eq!(decide(&tool("read_files", json!({})), Some(&p), &HERE, None), None);
        assert_eq!(
            decide(&tool("run_commands", json!({"commands": ["rm x"]})), None, &HERE, None),
            None
        );
        assert_eq!(decide(&Step::Prompt, Some(&p), &HERE, None), None);
    }

    #[test]
    fn a_budget_reached_stops_the_tool_and_a_prompt_before_the_policy_is_asked() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let crossing = Crossing {
            scope: Scope::Run,
            level: Level::Reached,
            limit: 0.10,
            cost: 0.213,
        };
        let over = |stop| Over {
            crossing: &crossing,
            words: "aep-cline: the run budget is reached",
            stop,
        };
        let v = decide(
            &tool("run_commands", json!({"commands": ["ls"]})),
            Some(&p),
            &HERE,
            Some(&over(Stop::Tool)),
        )
        .unwrap();
        let control = v.control.unwrap();
        assert!(control["context"]
            .as_str()
            .unwrap()
            .starts_with("aep-cline: the run budget is reached. This tool call did nothing."));
        assert_eq!(v.audit["cline.budget_stop"]["name"], "run");
        assert_eq!(v.audit["cline.budget_stop"]["cost"], 0.213);
        let denial = v.denied.unwrap();
        assert_eq!((denial.rule.as_str(), denial.ends_run), ("budget.run", false));
        assert_eq!(denial.data["budget"]["limit"], 0.10);
        let v = decide(
            &tool("run_commands", json!({"commands": ["ls"]})),
            Some(&p),
            &HERE,
            Some(&over(Stop::Run)),
        )
        .unwrap();
        assert_eq!(
            v.control.unwrap()["errorMessage"],
            "aep-cline: the run budget is reached"
        );
        assert!(v.denied.unwrap().ends_run);
        let v = decide(&Step::Prompt, Some(&p), &HERE, Some(&over(Stop::Tool))).unwrap();
        assert_eq!(v.control.unwrap()["cancel"], true, "a prompt has no tool to fail");
        assert_eq!(v.denied, None);
    }

    #[test]
    fn a_2x_tool_is_judged_under_its_3x_name() {
        assert_eq!(tool_name("execute_command", true), "run_commands");
        assert_eq!(tool_name("replace_in_file", true), "editor");
        assert_eq!(tool_name("execute_command", false), "execute_command");
        assert_eq!(tool_name("use_mcp_tool", true), "use_mcp_tool");
    }
}
