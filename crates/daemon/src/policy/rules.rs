//! The policy file's rules and what they answer: pure (text in, decisions out; no I/O, no
//! clock), so `aep-cline policy test` and the daemon decide alike.
//!
//! ```toml
//! [[rule]]
//! name = "read-only"                  # required: named in every decision it makes
//! tool = "run_commands"               # optional glob on the tool name
//! command = '^(ls|cat|git status)\b'  # optional regex: every command of a batch must match
//! path = "src/**"                     # optional glob on a file tool's paths (workspace-relative)
//! workspace = "**/billing-*"          # optional glob on the workspace folder
//! answer = "approve"                  # approve | deny | ask
//! reason = "..."                      # told to Cline with a deny
//! ```
//!
//! Rules are tried in order; the first whose every condition holds answers. None: `ask` (a
//! person answers, as without a policy).

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// A policy file above this size is refused: a policy is a page of rules.
pub const MAX_BYTES: u64 = 1 << 20;
/// A command regex compiles to at most this many bytes (the `regex` crate's own guard).
const MAX_REGEX_BYTES: usize = 1 << 20;

/// What a rule answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Approve,
    Deny,
    Ask,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Approve => "approve",
            Answer::Deny => "deny",
            Answer::Ask => "ask",
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a policy file cannot be used: the line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the policy file is {0} bytes, above the {MAX_BYTES}-byte bound: a policy is a page of rules")]
    TooLarge(u64),
    #[error("line {line}: not TOML: {problem}")]
    Toml { line: usize, problem: String },
    #[error("line {line}: {problem}")]
    Rule { line: usize, problem: String },
}

/// The policy file, parsed: the rules, and what it carries for others.
#[derive(Debug, Default)]
pub struct PolicyFile {
    pub rules: Vec<Rule>,
    /// The `[[budget]]` tables, as written: parsed by the budgets module.
    pub budget: Vec<toml::Table>,
}

/// One rule, compiled.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    /// Where the rule starts in the file (1-based).
    pub line: usize,
    tool: Option<Pattern<GlobMatcher>>,
    command: Option<Pattern<Regex>>,
    path: Option<Pattern<GlobMatcher>>,
    workspace: Option<Pattern<GlobMatcher>>,
    pub answer: Answer,
    pub reason: Option<String>,
}

/// A compiled condition and the text it was written as.
#[derive(Debug)]
struct Pattern<M> {
    text: String,
    matcher: M,
}

/// The keys a rule may have.
const RULE_KEYS: [&str; 7] = ["name", "tool", "command", "path", "workspace", "answer", "reason"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<toml::Spanned<toml::Table>>,
    #[serde(default)]
    budget: Vec<toml::Table>,
}

#[derive(Deserialize)]
struct RawRule {
    name: String,
    tool: Option<String>,
    command: Option<String>,
    path: Option<String>,
    workspace: Option<String>,
    answer: Answer,
    reason: Option<String>,
}

