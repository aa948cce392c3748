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

use crate::path::Place;
use crate::shell::{Script, SimpleCommand};
use crate::words::CommandPattern;
use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
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

/// The shortest and longest timeouts: shorter than a person can read, or longer than a run.
const TIMEOUT_BOUNDS: (u64, u64) = (5, 7 * 24 * 3600);

/// `"90s"`, `"10m"`, `"2h"`, `"1d"`: a whole number and its unit.
fn duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("timeout = {text:?} is not a time: write a number and s, m, h or d (\"10m\")"))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86400),
        _ => return Err(format!("timeout = {text:?} has no unit: write s, m, h or d (\"10m\")")),
    };
    if secs < TIMEOUT_BOUNDS.0 || secs > TIMEOUT_BOUNDS.1 {
        return Err(format!("timeout = {text:?} is outside 5s to 7d"));
    }
    Ok(std::time::Duration::from_secs(secs))
}

/// `timeout` and `on_timeout` go together, and `on_timeout` is approve or deny.
fn timeout_of(timeout: Option<&str>, on: Option<Answer>) -> Result<Option<Timeout>, String> {
    match (timeout, on) {
        (None, None) => Ok(None),
        (Some(_), None) => {
            Err("timeout needs on_timeout = \"deny\" (or \"approve\"): what answers when nobody did".into())
        }
        (None, Some(_)) => Err("on_timeout needs timeout = \"10m\" (how long a person has to answer)".into()),
        (Some(_), Some(Answer::Ask)) => Err("on_timeout = \"ask\" changes nothing: write deny or approve".into()),
        (Some(t), Some(answer)) => Ok(Some(Timeout {
            after: duration(t)?,
            answer,
        })),
    }
}

/// A compiled condition and the text it was written as.
#[derive(Debug)]
struct Pattern<M> {
    text: String,
    matcher: M,
}

/// The keys a rule may have.
const RULE_KEYS: [&str; 10] = [
    "name",
    "tool",
    "command",
    "command_regex",
    "path",
    "workspace",
    "answer",
    "reason",
    "timeout",
    "on_timeout",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    timeout: Option<String>,
    on_timeout: Option<Answer>,
    #[serde(default)]
    rule: Vec<toml::Spanned<toml::Table>>,
    #[serde(default)]
    budget: Vec<toml::Table>,
}

#[derive(Deserialize)]
struct RawRule {
    name: String,
    tool: Option<String>,
    command: Option<OneOrMore>,
    command_regex: Option<String>,
    path: Option<String>,
    workspace: Option<String>,
    answer: Answer,
    reason: Option<String>,
    timeout: Option<String>,
    on_timeout: Option<Answer>,
}

