//! The guard's decision, pure: a hook Cline waits on, the policy and what the budgets say in,
//! the control for Cline and the audit out. No I/O, no clock.
//!
//! What Cline does with the control (docs/cline-vendor-facts.md, "Hook control"): Cline 3.0.65
//! reads `cancel`, `context` (`contextModification`), `errorMessage` and `overrideInput` from a
//! `tool_call` hook (`review` is parsed and dropped; the runtime's `skip` and per-call approval
//! policy are not reachable from a hook file); 2.18 reads `cancel`, `contextModification` and
//! `errorMessage`. The only answer that keeps a tool from running in both is `cancel`, which
//! ends the run with `errorMessage` as its reason. So:
//! - a policy `deny`, or a budget reached: `{"cancel": true, "errorMessage": why}`;
//! - `approve`: nothing (Cline goes on; on the hub its approval, if it asks one, is answered by
//!   the same rule);
//! - `ask`: nothing: a person answers where Cline asks one; where Cline auto-approves, no hook
//!   answer makes it ask (said in the audit and the README);
//! - no rule: nothing, and no audit.

use crate::budget::account::Crossing;
use crate::lane::Verdict;
use crate::policy::{Answer, PolicyFile};
use cline_hooks::HookPayload;
use serde_json::{json, Map, Value};

/// The audit member that says why the rule matched. It quotes the command and its paths, so
/// the lane keeps it only on an Event whose capture allows content.
pub const WHY: &str = "cline.policy_why";

/// A hook a guard decides: a tool about to run, or a prompt about to start a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `tool_call` (2.x `PreToolUse`), its tool named as 3.x names it ([`tool_name`]).
    Tool { tool: String, input: Value },
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
                })
            }
            "prompt_submit" => Some(Step::Prompt),
            _ => None,
        }
    }
}

pub use cline_policy::input::tool_name;

/// The hook control that stops the step, with the words Cline shows.
pub fn control_for(words: &str) -> Value {
    json!({"cancel": true, "errorMessage": words})
}

