//! `aep-cline policy test`: which rule of a policy file would answer a tool call, and why; or
//! whether it answers a file of cases as written.

use super::out;
use crate::policy::{file, Answer, PolicyFile};
use cline_policy::cases;
use std::path::PathBuf;
use std::process::ExitCode;

/// The policy over tool calls (AEP_CLINE_POLICY): check a file before the daemon uses it.
#[derive(clap::Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(clap::Subcommand, Debug)]
enum PolicyCommand {
    Test(TestArgs),
}

/// Say which rule of FILE would answer a tool call, and why; or check FILE against cases.
///
/// Rules are tried in order and the first that matches answers (approve, deny or ask); when
/// none matches, a person answers ("ask: no rule matched"). The one principle: an approve
/// rule holds only for what is read with certainty (every command plain and matching exactly,
/// every option that acts named, every path matching); a deny or ask rule holds for anything
/// that could match, and for whatever cannot be read (README, "Policy"). Rules tried first are
/// listed with why each did not match.
///
/// Exit 0 when the file is good (and, with --cases, every case is answered as written), 1 when
/// a case is not, 2 when the file or the cases cannot be used.
///
/// Examples:
///   aep-cline policy test ~/.aep/policy.toml --command 'git push origin HEAD:main'
///   aep-cline policy test ~/.aep/policy.toml --tool read_files --input '{"files":[{"file_path":"/etc/shadow"}]}'
///   aep-cline policy test ~/.aep/policy.toml --cases my-cases.jsonl
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
struct TestArgs {
    /// The policy file (TOML; README, "Policy").
    file: PathBuf,
    /// A command line the call runs; repeat for a batch. It is read as bash reads it: the
    /// simple commands found (also inside substitutions and `bash -c`), the words that act, and
    /// every construct that keeps an approve rule from holding are printed before the answer.
    #[arg(long, value_name = "COMMAND", conflicts_with = "input")]
    command: Vec<String>,
    /// The tool that asks [default: run_commands with --command, editor with one --path,
    /// read_files with several]
    #[arg(long, value_name = "TOOL")]
    tool: Option<String>,
    /// A file the tool touches, absolute or relative to the workspace; repeatable.
    #[arg(long, value_name = "PATH", conflicts_with = "input")]
    path: Vec<String>,
    /// The tool's input as Cline gives it to the hook (JSON, in any shape Cline accepts).
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// The session's workspace folder.
    #[arg(long, value_name = "DIR")]
    workspace: Option<String>,
    /// A file of cases (JSON Lines: {"line": "..", "expect": "deny", "rule": ".."} or
    /// {"tool": "..", "input": {..}, "expect": "approve"}): each is decided, the ones answered
    /// otherwise are printed, and a summary.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["command", "path", "input"])]
    cases: Option<PathBuf>,
}

pub fn run(args: PolicyArgs) -> ExitCode {
    let PolicyCommand::Test(args) = args.command;
    let policy = match file::read(&args.file) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("aep-cline: {}", out::terminal(&e));
            return ExitCode::from(2);
        }
    };
    let result = match &args.cases {
        Some(path) => run_cases(&policy, path),
        None => one(&policy, &args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("aep-cline: {}", out::terminal(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// The call the arguments describe: its tool and its input.
fn call(args: &TestArgs) -> anyhow::Result<(String, serde_json::Value)> {
    if let Some(text) = &args.input {
        let input = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("--input is not JSON ({e}); give the tool's input as Cline sends it, such as '{{\"commands\":[\"ls\"]}}'"))?;
        let tool = args.tool.clone().unwrap_or_else(|| "run_commands".into());
        return Ok((tool, input));
    }
    if !args.command.is_empty() {
        let tool = args.tool.clone().unwrap_or_else(|| "run_commands".into());
        return Ok((tool, serde_json::json!({ "commands": args.command })));
    }
    let default = match args.path.len() {
        1 => "editor",
        _ => "read_files",
    };
    let tool = args.tool.clone().unwrap_or_else(|| default.into());
    let input = match (tool.as_str(), args.path.as_slice()) {
        ("editor" | "new_rule", [one]) => serde_json::json!({ "path": one }),
        ("editor" | "new_rule", _) => {
            anyhow::bail!("{tool} names one path: give one --path, or --tool read_files for several")
        }
        _ => {
            serde_json::json!({ "files": args.path.iter().map(|p| serde_json::json!({ "path": p })).collect::<Vec<_>>() })
        }
    };
    Ok((tool, input))
}

fn one(policy: &PolicyFile, args: &TestArgs) -> anyhow::Result<ExitCode> {
    let (tool, input) = call(args)?;
    let home = std::env::var("HOME").ok();
    let mut asked = policy
        .asked(&tool, &input, args.workspace.as_deref())
        .with_home(home.as_deref());
    crate::policy::links::resolve(&mut asked);
    let decision = policy.decide(&asked);
    // What was read first: the simple commands, the constructs, where each path lies.
    let mut text = asked.describe();
    for (rule, why) in &decision.skipped {
        text.push_str(&format!("  skipped {:?} (line {}): {why}\n", rule.name, rule.line));
    }
    match decision.rule {
        Some(rule) => {
            text.push_str(&format!(
                "{}: rule {:?} (line {}): {}\n",
                rule.answer, rule.name, rule.line, decision.why
            ));
            if let Some(reason) = rule.reason.as_deref().filter(|_| rule.answer == Answer::Deny) {
                text.push_str(&format!("Cline is told: {reason}\n"));
            }
        }
        None => text.push_str("ask: no rule matched (a person answers)\n"),
    }
    out::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn run_cases(policy: &PolicyFile, path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let text = cline_usage::vendor_file::read_to_string(path, 64 << 20)
        .map_err(|e| anyhow::anyhow!("cannot read the cases {}: {e}", path.display()))?;
    let cases = cases::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut text = String::new();
    let mut wrong = 0;
    for case in &cases {
        let got = cases::decide(policy, case);
        if !got.holds(case) {
            wrong += 1;
            let expected = match &case.rule {
                Some(rule) => format!("{} by {rule:?}", case.expect),
                None => case.expect.to_string(),
            };
            let answered = match &got.rule {
                Some(rule) => format!("{} by {rule:?}", got.answer),
                None => got.answer.to_string(),
            };
            text.push_str(&format!(
                "line {}: {} {}: {answered}, expected {expected}: {}\n",
                case.at, case.tool, case.input, got.why
            ));
        }
    }
    text.push_str(&format!(
        "{} of {} cases answered as written ({wrong} not)\n",
        cases.len() - wrong,
        cases.len()
    ));
    out::print(&text)?;
    Ok(match wrong {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}