/// `command = "ls *"` or `command = ["ls *", "cat *"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMore {
    One(String),
    More(Vec<String>),
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
        if raw.rule.len() > MAX_RULES {
            let line = line_at(raw.rule[MAX_RULES].span().start);
            return Err(PolicyError::Rule {
                line,
                problem: format!(
                    "the file has {} rules, above the bound of {MAX_RULES}: a policy is a page of rules; join rules with lists (command = [..], tool = '{{a,b}}')",
                    raw.rule.len()
                ),
            });
        }
        let mut regexes = 0;
        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, spanned) in raw.rule.into_iter().enumerate() {
            let line = line_at(spanned.span().start);
            let rule = Rule::compile(i, line, spanned.into_inner(), &rules, &mut regexes)?;
            rules.push(rule);
        }
        let timeout = timeout_of(raw.timeout.as_deref(), raw.on_timeout).map_err(|e| PolicyError::Rule {
            line: 1,
            problem: format!("the file's default: {e}"),
        })?;
        Ok(PolicyFile {
            rules,
            timeout,
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

impl Rule {
    /// Compiles the file's `index`th `[[rule]]` (0-based), written at `line`. `earlier` are the
    /// rules before it (names are unique), `regexes` how many of them have a `command_regex`
    /// (at most [`MAX_REGEXES`]). The checks run in one fixed order, so a rule with several
    /// problems is always told the same first one.
    fn compile(
        index: usize,
        line: usize,
        table: toml::Table,
        earlier: &[Rule],
        regexes: &mut usize,
    ) -> Result<Rule, PolicyError> {
        let site = Site::of(index, line, &table);
        let label = &site.label;
        let raw = site.read(table, earlier)?;
        let command = site.commands(raw.command)?;
        if raw.command_regex.is_some() {
            *regexes += 1;
            if *regexes > MAX_REGEXES {
                return Err(site.bad(format!(
                    "{label}: more than {MAX_REGEXES} rules have command_regex, the bound that keeps the compiled policy small; write command as words (they cost little), or join regexes with |"
                )));
            }
        }
        let command_regex = raw.command_regex.map(|text| site.regex(text)).transpose()?;
        let timeout =
            timeout_of(raw.timeout.as_deref(), raw.on_timeout).map_err(|e| site.bad(format!("{label}: {e}")))?;
        if timeout.is_some() && raw.answer != Answer::Ask {
            return Err(site.bad(format!(
                "{label}: timeout is for answer = \"ask\" (a person has until then); an {} rule answers at once",
                raw.answer
            )));
        }
        Ok(Rule {
            timeout,
            tool: site.glob("tool", raw.tool)?,
            path: site.glob("path", raw.path)?,
            workspace: site.glob("workspace", raw.workspace)?,
            command,
            command_regex,
            name: raw.name,
            line,
            answer: raw.answer,
            reason: raw.reason.filter(|r| !r.trim().is_empty()),
        })
    }
}

/// Where a rule is written and what its problems call it (its name, else its number): every
/// [`PolicyError::Rule`] says both, so the author finds the rule.
struct Site {
    line: usize,
    label: String,
}

impl Site {
    fn of(index: usize, line: usize, table: &toml::Table) -> Site {
        let label = match table.get("name").and_then(toml::Value::as_str) {
            Some(name) => format!("rule {name:?}"),
            None => format!("rule #{}", index + 1),
        };
        Site { line, label }
    }

    fn bad(&self, problem: String) -> PolicyError {
        PolicyError::Rule {
            line: self.line,
            problem,
        }
    }

    /// The rule's table as its typed keys: no unknown key, the required ones there, and a
    /// name that is not empty and not an `earlier` rule's (decisions name their rule).
    fn read(&self, table: toml::Table, earlier: &[Rule]) -> Result<RawRule, PolicyError> {
        let label = &self.label;
        if let Some(key) = table.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
            return Err(self.bad(format!(
                "{label} has an unknown key {key:?}; a rule has {}",
                RULE_KEYS.join(", ")
            )));
        }
        let raw: RawRule = table.try_into().map_err(|e: toml::de::Error| {
            self.bad(format!(
                "{label}: {} (name and answer = approve|deny|ask are required)",
                e.message().trim_end()
            ))
        })?;
        if raw.name.trim().is_empty() {
            return Err(self.bad(format!("{label}: its name is empty; every decision names its rule")));
        }
        if earlier.iter().any(|r| r.name == raw.name) {
            return Err(self.bad(format!(
                "{label}: another rule has this name; decisions name their rule, so names are unique"
            )));
        }
        Ok(raw)
    }

    /// `tool`, `path` or `workspace` (`key`) compiled as a glob (`/` matched only by `/`).
    fn glob(&self, key: &str, text: Option<String>) -> Result<Option<Pattern<GlobMatcher>>, PolicyError> {
        let label = &self.label;
        text.map(|text| {
            GlobBuilder::new(&text)
                .literal_separator(true)
                .build()
                .map(|g: Glob| Pattern {
                    matcher: g.compile_matcher(),
                    text: text.clone(),
                })
                .map_err(|e| self.bad(format!("{label}: {key} = {text:?} is not a glob: {e}")))
        })
        .transpose()
    }

    /// `command`, one or a list of them (an empty list is refused: it would read as "none"),
    /// each compiled as words ([`CommandPattern`]).
    fn commands(&self, command: Option<OneOrMore>) -> Result<Vec<CommandPattern>, PolicyError> {
        let label = &self.label;
        match command {
            None => Vec::new(),
            Some(OneOrMore::One(text)) => vec![text],
            Some(OneOrMore::More(texts)) if texts.is_empty() => {
                return Err(self.bad(format!(
                    "{label}: command = [] has no command; leave it out to match every command"
                )))
            }
            Some(OneOrMore::More(texts)) => texts,
        }
        .iter()
        .map(|text| CommandPattern::parse(text).map_err(|e| self.bad(format!("{label}: {e}"))))
        .collect()
    }

    /// `command_regex` compiled, bounded in size ([`MAX_REGEX_BYTES`]); a glob written as a
    /// regex is refused, as it would match other than its author meant.
    fn regex(&self, text: String) -> Result<Pattern<Regex>, PolicyError> {
        let label = &self.label;
        if text.contains(" *") || text.starts_with('*') {
            return Err(self.bad(format!(
                "{label}: command_regex = {text:?} reads like a glob (in a regex `*` repeats what comes before it); for words with wildcards write command = {text:?}"
            )));
        }
        RegexBuilder::new(&text)
            .size_limit(MAX_REGEX_BYTES)
            .build()
            .map(|matcher| Pattern {
                matcher,
                text: text.clone(),
            })
            .map_err(|e| {
                self.bad(format!(
                    "{label}: command_regex = {text:?} is not a regex: {}",
                    one_line(&e)
                ))
            })
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
        let e = err("[[rule]]\nname = 'a'\nanswer = 'approve'\n\n[[rule]]\nname = 'b'\ncommand_regex = '(unclosed'\nanswer = 'deny'\n");
        assert_eq!(
            e,
            "line 5: rule \"b\": command_regex = \"(unclosed\" is not a regex: unclosed group"
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
        let e = err("[[rule]]\nname = 'x'\ncommand_regex = 'a{1000}{1000}'\nanswer = 'ask'\n");
        assert!(e.contains("is not a regex"), "{e}");
        let many: String = (0..=MAX_RULES)
            .map(|i| format!("[[rule]]\nname = 'r{i}'\ncommand = 'x{i} *'\nanswer = 'deny'\n"))
            .collect();
        let e = err(&many);
        assert!(
            e.starts_with(&format!("line {}: the file has 1001 rules", 4 * MAX_RULES + 1)),
            "{e}"
        );
        let regexes: String = (0..=MAX_REGEXES)
            .map(|i| format!("[[rule]]\nname = 'r{i}'\ncommand_regex = 'x\\w{{20}}'\nanswer = 'deny'\n"))
            .collect();
        let e = err(&regexes);
        assert!(e.contains("rule \"r64\": more than 64 rules have command_regex"), "{e}");
        for (text, says) in [
            ("timeout = '10m'", "needs on_timeout"),
            ("on_timeout = 'deny'", "needs timeout"),
            ("timeout = '10'\non_timeout = 'deny'", "has no unit"),
            ("timeout = '1s'\non_timeout = 'deny'", "outside 5s to 7d"),
            ("timeout = '10m'\non_timeout = 'ask'", "changes nothing"),
        ] {
            let e = err(&format!("[[rule]]\nname = 'x'\nanswer = 'ask'\n{text}\n"));
            assert!(e.contains("rule \"x\"") && e.contains(says), "{e}");
        }
        let e = err("[[rule]]\nname = 'x'\nanswer = 'deny'\ntimeout = '10m'\non_timeout = 'deny'\n");
        assert!(e.contains("timeout is for answer = \"ask\""), "{e}");
        let e = err("timeout = 'soon'\non_timeout = 'deny'\n");
        assert!(e.contains("the file's default") && e.contains("not a time"), "{e}");
        let big = format!("# {}\n", "x".repeat(MAX_BYTES as usize));
        assert!(matches!(PolicyFile::parse(&big), Err(PolicyError::TooLarge(_))));
    }
}