/// Decides one step. `over`: the budget the session is at or past, and the words for Cline;
/// `follow`: a path with its symbolic links resolved (the disk, given by the caller).
pub fn decide(
    step: &Step,
    policy: Option<&PolicyFile>,
    workspace: Option<&str>,
    over: Option<&(Crossing, String)>,
    follow: &dyn Fn(&str) -> Option<String>,
) -> Option<Verdict> {
    if let Some((crossing, words)) = over {
        let mut audit = Map::new();
        audit.insert(
            "cline.budget_stop".into(),
            json!({
                "name": crossing.scope.as_str(),
                "limit": crossing.limit,
                "cost": crossing.cost,
                "currency": crate::budget::account::CURRENCY,
            }),
        );
        audit.insert("cline.enforced_at".into(), json!("hook"));
        return Some(Verdict {
            control: Some(control_for(words)),
            audit,
            denied: None,
            ..Verdict::default()
        });
    }
    let Step::Tool { tool, input } = step else {
        return None;
    };
    let file = policy?;
    let mut asked = file.asked(tool, input, workspace);
    asked.follow_links(follow);
    let decision = file.decide(&asked);
    let rule = decision.rule?;
    let mut audit = Map::new();
    audit.insert("cline.policy_rule".into(), json!(rule.name));
    audit.insert("cline.policy_answer".into(), json!(rule.answer.as_str()));
    let audit_content = Map::from_iter([(WHY.to_string(), json!(decision.why))]);
    audit.insert("cline.enforced_at".into(), json!("hook"));
    match rule.answer {
        Answer::Deny => {
            let words = match &rule.reason {
                Some(reason) => format!(
                    "aep-cline: denied by policy rule {:?} (line {}): {reason}",
                    rule.name, rule.line
                ),
                None => format!("aep-cline: denied by policy rule {:?} (line {})", rule.name, rule.line),
            };
            Some(Verdict {
                control: Some(control_for(&words)),
                audit,
                audit_content,
                denied: Some(Some(rule.name.clone())),
                planned: Vec::new(),
            })
        }
        Answer::Approve => Some(Verdict {
            control: None,
            audit,
            audit_content,
            denied: None,
            planned: Vec::new(),
        }),
        Answer::Ask => {
            audit.insert(
                "cline.policy_note".into(),
                json!("left to Cline's own approval: no hook answer makes Cline ask where it auto-approves"),
            );
            Some(Verdict {
                control: None,
                audit,
                audit_content,
                denied: None,
                planned: Vec::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::account::{Level, Scope};

    const NO_LINKS: fn(&str) -> Option<String> = |_| None;

    const POLICY: &str = r#"
[[rule]]
name = "no-rm"
tool = "run_commands"
command = "rm"
answer = "deny"
reason = "no deleting"

[[rule]]
name = "ls"
tool = "run_commands"
command = "ls *"
answer = "approve"

[[rule]]
name = "edits"
tool = "editor"
answer = "ask"
"#;

    fn tool(name: &str, input: Value) -> Step {
        Step::Tool {
            tool: name.into(),
            input,
        }
    }

    #[test]
    fn a_deny_stops_the_tool_with_the_rule_and_its_reason() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let v = decide(
            &tool("run_commands", json!({"commands": ["rm -rf victim"]})),
            Some(&p),
            None,
            None,
            &NO_LINKS,
        )
        .unwrap();
        let control = v.control.unwrap();
        assert_eq!(control["cancel"], true);
        assert_eq!(
            control["errorMessage"],
            "aep-cline: denied by policy rule \"no-rm\" (line 2): no deleting"
        );
        assert_eq!(v.denied, Some(Some("no-rm".into())));
        assert_eq!(v.audit["cline.policy_rule"], "no-rm");
        assert_eq!(v.audit["cline.policy_answer"], "deny");
        assert_eq!(v.audit["cline.enforced_at"], "hook");
    }

    #[test]
    fn approve_and_ask_let_cline_go_on_and_say_so_and_no_rule_says_nothing() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let v = decide(
            &tool("run_commands", json!({"commands": ["ls -la"]})),
            Some(&p),
            None,
            None,
            &NO_LINKS,
        )
        .unwrap();
        assert_eq!((v.control, v.denied), (None, None));
        assert_eq!(v.audit["cline.policy_answer"], "approve");
        let v = decide(
            &tool("editor", json!({"path": "a.rs"})),
            Some(&p),
            None,
            None,
            &NO_LINKS,
        )
        .unwrap();
        assert!(v.control.is_none());
        assert_eq!(v.audit["cline.policy_answer"], "ask");
        assert!(v.audit["cline.policy_note"].as_str().unwrap().contains("auto-approves"));
        assert_eq!(
            decide(&tool("read_files", json!({})), Some(&p), None, None, &NO_LINKS),
            None
        );
        assert_eq!(
            decide(
                &tool("run_commands", json!({"commands": ["rm x"]})),
                None,
                None,
                None,
                &NO_LINKS
            ),
            None
        );
        assert_eq!(decide(&Step::Prompt, Some(&p), None, None, &NO_LINKS), None);
    }

    #[test]
    fn a_budget_reached_stops_tools_and_prompts_before_the_policy_is_asked() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let over = (
            Crossing {
                scope: Scope::Run,
                level: Level::Reached,
                limit: 0.10,
                cost: 0.213,
            },
            "the run budget is reached".to_string(),
        );
        for step in [tool("run_commands", json!({"commands": ["ls"]})), Step::Prompt] {
            let v = decide(&step, Some(&p), None, Some(&over), &NO_LINKS).unwrap();
            assert_eq!(v.control.unwrap()["errorMessage"], "the run budget is reached");
            assert_eq!(v.audit["cline.budget_stop"]["name"], "run");
            assert_eq!(v.audit["cline.budget_stop"]["cost"], 0.213);
            assert_eq!(v.denied, None);
        }
    }

    #[test]
    fn a_2x_tool_is_judged_under_its_3x_name() {
        assert_eq!(tool_name("execute_command", true), "run_commands");
        assert_eq!(tool_name("replace_in_file", true), "editor");
        assert_eq!(tool_name("execute_command", false), "execute_command");
        assert_eq!(tool_name("use_mcp_tool", true), "use_mcp_tool");
        let p = PolicyFile::parse(POLICY).unwrap();
        // 2.x's parameters are strings: `command` is one command.
        let step = tool(tool_name("execute_command", true), json!({"command": "rm -rf victim"}));
        assert!(decide(&step, Some(&p), None, None, &NO_LINKS)
            .unwrap()
            .control
            .is_some());
    }
}
