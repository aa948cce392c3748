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
//! stop = "run"                        # deny only: end the run, not just fail the tool
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
//! The one principle, applied here alone: an `approve` rule holds only for what is read with
//! certainty. Its command condition holds only when every command line is plain (simple
//! commands joined by `&&`, `||`, `;`, `|`, newlines: no substitution, redirection to a file,
//! subshell, here-document, `eval`, `bash -c`, computed command name, unreadable text), each
//! simple command (and each command a wrapper runs) matches exactly, and every word that acts
//! (`rg --pre`, `git log --output`, `sed -i`: the programs table) is named by the rule; its path
//! condition only when every path of the call matches; and neither holds when part of the input
//! was not understood. A `deny` or `ask` rule holds when anything could match: any simple
//! command anywhere (inside substitutions, `bash -c` scripts, behind `sudo` or `xargs`, git's
//! own spellings of a push), any one path, and whatever could not be read (a command or word
//! the shell computes, code given to an interpreter, an input shape not understood) is taken as
//! what the rule fears.
//!
//! The file's text is read and checked in `rules/parse.rs`; this file holds the rules and
//! what they answer.

mod parse;

use crate::command::SimpleCommand;
use crate::input::{self, Part, Unread};
use crate::path::Place;
use crate::programs::Custom;
use crate::shell::Script;
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
    /// The `[[program]]` tables: programs whose options act, beside the table's.
    pub programs: Custom,
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
    /// What a deny stops: the tool call alone (the run goes on, the model is told why), or the
    /// whole run (`stop = "run"`).
    pub stop: Stop,
}

/// What a deny stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// The tool call does nothing and fails with the rule's words; the run goes on.
    #[default]
    Tool,
    /// The run ends.
    Run,
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

/// What a tool call asks, as the rules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    pub tool: String,
    /// The command lines it runs, as given (a structured command as the line it makes).
    pub commands: Vec<String>,
    /// Each command, read as bash reads it (a structured one as its words).
    pub scripts: Vec<Script>,
    /// The paths of a file tool, placed against the workspace.
    pub paths: Vec<Place>,
    /// The session's workspace folder, when the hooks said it.
    pub workspace: Option<String>,
    /// What in the input was not understood: never taken for "no command" or "no path".
    pub unread: Vec<Unread>,
    /// The home folder `~` stands for, when known: a path under it is also seen as `~/..`, and
    /// `~/..` as under it.
    pub home: Option<String>,
}

impl Asked {
    /// From a tool's name and its input as JSON text (the hub's `inputJson`), with the
    /// programs table alone.
    pub fn from_approval(tool: &str, input: Option<&str>, workspace: Option<&str>) -> Asked {
        Asked::from_text(tool, input, workspace, &Custom::default())
    }

    /// From a tool's name and its input as JSON text, with a policy's own programs.
    pub fn from_text(tool: &str, input: Option<&str>, workspace: Option<&str>, custom: &Custom) -> Asked {
        match input.map(serde_json::from_str::<Value>) {
            Some(Ok(value)) => Asked::from_input(tool, &value, workspace, custom),
            Some(Err(_)) => {
                let mut asked = Asked::from_input(tool, &Value::Null, workspace, custom);
                asked.unread = [Part::Commands, Part::Paths]
                    .map(|part| Unread {
                        part,
                        why: "the input is not JSON".into(),
                    })
                    .to_vec();
                asked
            }
            None => Asked::from_input(tool, &Value::Null, workspace, custom),
        }
    }

