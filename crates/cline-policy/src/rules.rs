//! The policy file's rules and what they answer: pure (text in, decisions out; no I/O, no
//! clock), so `aep-cline policy test` and the daemon decide alike.
//!
//! ```toml
//! [[rule]]
//! name = "read-only"                  # required: named in every decision it makes
//! tool = "run_commands"               # optional glob on the tool name
//! command = ["ls *", "git status"]   # optional words of a command, or a list of them (words.rs)
//! command_regex = '^cat [a-z./]+$'    # optional regex on each simple command's words
//! path = "src/**"                     # optional glob on a file tool's paths (path.rs)
//! workspace = "**/billing-*"          # optional glob on the workspace folder
//! answer = "approve"                  # approve | deny | ask
//! reason = "..."                      # told to Cline with a deny
//! timeout = "10m"                     # ask rules only: nobody answered within it ...
//! on_timeout = "deny"                 # ... and this answers (approve | deny)
//! ```
//!
//! A file may also set `timeout` and `on_timeout` at its top, before any table: the default for
//! an approval no rule answers (a person is asked, and this answers if nobody does).
//!
//! Rules are tried in order; the first whose every condition holds answers. None: `ask` (a
//! person answers, as without a policy).
//!
//! A command is read as bash reads it ([`crate::shell`]). An `approve` rule's command
//! condition holds only when every command line is plain (simple commands joined by `&&`,
//! `||`, `;`, `|`, newlines: no substitution, redirection to a file, subshell, here-document,
//! `eval`, `bash -c`, computed command name, unreadable text) and each of its simple commands
//! matches exactly. A `deny` or `ask` rule's holds when any simple command anywhere (inside
//! substitutions, `bash -c` scripts, behind `sudo` or `xargs`) could match. Paths: an approve
//! rule needs every path to match, a deny or ask rule any one.
//!
//! The file's text is read and checked in `rules/parse.rs`; this file holds the rules and
//! what they answer.

mod parse;

use crate::path::Place;
use crate::shell::{Script, SimpleCommand};
use crate::words::CommandPattern;
use globset::GlobMatcher;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// A policy file above this size is refused: a policy is a page of rules.
pub const MAX_BYTES: u64 = 1 << 20;
/// A command regex compiles to at most this many bytes (the `regex` crate's own guard).
const MAX_REGEX_BYTES: usize = 1 << 20;
/// At most this many rules: a policy is a page of rules, and each is tried per tool call.
pub const MAX_RULES: usize = 1000;
/// At most this many `command_regex`: with [`MAX_REGEX_BYTES`] each, the compiled whole stays
/// under 64 MiB however the file is written (a size bound alone bounds no total: 3,000 small
/// regexes of `\w{20}` took 3.4 GiB and 25 s).
pub const MAX_REGEXES: usize = 64;

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
    /// What answers an approval no rule answered, when nobody did within a time.
    pub timeout: Option<Timeout>,
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
    command: Vec<CommandPattern>,
    command_regex: Option<Pattern<Regex>>,
    path: Option<Pattern<GlobMatcher>>,
    workspace: Option<Pattern<GlobMatcher>>,
    pub answer: Answer,
    pub reason: Option<String>,
    /// An ask rule's answer when nobody answered in time.
    pub timeout: Option<Timeout>,
}

/// An answer given when nobody answered an approval within `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout {
    pub after: std::time::Duration,
    /// Approve or deny.
    pub answer: Answer,
}

/// A compiled condition and the text it was written as.
#[derive(Debug)]
struct Pattern<M> {
    text: String,
    matcher: M,
}

