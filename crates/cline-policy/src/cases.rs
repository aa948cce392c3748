//! Cases a policy must answer as written: a file of tool calls and the answer each must get,
//! checked by `aep-cline policy test --cases FILE` and by the corpus in this repository.
//!
//! One case per line (JSON Lines; blank lines and lines starting with `#` are skipped):
//!
//! ```text
//! {"line": "rm -rf victim", "expect": "deny", "rule": "no-rm-r"}
//! {"tool": "read_files", "input": {"files": [{"file_path": "/etc/shadow"}]}, "expect": "ask"}
//! ```
//!
//! `line` is a command line for `run_commands` (`{"commands": [line]}`); else `tool` and
//! `input` are the call as Cline gives it. `rule` (optional) is the rule that must answer;
//! `workspace` (optional) the session's folder; `note` says why, for people.

use crate::rules::{Answer, PolicyFile};
use serde::Deserialize;
use serde_json::{json, Value};

/// The workspace of a case that names none.
pub const WORKSPACE: &str = "/home/dev/proj";
/// The home folder cases are decided with (`~`).
pub const HOME: &str = "/home/dev";

/// One case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Its line in the file (1-based).
    pub at: usize,
    pub tool: String,
    pub input: Value,
    pub expect: Answer,
    pub rule: Option<String>,
    pub workspace: String,
    pub note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    line: Option<String>,
    tool: Option<String>,
    input: Option<Value>,
    expect: Answer,
    rule: Option<String>,
    workspace: Option<String>,
    note: Option<String>,
}

/// Reads a file of cases; a line that is not a case is an error naming it.
pub fn parse(text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let at = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let case: RawCase = serde_json::from_str(trimmed).map_err(|e| {
            format!("line {at}: not a case ({e}); a case is {{\"line\": \"..\", \"expect\": \"deny\"}} or {{\"tool\": \"..\", \"input\": {{..}}, \"expect\": \"approve\"}}")
        })?;
        let (tool, input) = match (case.line, case.tool, case.input) {
            (Some(line), None, None) => ("run_commands".to_string(), json!({ "commands": [line] })),
            (None, Some(tool), Some(input)) => (tool, input),
            _ => return Err(format!("line {at}: a case has either line, or tool and input")),
        };
        cases.push(Case {
            at,
            tool,
            input,
            expect: case.expect,
            rule: case.rule,
            workspace: case.workspace.unwrap_or_else(|| WORKSPACE.to_string()),
            note: case.note,
        });
    }
    Ok(cases)
}

/// What the policy answered a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub answer: Answer,
    pub rule: Option<String>,
    pub why: String,
}

impl Outcome {
    /// As the case expects it.
    pub fn holds(&self, case: &Case) -> bool {
        self.answer == case.expect && case.rule.as_ref().is_none_or(|r| self.rule.as_ref() == Some(r))
    }
}

/// Decides a case (pure: no look at the disk).
pub fn decide(policy: &PolicyFile, case: &Case) -> Outcome {
    let asked = policy
        .asked(&case.tool, &case.input, Some(&case.workspace))
        .with_home(Some(HOME));
    let d = policy.decide(&asked);
    Outcome {
        answer: d.answer(),
        rule: d.rule.map(|r| r.name.clone()),
        why: d.why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_read_and_bad_lines_are_named() {
        let cases = parse(
            "# a comment\n\n{\"line\": \"ls\", \"expect\": \"approve\"}\n{\"tool\": \"read_files\", \"input\": \"a\", \"expect\": \"ask\", \"rule\": \"x\"}\n",
        )
        .unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].at, 3);
        assert_eq!(cases[0].input, json!({"commands": ["ls"]}));
        assert_eq!(cases[1].rule.as_deref(), Some("x"));
        for bad in [
            "{\"line\": \"ls\"}",
            "{\"line\": \"ls\", \"expect\": \"maybe\"}",
            "{\"line\": \"ls\", \"tool\": \"x\", \"input\": 1, \"expect\": \"ask\"}",
            "{\"tool\": \"x\", \"expect\": \"ask\"}",
            "not json",
            "{\"line\": \"ls\", \"expect\": \"ask\", \"extra\": 1}",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.starts_with("line 1: "), "{e}");
        }
    }
}