    /// From a tool's name (3.x's; a 2.x tool under its 3.x name) and its input as Cline
    /// gives it, in any shape Cline accepts ([`crate::input`]).
    pub fn from_input(tool: &str, input: &Value, workspace: Option<&str>, custom: &Custom) -> Asked {
        let workspace = workspace.filter(|w| !w.is_empty()).map(str::to_string);
        let read = match input {
            Value::Null => input::Read::default(),
            other => input::read(tool, other),
        };
        let paths = read.paths.iter().map(|p| Place::new(p, workspace.as_deref())).collect();
        let scripts = read
            .commands
            .iter()
            .map(|c| match c {
                input::Command::Line(line) => Script::read(line, custom),
                input::Command::Argv(argv) => Script::of_argv(argv, custom),
            })
            .collect();
        Asked {
            tool: tool.to_string(),
            commands: read.commands.iter().map(input::Command::line).collect(),
            scripts,
            paths,
            workspace,
            unread: read.unread,
            home: None,
        }
    }

    /// The home folder `~` stands for (the user's `HOME`).
    pub fn with_home(mut self, home: Option<&str>) -> Asked {
        self.home = home
            .filter(|h| h.starts_with('/') && h.len() > 1)
            .map(|h| h.trim_end_matches('/').to_string());
        self
    }

    /// Every form a path is seen in: inside the workspace (relative), absolute, and under `~`.
    fn forms(&self, place: &Place) -> [Option<String>; 3] {
        let absolute = match (&place.absolute, &self.home) {
            (Some(a), Some(home)) if a == "~" || a.starts_with("~/") => Some(format!("{home}{}", &a[1..])),
            (a, _) => a.clone(),
        };
        let tilde = match (&absolute, &self.home) {
            (Some(a), Some(home)) => a
                .strip_prefix(home.as_str())
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
                .map(|rest| format!("~{rest}")),
            _ => None,
        }
        .or_else(|| place.absolute.clone().filter(|a| a.starts_with('~')));
        [place.inside.clone(), absolute, tilde]
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
                for a in &c.acting {
                    let word = c.words.get(a.at).map_or("", |w| w.text.as_str());
                    out.push_str(&format!("    {word:?} {} ({})\n", a.does, a.option));
                }
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
        for u in &self.unread {
            let part = match u.part {
                Part::Commands => "its commands",
                Part::Paths => "its paths",
            };
            out.push_str(&format!("cannot read {part}: {}\n", u.why));
        }
        out
    }

    /// Why the `part` of the input could not be read, when it could not.
    fn unread(&self, part: Part) -> Option<String> {
        let whys: Vec<&str> = self
            .unread
            .iter()
            .filter(|u| u.part == part)
            .map(|u| u.why.as_str())
            .collect();
        (!whys.is_empty()).then(|| whys.join("; "))
    }
}