/// What an approval asks, as the rules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub tool: String,
    /// The command lines of a command tool (`run_commands`), as given.
    pub commands: Vec<String>,
    /// Each command line, read as bash reads it.
    pub scripts: Vec<Script>,
    /// The paths of a file tool, placed against the workspace.
    pub paths: Vec<Place>,
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
            .iter()
            .map(|p| Place::new(p, workspace.as_deref()))
            .collect();
        let commands = commands(&input);
        Asked {
            tool: tool.to_string(),
            scripts: commands.iter().map(|c| Script::parse(c)).collect(),
            commands,
            paths,
            workspace,
        }
    }

    /// Places each path again where `follow` (the daemon's look at the disk) says its
    /// symbolic links lead: `follow(absolute)` is the path with its links resolved.
    pub fn follow_links(&mut self, follow: impl Fn(&str) -> Option<String>) {
        let workspace = self
            .workspace
            .as_deref()
            .map(|w| follow(w).unwrap_or_else(|| w.to_string()));
        for place in &mut self.paths {
            if let Some(real) = place.absolute.as_deref().and_then(&follow) {
                if Some(real.as_str()) != place.absolute.as_deref() {
                    let given = std::mem::take(&mut place.given);
                    *place = Place::new(&real, workspace.as_deref());
                    place.given = given;
                }
            }
        }
    }

    /// The simple commands and constructs found, a line each, for `policy test`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (line, script) in self.commands.iter().zip(&self.scripts) {
            out.push_str(&format!("command line {line:?}:\n"));
            for c in &script.commands {
                out.push_str(&format!("  runs {:?} ({})\n", c.display(), via(c)));
            }
            for c in &script.constructs {
                out.push_str(&format!("  has {}: {:?}\n", c.what, c.text));
            }
        }
        for p in &self.paths {
            let at = match (&p.inside, &p.absolute) {
                (Some(inside), _) => format!("inside the workspace as {inside:?}"),
                (None, Some(abs)) => format!("outside the workspace, at {abs:?}"),
                (None, None) => "outside the workspace".into(),
            };
            out.push_str(&format!("path {:?}: {at}\n", p.given));
        }
        out
    }
}