impl PolicyFile {
    /// Parses and compiles a policy file's text.
    pub fn parse(text: &str) -> Result<PolicyFile, PolicyError> {
        if text.len() as u64 > MAX_BYTES {
            return Err(PolicyError::TooLarge(text.len() as u64));
        }
        let line_at = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let raw: RawFile = toml::from_str(text).map_err(|e| PolicyError::Toml {
            line: line_at(e.span().map_or(0, |s| s.start)),
            problem: e.message().trim_end().replace('\n', " "),
        })?;
        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, spanned) in raw.rule.into_iter().enumerate() {
            let line = line_at(spanned.span().start);
            let table = spanned.into_inner();
            let label = match table.get("name").and_then(toml::Value::as_str) {
                Some(name) => format!("rule {name:?}"),
                None => format!("rule #{}", i + 1),
            };
            let bad = |problem: String| PolicyError::Rule { line, problem };
            if let Some(key) = table.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
                return Err(bad(format!(
                    "{label} has an unknown key {key:?}; a rule has {}",
                    RULE_KEYS.join(", ")
                )));
            }
            let raw: RawRule = table.try_into().map_err(|e: toml::de::Error| {
                bad(format!(
                    "{label}: {} (name and answer = approve|deny|ask are required)",
                    e.message().trim_end()
                ))
            })?;
            if raw.name.trim().is_empty() {
                return Err(bad(format!(
                    "{label}: its name is empty; every decision names its rule"
                )));
            }
            if rules.iter().any(|r: &Rule| r.name == raw.name) {
                return Err(bad(format!(
                    "{label}: another rule has this name; decisions name their rule, so names are unique"
                )));
            }
            let glob = |key: &str, text: Option<String>| -> Result<_, PolicyError> {
                text.map(|text| {
                    GlobBuilder::new(&text)
                        .literal_separator(true)
                        .build()
                        .map(|g: Glob| Pattern {
                            matcher: g.compile_matcher(),
                            text: text.clone(),
                        })
                        .map_err(|e| bad(format!("{label}: {key} = {text:?} is not a glob: {e}")))
                })
                .transpose()
            };
            let command = raw
                .command
                .map(|text| {
                    RegexBuilder::new(&text)
                        .size_limit(MAX_REGEX_BYTES)
                        .build()
                        .map(|matcher| Pattern {
                            matcher,
                            text: text.clone(),
                        })
                        .map_err(|e| bad(format!("{label}: command = {text:?} is not a regex: {}", one_line(&e))))
                })
                .transpose()?;
            rules.push(Rule {
                tool: glob("tool", raw.tool)?,
                path: glob("path", raw.path)?,
                workspace: glob("workspace", raw.workspace)?,
                command,
                name: raw.name,
                line,
                answer: raw.answer,
                reason: raw.reason.filter(|r| !r.trim().is_empty()),
            });
        }
        Ok(PolicyFile {
            rules,
            budget: raw.budget,
        })
    }

    /// The first rule that matches answers; none: ask.
    pub fn decide(&self, asked: &Asked) -> Decision<'_> {
        let mut skipped = Vec::new();
        for rule in &self.rules {
            match rule.check(asked) {
                Ok(why) => {
                    return Decision {
                        rule: Some(rule),
                        why,
                        skipped,
                    }
                }
                Err(why) => skipped.push((rule, why)),
            }
        }
        Decision {
            rule: None,
            why: "no rule matched".into(),
            skipped,
        }
    }
}

/// A regex error on one line: its last line says what is wrong (the others point at it).
fn one_line(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or_default();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

/// What an approval asks, as the rules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub tool: String,
    /// The commands of a command tool (`run_commands`): every one must match a rule's regex.
    pub commands: Vec<String>,
    /// The paths of a file tool, relative to the workspace when inside it.
    pub paths: Vec<String>,
    /// The session's workspace folder, when the hooks said it.
    pub workspace: Option<String>,
}