fn via(c: &SimpleCommand) -> String {
    use crate::command::Via;
    match &c.via {
        Via::Top => "at the top".into(),
        Via::Substitution => "inside a substitution".into(),
        Via::Script(by) => format!("in a script {by} runs"),
        Via::Wrapped(by) => format!("as the command {by} runs"),
        Via::Compound => "inside a compound command".into(),
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
        let strict = self.answer == Answer::Approve;
        if !self.command.is_empty() || self.command_regex.is_some() {
            if let Some(unread) = asked.unread(Part::Commands) {
                // What cannot be read: never proven, always feared.
                return match strict {
                    true => Err(format!(
                        "its commands cannot be read ({unread}); an approve rule holds only for what is read"
                    )),
                    false => Ok(format!(
                        "its commands cannot be read ({unread}), which this rule takes as what it fears"
                    )),
                };
            }
            if asked.scripts.is_empty() {
                return Err("the request has no command".into());
            }
            why.push(self.check_commands(asked, strict)?);
        }
        if let Some(p) = &self.path {
            if let Some(unread) = asked.unread(Part::Paths) {
                return match strict {
                    true => Err(format!(
                        "its paths cannot be read ({unread}); an approve rule holds only for what is read"
                    )),
                    false => Ok(format!(
                        "its paths cannot be read ({unread}), which this rule takes as what it fears"
                    )),
                };
            }
            if asked.paths.is_empty() {
                return Err("the request names no path".into());
            }
            // An approve rule's relative glob sees only paths inside the workspace, relative to
            // it, and an absolute one (`/..`, `~/..`) the absolute path; a deny or ask rule's
            // glob holds when any form of the path could match (`**/.env` fears an .env
            // outside the workspace too).
            let absolute = p.text.starts_with('/') || p.text.starts_with('~');
            let seen = |place: &Place| -> Vec<String> {
                let [inside, abs, tilde] = asked.forms(place);
                match (strict, absolute) {
                    (true, true) => [abs, tilde].into_iter().flatten().collect(),
                    (true, false) => inside.into_iter().collect(),
                    (false, _) => [inside, abs, tilde].into_iter().flatten().collect(),
                }
            };
            let hit = |place: &Place| seen(place).into_iter().find(|at| p.matcher.is_match(at));
            let placed = |place: &Place, at: Option<String>| match at.or_else(|| seen(place).into_iter().next()) {
                Some(at) if at != place.given => format!("{:?} (as {at:?})", place.given),
                Some(_) => format!("{:?}", place.given),
                None => format!("{:?} (outside the workspace)", place.given),
            };
            if strict {
                if let Some(miss) = asked.paths.iter().find(|place| hit(place).is_none()) {
                    return Err(format!("path {} does not match {:?}", placed(miss, None), p.text));
                }
                why.push(format!("every path matches {:?}", p.text));
            } else {
                match asked.paths.iter().find_map(|place| hit(place).map(|at| (place, at))) {
                    Some((place, at)) => why.push(format!("path {} matches {:?}", placed(place, Some(at)), p.text)),
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
        // For approve: Ok, or why the command does not hold (the first pattern's reason when
        // it names an acting word: that is what the author needs to read).
        let exactly = |c: &SimpleCommand| -> Result<(), String> {
            let mut acting_why = None;
            for p in &self.command {
                match p.exactly(c) {
                    Ok(()) => return Ok(()),
                    Err(why) if why != "does not match" => {
                        acting_why.get_or_insert(why);
                    }
                    Err(_) => {}
                }
            }
            let by_regex = self.command_regex.as_ref().is_some_and(|r| {
                !c.is_unknown()
                    && c.words.iter().all(|w| w.is_static())
                    && r.matcher.is_match(&c.display())
                    && c.acting.iter().all(|a| r.text.contains(a.option.as_str()))
            });
            match by_regex {
                true => Ok(()),
                false => Err(acting_why.unwrap_or_else(|| "does not match".into())),
            }
        };
        let could = |c: &SimpleCommand| {
            self.command.iter().any(|p| p.could_hold(c))
                || self.command_regex.as_ref().is_some_and(|r| {
                    c.is_unknown()
                        || c.words.first().is_some_and(|w| w.may_be_anything() || w.globbed)
                        || r.matcher.is_match(&c.display())
                })
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
                for c in script.run_directly() {
                    match exactly(c) {
                        Ok(()) => {}
                        Err(why) if why == "does not match" => {
                            return Err(format!(
                                "command {:?} ({}) does not match {}",
                                c.display(),
                                via(c),
                                written()
                            ))
                        }
                        Err(why) => return Err(format!("command {:?} ({}): {why}", c.display(), via(c))),
                    }
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
    /// What a tool call asks, read with this file's own programs.
    pub fn asked(&self, tool: &str, input: &Value, workspace: Option<&str>) -> Asked {
        Asked::from_input(tool, input, workspace, &self.programs)
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
        assert_eq!(
            decided(&p, &asked("run_commands", r#"{"commands":[]}"#, None)),
            (Answer::Ask, None)
        );
        // An input that cannot be read is what a deny rule fears, and nothing an approve proves.
        for unread in ["{}", "not json", r#"{"commands":5}"#] {
            let d = p.decide(&asked("run_commands", unread, None));
            assert_eq!(d.rule.map(|r| r.name.as_str()), Some("no-rm-rf"), "{unread}");
            assert!(d.why.contains("cannot be read"), "{}", d.why);
        }
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