fn via(c: &SimpleCommand) -> String {
    use crate::shell::Via;
    match &c.via {
        Via::Top => "at the top".into(),
        Via::Substitution => "inside a substitution".into(),
        Via::Script(by) => format!("in a script {by} runs"),
        Via::Wrapped(by) => format!("as the command {by} runs"),
        Via::Compound => "inside a compound command".into(),
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
        let strict = self.answer == Answer::Approve;
        if !self.command.is_empty() || self.command_regex.is_some() {
            if asked.scripts.is_empty() {
                return Err("the request has no command".into());
            }
            why.push(self.check_commands(asked, strict)?);
        }
        if let Some(p) = &self.path {
            if asked.paths.is_empty() {
                return Err("the request names no path".into());
            }
            let absolute = p.text.starts_with('/') || p.text.starts_with('~');
            let seen = |place: &Place| -> Option<String> {
                match absolute {
                    true => place.absolute.clone(),
                    false => place.inside.clone(),
                }
            };
            let holds = |place: &Place| seen(place).is_some_and(|at| p.matcher.is_match(&at));
            let placed = |place: &Place| match seen(place) {
                Some(at) if at != place.given => format!("{:?} (as {at:?})", place.given),
                Some(_) => format!("{:?}", place.given),
                None => format!("{:?} (outside the workspace)", place.given),
            };
            if strict {
                if let Some(miss) = asked.paths.iter().find(|place| !holds(place)) {
                    return Err(format!("path {} does not match {:?}", placed(miss), p.text));
                }
                why.push(format!("every path matches {:?}", p.text));
            } else {
                match asked.paths.iter().find(|place| holds(place)) {
                    Some(hit) => why.push(format!("path {} matches {:?}", placed(hit), p.text)),
                    None => return Err(format!("no path matches {:?}", p.text)),
                }
            }
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

impl Rule {
    /// The command conditions: for approve (`strict`), every command line plain and each of
    /// its simple commands matching exactly; else any simple command anywhere that could.
    fn check_commands(&self, asked: &Asked, strict: bool) -> Result<String, String> {
        let written = || {
            let mut all: Vec<String> = self.command.iter().map(|c| format!("{:?}", c.text)).collect();
            if let Some(r) = &self.command_regex {
                all.push(format!("/{}/", r.text));
            }
            all.join(" or ")
        };
        let exactly = |c: &SimpleCommand| {
            self.command.iter().any(|p| p.holds_exactly(c))
                || self.command_regex.as_ref().is_some_and(|r| {
                    !c.unknown && c.words.iter().all(|w| w.is_static()) && r.matcher.is_match(&c.display())
                })
        };
        let could = |c: &SimpleCommand| {
            self.command.iter().any(|p| p.could_hold(c))
                || self
                    .command_regex
                    .as_ref()
                    .is_some_and(|r| c.unknown || r.matcher.is_match(&c.display()))
        };
        if strict {
            for (line, script) in asked.commands.iter().zip(&asked.scripts) {
                if let Some(construct) = script.constructs.first() {
                    return Err(format!(
                        "command line {line:?} has {} ({:?}); an approve rule holds only for plain commands",
                        construct.what, construct.text
                    ));
                }
                if script.top().next().is_none() {
                    return Err(format!("command line {line:?} runs no command"));
                }
                if let Some(miss) = script.top().find(|c| !exactly(c)) {
                    return Err(format!("command {:?} does not match {}", miss.display(), written()));
                }
            }
            return Ok(format!("every command matches {}", written()));
        }
        for script in &asked.scripts {
            if let Some(hit) = script.commands.iter().find(|c| could(c)) {
                return Ok(format!(
                    "command {:?} ({}) matches {}",
                    hit.display(),
                    via(hit),
                    written()
                ));
            }
        }
        Err(format!("no command matches {}", written()))
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

impl PolicyFile {
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

    /// What answers this decision if nobody does in time: the ask rule's own timeout, else,
    /// when no rule matched, the file's default. `None`: a person has all the time there is.
    pub fn timeout_for(&self, decision: &Decision) -> Option<Timeout> {
        match decision.rule {
            Some(rule) if rule.answer == Answer::Ask => rule.timeout,
            Some(_) => None,
            None => self.timeout,
        }
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
command = "rm -rf"
answer = "deny"
reason = "never rm -rf"

[[rule]]
name = "read-only"
tool = "run_commands"
command = ["ls *", "cat *", "echo *", "git status"]
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
        let inside = |a: &Asked| {
            a.paths
                .iter()
                .map(|p| p.inside.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(inside(&read), ["src/a", "README.md"]);
        let patch = asked(
            "apply_patch",
            r#"{"input":"*** Begin Patch\n*** Update File: src/x.rs\n@@\n*** Add File: docs/y.md\n"}"#,
            ws,
        );
        assert_eq!(inside(&patch), ["src/x.rs", "docs/y.md"]);
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
    fn an_ask_rule_or_the_default_says_what_answers_when_nobody_does() {
        let p = PolicyFile::parse(
            "timeout = '1h'\non_timeout = 'deny'\n\
             [[rule]]\nname = 'edits'\ntool = 'editor'\nanswer = 'ask'\ntimeout = '10m'\non_timeout = 'approve'\n\
             [[rule]]\nname = 'ls'\ncommand = 'ls'\nanswer = 'approve'\n",
        )
        .unwrap();
        let of = |tool: &str, input: &str| {
            let a = asked(tool, input, None);
            p.timeout_for(&p.decide(&a))
        };
        let ten = Timeout {
            after: std::time::Duration::from_secs(600),
            answer: Answer::Approve,
        };
        assert_eq!(of("editor", r#"{"path":"a"}"#), Some(ten));
        assert_eq!(
            of("run_commands", r#"{"commands":["ls"]}"#),
            None,
            "an approve answers at once"
        );
        let hour = Timeout {
            after: std::time::Duration::from_secs(3600),
            answer: Answer::Deny,
        };
        assert_eq!(
            of("run_commands", r#"{"commands":["make"]}"#),
            Some(hour),
            "the default"
        );
    }
}