impl Asked {
    /// From an approval's tool name and input (the hub's `inputJson`, Cline 3.0.65 shapes:
    /// `run_commands {commands: [..]}`, `read_files {files: [{path}] | file_paths: [..]}`,
    /// `editor {path}`, `apply_patch {input}` with `*** Update File: PATH` lines).
    pub fn from_approval(tool: &str, input: Option<&str>, workspace: Option<&str>) -> Asked {
        let input = input
            .and_then(|i| serde_json::from_str::<Value>(i).ok())
            .unwrap_or(Value::Null);
        let workspace = workspace.filter(|w| !w.is_empty()).map(str::to_string);
        let paths = raw_paths(&input)
            .into_iter()
            .map(|p| relative(&p, workspace.as_deref()))
            .collect();
        Asked {
            tool: tool.to_string(),
            commands: commands(&input),
            paths,
            workspace,
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|i| match i {
                Value::String(s) => Some(s.clone()),
                other => ["command", "path"]
                    .iter()
                    .find_map(|k| other.get(k).and_then(Value::as_str))
                    .map(str::to_string),
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn commands(input: &Value) -> Vec<String> {
    ["commands", "command"]
        .iter()
        .find_map(|k| input.get(k).map(strings))
        .unwrap_or_default()
}

fn raw_paths(input: &Value) -> Vec<String> {
    let mut paths: Vec<String> = ["path", "file_path", "files", "file_paths", "paths"]
        .iter()
        .filter_map(|k| input.get(k))
        .flat_map(strings)
        .collect();
    // apply_patch carries its files inside the patch text.
    if let Some(patch) = input.get("input").and_then(Value::as_str) {
        paths.extend(patch.lines().filter_map(|l| {
            [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .map(|p| p.trim().to_string())
        }));
    }
    paths
}

/// A path inside the workspace, relative to it; any other path as given.
fn relative(path: &str, workspace: Option<&str>) -> String {
    let Some(ws) = workspace.map(|w| w.trim_end_matches('/')) else {
        return path.to_string();
    };
    match path.strip_prefix(ws).and_then(|rest| rest.strip_prefix('/')) {
        Some(rest) => rest.to_string(),
        None => path.strip_prefix("./").unwrap_or(path).to_string(),
    }
}

impl Rule {
    /// `Ok(why it matches)` or `Err(why not)`.
    fn check(&self, asked: &Asked) -> Result<String, String> {
        let mut why = Vec::new();
        if let Some(t) = &self.tool {
            if !t.matcher.is_match(&asked.tool) {
                return Err(format!("tool {:?} does not match {:?}", asked.tool, t.text));
            }
            why.push(format!("tool {:?} matches {:?}", asked.tool, t.text));
        }
        if let Some(c) = &self.command {
            if asked.commands.is_empty() {
                return Err("the request has no command".into());
            }
            if let Some(miss) = asked.commands.iter().find(|cmd| !c.matcher.is_match(cmd)) {
                return Err(format!("command {miss:?} does not match /{}/", c.text));
            }
            why.push(format!("every command matches /{}/", c.text));
        }
        if let Some(p) = &self.path {
            if asked.paths.is_empty() {
                return Err("the request names no path".into());
            }
            if let Some(miss) = asked.paths.iter().find(|path| !p.matcher.is_match(path)) {
                return Err(format!("path {miss:?} does not match {:?}", p.text));
            }
            why.push(format!("every path matches {:?}", p.text));
        }
        if let Some(w) = &self.workspace {
            let Some(ws) = asked.workspace.as_deref() else {
                return Err("the session's workspace is not known".into());
            };
            if !w.matcher.is_match(ws) {
                return Err(format!("workspace {ws:?} does not match {:?}", w.text));
            }
            why.push(format!("workspace matches {:?}", w.text));
        }
        if why.is_empty() {
            why.push("it has no condition".into());
        }
        Ok(why.join(", "))
    }
}

/// What the policy answers a request, and why.
#[derive(Debug)]
pub struct Decision<'a> {
    /// The rule that answers; `None`: no rule matched, a person answers.
    pub rule: Option<&'a Rule>,
    pub why: String,
    /// The rules tried before it, and why each did not match.
    pub skipped: Vec<(&'a Rule, String)>,
}

impl Decision<'_> {
    pub fn answer(&self) -> Answer {
        self.rule.map_or(Answer::Ask, |r| r.answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(tool: &str, input: &str, ws: Option<&str>) -> Asked {
        Asked::from_approval(tool, Some(input), ws)
    }

    fn decided(policy: &PolicyFile, a: &Asked) -> (Answer, Option<String>) {
        let d = policy.decide(a);
        (d.answer(), d.rule.map(|r| r.name.clone()))
    }

    const POLICY: &str = r#"
[[rule]]
name = "no-rm-rf"
tool = "run_commands"
command = 'rm\s+-rf'
answer = "deny"
reason = "never rm -rf"

[[rule]]
name = "read-only"
tool = "run_commands"
command = '^(ls|cat|echo|git status)\b'
answer = "approve"

[[rule]]
name = "src-edits"
tool = "editor"
path = "src/**"
answer = "approve"

[[rule]]
name = "billing"
workspace = "**/billing-*"
answer = "ask"
"#;

    #[test]
    fn the_first_matching_rule_answers_and_every_command_of_a_batch_must_match() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let run = |cmds: &str| asked("run_commands", &format!(r#"{{"commands":{cmds}}}"#), None);
        assert_eq!(
            decided(&p, &run(r#"["ls -la","git status"]"#)),
            (Answer::Approve, Some("read-only".into()))
        );
        // One command outside the read-only set: the batch is not read-only.
        assert_eq!(decided(&p, &run(r#"["ls","make"]"#)), (Answer::Ask, None));
        // Order: the deny comes first, though `echo` alone would be read-only.
        assert_eq!(
            decided(&p, &run(r#"["echo x; rm -rf /"]"#)),
            (Answer::Deny, Some("no-rm-rf".into()))
        );
        let d = p.decide(&run(r#"["rm -rf build"]"#));
        assert_eq!(d.rule.unwrap().reason.as_deref(), Some("never rm -rf"));
        assert_eq!(d.rule.unwrap().line, 2);
        // A command given as one string is one command.
        assert_eq!(
            decided(&p, &asked("run_commands", r#"{"commands":"ls"}"#, None)).0,
            Answer::Approve
        );
        // No command at all never matches a command rule.
        assert_eq!(decided(&p, &asked("run_commands", "{}", None)), (Answer::Ask, None));
        assert_eq!(
            decided(&p, &asked("run_commands", "not json", None)),
            (Answer::Ask, None)
        );
    }

    #[test]
    fn paths_are_matched_relative_to_the_workspace_and_globs_keep_to_their_folders() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let ws = Some("/home/dev/proj");
        let edit = |path: &str| asked("editor", &format!(r#"{{"path":"{path}","new_text":"x"}}"#), ws);
        assert_eq!(decided(&p, &edit("/home/dev/proj/src/a/b.rs")).0, Answer::Approve);
        assert_eq!(decided(&p, &edit("src/main.rs")).0, Answer::Approve);
        assert_eq!(decided(&p, &edit("/home/dev/proj/Cargo.toml")).0, Answer::Ask);
        // Outside the workspace: the absolute path, which `src/**` does not match.
        assert_eq!(decided(&p, &edit("/etc/src/passwd")).0, Answer::Ask);
        assert_eq!(decided(&p, &edit("/home/dev/project2/src/x")).0, Answer::Ask);
        let read = asked(
            "read_files",
            r#"{"files":[{"path":"/home/dev/proj/src/a"},{"path":"README.md"}]}"#,
            ws,
        );
        assert_eq!(read.paths, ["src/a", "README.md"]);
        let patch = asked(
            "apply_patch",
            r#"{"input":"*** Begin Patch\n*** Update File: src/x.rs\n@@\n*** Add File: docs/y.md\n"}"#,
            ws,
        );
        assert_eq!(patch.paths, ["src/x.rs", "docs/y.md"]);
        let tool_glob =
            PolicyFile::parse("[[rule]]\nname='files'\ntool='{read_files,editor}'\nanswer='approve'").unwrap();
        assert_eq!(decided(&tool_glob, &read).0, Answer::Approve);
        assert_eq!(decided(&tool_glob, &asked("run_commands", "{}", ws)).0, Answer::Ask);
    }

    #[test]
    fn a_workspace_rule_needs_the_workspace_known() {
        let p = PolicyFile::parse(POLICY).unwrap();
        let a = asked("fetch_web_content", "{}", Some("/srv/billing-api"));
        assert_eq!(decided(&p, &a), (Answer::Ask, Some("billing".into())));
        let d = p.decide(&asked("fetch_web_content", "{}", None));
        assert!(d.rule.is_none());
        assert!(d
            .skipped
            .iter()
            .any(|(r, why)| r.name == "billing" && why.contains("not known")));
    }

    #[test]
    fn budgets_are_passed_through_untouched() {
        let p = PolicyFile::parse("[[budget]]\nworkspace='**/x'\nrun=2.5\nanything='goes'\n").unwrap();
        assert!(p.rules.is_empty());
        assert_eq!(p.budget.len(), 1);
        assert_eq!(p.budget[0]["run"].as_float(), Some(2.5));
        assert_eq!(p.budget[0]["anything"].as_str(), Some("goes"));
        assert_eq!(PolicyFile::parse("").unwrap().rules.len(), 0);
    }

    #[test]
    fn bad_files_say_the_line_and_the_problem() {
        let err = |text: &str| PolicyFile::parse(text).unwrap_err().to_string();
        let e = err("[[rule]]\nname = 'a'\nanswer = 'approve'\n\n[[rule]]\nname = 'b'\ncommand = '(unclosed'\nanswer = 'deny'\n");
        assert_eq!(
            e,
            "line 5: rule \"b\": command = \"(unclosed\" is not a regex: unclosed group"
        );
        let e = err("[[rule]]\nname = 'x'\nanswer = 'approve'\ncomand = 'ls'\n");
        assert!(e.contains("line 1: rule \"x\" has an unknown key \"comand\""), "{e}");
        let e = err("[[rule]]\nanswer = 'approve'\n");
        assert!(e.contains("rule #1") && e.contains("name"), "{e}");
        let e = err("[[rule]]\nname = 'x'\nanswer = 'maybe'\n");
        assert!(e.contains("rule \"x\"") && e.contains("maybe"), "{e}");
        let e = err("[[rule]]\nname = 'x'\npath = 'src/[a'\nanswer = 'ask'\n");
        assert!(e.contains("path = \"src/[a\" is not a glob"), "{e}");
        let e = err("[[rule]]\nname = 'x'\nanswer = 'ask'\n[[rule]]\nname = 'x'\nanswer = 'ask'\n");
        assert!(e.contains("line 4") && e.contains("another rule has this name"), "{e}");
        let e = err("[[rule]]\nname = 'x'\nanswer = 'ask\n");
        assert!(e.starts_with("line 3: not TOML: ") && !e.contains('\n'), "{e}");
        let e = err("[[rules]]\nname = 'x'\n");
        assert!(e.contains("rules"), "{e}");
        let e = err("[[rule]]\nname = 'x'\ncommand = 'a{1000}{1000}'\nanswer = 'ask'\n");
        assert!(e.contains("is not a regex"), "{e}");
        let big = format!("# {}\n", "x".repeat(MAX_BYTES as usize));
        assert!(matches!(PolicyFile::parse(&big), Err(PolicyError::TooLarge(_))));
    }
}
