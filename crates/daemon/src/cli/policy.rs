//! `aep-cline policy test`: which rule of a policy file would answer a request, and why.

use super::out;
use crate::policy::{file, Asked};
use std::path::PathBuf;
use std::process::ExitCode;

/// The approval policy (AEP_CLINE_POLICY): check a file before the daemon uses it.
#[derive(clap::Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(clap::Subcommand, Debug)]
enum PolicyCommand {
    Test(TestArgs),
}

/// Say which rule of FILE would answer a request, and why.
///
/// Rules are tried in order and the first that matches answers (approve, deny or ask); when
/// none matches, a person answers ("ask: no rule matched"). An approve rule's `command` holds
/// only for plain command lines whose every simple command matches exactly; a deny or ask
/// rule's holds when any simple command anywhere could match (README, "Policy"). Rules that were tried first are
/// listed with why each did not match. Exit 0 when the file is good, 2 when it cannot be used
/// (the line and the problem are named, as the daemon would log them).
///
/// Example: aep-cline policy test ~/.aep/policy.toml --command 'git push origin main'
#[derive(clap::Args, Debug)]
struct TestArgs {
    /// The policy file (TOML; README, "Policy").
    file: PathBuf,
    /// A command line the request runs; repeat for a batch. It is read as bash reads it: the
    /// simple commands found (also inside substitutions and `bash -c`) and every construct
    /// that keeps an approve rule from holding are printed before the answer.
    #[arg(long, value_name = "COMMAND")]
    command: Vec<String>,
    /// The tool that asks [default: run_commands with --command, else editor with --path]
    #[arg(long, value_name = "TOOL")]
    tool: Option<String>,
    /// A file the tool touches, absolute or relative to the workspace; repeatable.
    #[arg(long, value_name = "PATH")]
    path: Vec<String>,
    /// The session's workspace folder.
    #[arg(long, value_name = "DIR")]
    workspace: Option<String>,
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
    let tool = args.tool.clone().unwrap_or_else(|| {
        match args.command.is_empty() && !args.path.is_empty() {
            true => "editor",
            false => "run_commands",
        }
        .to_string()
    });
    let input = serde_json::json!({"commands": args.command, "paths": args.path});
    let mut asked = Asked::from_approval(&tool, Some(&input.to_string()), args.workspace.as_deref());
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
            if let Some(reason) = rule
                .reason
                .as_deref()
                .filter(|_| rule.answer == crate::policy::Answer::Deny)
            {
                text.push_str(&format!("Cline is told: {reason}\n"));
            }
        }
        None => text.push_str("ask: no rule matched (a person answers)\n"),
    }
    if let Err(e) = out::print(&text) {
        eprintln!("aep-cline: {e:#}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
