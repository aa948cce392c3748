//! The policy file's text read into compiled [`Rule`]s: the TOML, the keys a rule may have,
//! and every problem told with its line and the rule's name, so the author finds it.
//!
//! Apart from the decision ([`crate::rules`]) because it runs once per file, not per tool
//! call, and holds every bound a hostile file meets (size, rule count, regex count and size).

use super::{
    Answer, CommandPattern, Pattern, PolicyError, PolicyFile, Rule, Stop, Timeout, MAX_BYTES, MAX_REGEXES,
    MAX_REGEX_BYTES, MAX_RULES,
};
use crate::programs::{Custom, CustomProgram, CustomRuns};
use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

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

/// The keys a rule may have.
const RULE_KEYS: [&str; 11] = [
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
    "stop",
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
    #[serde(default)]
    program: Vec<toml::Spanned<toml::Table>>,
}

/// A `[[program]]` table: a program whose options act, beside the programs table's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProgram {
    name: OneOrMore,
    acts: Vec<String>,
    #[serde(default)]
    runs: Option<String>,
    #[serde(default)]
    wrapper: bool,
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
    stop: Option<Stop>,
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
        let mut programs = Custom::default();
        for spanned in raw.program {
            let line = line_at(spanned.span().start);
            programs.programs.push(program(line, spanned.into_inner())?);
        }
        Ok(PolicyFile {
            rules,
            timeout,
            budget: raw.budget,
            programs,
        })
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
        if raw.stop.is_some() && raw.answer == Answer::Approve {
            return Err(site.bad(format!(
                "{label}: stop is for a deny (or an ask's on_timeout = \"deny\"): what the deny stops, the tool (the default) or the run"
            )));
        }
        let conditions = [
            raw.tool.is_some(),
            !command.is_empty(),
            command_regex.is_some(),
            raw.path.is_some(),
            raw.workspace.is_some(),
        ];
        if raw.answer == Answer::Approve && !conditions.contains(&true) {
            // Half a file (a writer that paused after `answer`) must not approve everything;
            // nor must a rule whose condition was forgotten.
            return Err(site.bad(format!(
                "{label} approves every tool call: it has no condition (tool, command, command_regex, path, workspace); write tool = \"*\" if that is what it means"
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
            stop: raw.stop.unwrap_or_default(),
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

/// A `[[program]]` table, checked: a name, its acting options spelled as options, what their
/// values run.
fn program(line: usize, table: toml::Table) -> Result<CustomProgram, PolicyError> {
    let bad = |problem: String| PolicyError::Rule { line, problem };
    let raw: RawProgram = table.try_into().map_err(|e: toml::de::Error| {
        bad(format!(
            "[[program]]: {} (a program has name, acts = [\"--option\", ...], and may have runs = \"command\" or \"script\" and wrapper = true)",
            e.message().trim_end()
        ))
    })?;
    let names = match raw.name {
        OneOrMore::One(n) => vec![n],
        OneOrMore::More(n) => n,
    };
    if names.is_empty() || names.iter().any(|n| n.is_empty() || n.contains(['/', ' '])) {
        return Err(bad(format!(
            "[[program]]: name = {names:?} must be program names (no folder, no space)"
        )));
    }
    if let Some(odd) = raw
        .acts
        .iter()
        .find(|o| !(o.starts_with('-') || o.starts_with('+')) || o.len() < 2 || o.contains(' '))
    {
        return Err(bad(format!(
            "[[program]] {:?}: acts = {odd:?} is not an option: write it as the program spells it (\"--exec\", \"-x\")",
            names[0]
        )));
    }
    let runs = match raw.runs.as_deref() {
        None | Some("nothing") => CustomRuns::Nothing,
        Some("command") => CustomRuns::Command,
        Some("script") => CustomRuns::Script,
        Some(other) => {
            return Err(bad(format!(
                "[[program]] {:?}: runs = {other:?}: write \"command\" (its value is a program) or \"script\" (a shell runs it)",
                names[0]
            )))
        }
    };
    Ok(CustomProgram {
        names,
        acts: raw.acts,
        runs,
        wrapper: raw.wrapper,
    })
}

/// A regex error on one line: its last line says what is wrong (the others point at it).
fn one_line(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or_default();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = err("[[rule]]\nname = 'a'\ntool = '*'\nanswer = 'approve'\n\n[[rule]]\nname = 'b'\ncommand_regex = '(unclosed'\nanswer = 'deny'\n");
        assert_eq!(
            e,
            "line 6: rule \"b\": command_regex = \"(unclosed\" is not a regex: unclosed group"
        );
        let e = err("[[rule]]\nname = 'x'\ntool = '*'\nanswer = 'approve'\nstop = 'run'\n");
        assert!(e.contains("stop is for a deny"), "{e}");
        let e = err("[[rule]]\nname = 'x'\ntool = '*'\nanswer = 'deny'\nstop = 'session'\n");
        assert!(e.contains("rule \"x\"") && e.contains("session"), "{e}");
        let run = PolicyFile::parse("[[rule]]\nname = 'x'\ntool = '*'\nanswer = 'deny'\nstop = 'run'\n").unwrap();
        assert_eq!(run.rules[0].stop, Stop::Run);
        let e = err("[[rule]]\nname = 'all'\nanswer = 'approve'\n");
        assert!(
            e.contains("rule \"all\" approves every tool call") && e.contains("tool = \"*\""),
            "{e}"
        );
        assert!(PolicyFile::parse("[[rule]]\nname = 'all'\ntool = '*'\nanswer = 'approve'\n").is_ok());
        assert!(PolicyFile::parse("[[rule]]\nname = 'none'\nanswer = 'deny'\n").is_ok());
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
