//! The user commands, one file each; `daemon` runs the sidecar itself ([`crate::server`]).

pub mod act;
pub mod approvals;
pub mod client;
pub mod doctor;
pub mod fleet;
mod fleet_act;
mod fleet_conn;
mod fleet_serve;
pub mod hook;
pub mod install;
pub mod open;
pub mod out;
pub mod policy;
mod running;
pub mod service;
pub mod sessions;
pub mod show;
pub mod stream;
pub mod tail;
mod tail_nats;
pub mod usage;
pub mod validate;

use crate::server::settings::DaemonArgs;
use clap::{Parser, Subcommand};

/// Makes the Cline coding agent observable and controllable through the Agent Event Protocol
/// (AEP 0.1).
///
/// Quick start: `aep-cline install-hooks` once, `aep-cline service install` (or keep
/// `aep-cline daemon` running), then `aep-cline open` for the dashboard. Every Cline session's
/// activity lands as AEP events in ~/.aep/logs/cline/<session>.jsonl; `aep-cline sessions` lists
/// them, `aep-cline approvals` shows what waits for an answer, `aep-cline doctor` checks the setup.
#[derive(Parser)]
#[command(name = "aep-cline", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Daemon(Box<DaemonArgs>),
    /// The hook shim Cline runs (from the files install-hooks writes): stdin to the daemon.
    ///
    /// Always exits 0. Prints nothing on stdout unless a guardrail the user turned on
    /// (AEP_CLINE_POLICY, AEP_CLINE_BUDGET, AEP_CLINE_ENFORCE=closed) decides the call: then
    /// the control that carries it out. Blocks Cline for at most 250 ms (a tool call under a
    /// guardrail: 3 s; a call an `ask` rule holds: until a person answers, at most 105 s, 25 s
    /// for Cline 2.x); if the daemon is not there it spools the payload under
    /// AEP_CLINE_STATE_DIR/spool, and the daemon ingests it when it next runs.
    Hook,
    /// Install (or remove) the Cline hook files that run the shim.
    InstallHooks(install::InstallArgs),
    Stream(stream::StreamArgs),
    Usage(usage::UsageArgs),
    Tail(Box<tail::TailArgs>),
    Validate(validate::ValidateArgs),
    Sessions(sessions::SessionsArgs),
    Show(show::ShowArgs),
    Approvals(approvals::ApprovalsArgs),
    Approve(act::ApproveArgs),
    Deny(act::DenyArgs),
    Answer(act::AnswerArgs),
    Cancel(act::CancelArgs),
    End(act::EndArgs),
    Send(act::SendArgs),
    Open(open::OpenArgs),
    Doctor(doctor::DoctorArgs),
    Policy(policy::PolicyArgs),
    Service(service::ServiceArgs),
    Fleet(fleet::FleetArgs),
}

/// The binary's entry point.
pub fn main() -> std::process::ExitCode {
    // Cline blocks on the shim twice per tool call: `aep-cline hook` skips even the argument
    // parser. Anything else after `hook` goes through clap (and its errors) as usual.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "hook") && args.next().is_none() {
        return hook::run();
    }
    command()
}

/// Every other command. Not inlined into [`main`]: with every command's arguments and state
/// inlined, `main`'s stack frame was 55 KB, and the stack probe touched each of its 14 pages
/// (a page fault each) before the shim's fast path above ever ran.
#[inline(never)]
fn command() -> std::process::ExitCode {
    blank_settings_are_unset();
    let cli = Cli::parse();
    let result = match cli.command {
        // The shim's path stays minimal: no logging setup, no runtime.
        Command::Hook => return hook::run(),
        Command::Daemon(args) => {
            init_tracing();
            crate::server::run(*args)
        }
        Command::InstallHooks(args) => install::run(args),
        Command::Stream(args) => stream::run(args),
        Command::Usage(args) => usage::run(args),
        Command::Tail(args) => tail::prepare(*args).and_then(|(args, filter)| match args.nats {
            Some(_) => tail_nats::run(&args, filter),
            None => tail::run(args, filter),
        }),
        Command::Validate(args) => validate::run(args),
        Command::Sessions(args) => sessions::run(args),
        Command::Show(args) => show::run(args),
        Command::Approvals(args) => approvals::run(args),
        Command::Open(args) => open::run(args),
        // A person's commands: 0 accepted, 1 rejected, 2 not decided.
        Command::Approve(args) => return act::approve(args),
        Command::Deny(args) => return act::deny(args),
        Command::Answer(args) => return act::answer(args),
        Command::Cancel(args) => return act::cancel(args),
        Command::End(args) => return act::end(args),
        Command::Send(args) => return act::send_input(args),
        Command::Service(args) => match service::run(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Policy(args) => return policy::run(args),
        Command::Fleet(args) => return fleet::run(args),
        Command::Doctor(args) => match doctor::run(args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Errors may quote a log's content (a session id): made safe for the terminal.
            eprintln!("aep-cline: {}", out::terminal(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `AEP_TOKEN=` (set but blank) means no token, as it always has: a blank `AEP_*` variable is
/// taken as unset rather than as a malformed value. Runs before any thread exists.
fn blank_settings_are_unset() {
    let blank: Vec<_> = std::env::vars_os()
        .filter(|(k, v)| {
            k.to_str().is_some_and(|k| k.starts_with("AEP_")) && v.to_str().is_some_and(|v| v.trim().is_empty())
        })
        .map(|(k, _)| k)
        .collect();
    for name in blank {
        std::env::remove_var(name);
    }
}

/// Libraries whose debug and trace output prints WebSocket handshakes whole: the relay's
/// `Authorization: Bearer`, the hub's `Sec-WebSocket-Protocol: cline-hub-auth.<token>`. They log
/// at `info` and above only, whatever `RUST_LOG` says, so no token reaches a log.
const HANDSHAKE_PRINTERS: [&str; 4] = ["tungstenite", "tokio_tungstenite", "hyper", "rustls"];

/// Logs to stderr; `RUST_LOG` adjusts the level (default `info`). Colours only on a terminal
/// (and never with `NO_COLOR`): a log file or the journal gets plain text.
fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let quiet = tracing_subscriber::filter::filter_fn(|meta| {
        *meta.level() <= tracing::Level::INFO || !HANDSHAKE_PRINTERS.iter().any(|t| is_within(meta.target(), t))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(
                    std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none(),
                )
                .with_filter(quiet),
        )
        .init();
}

/// Whether `target` is the module `module` or inside it.
fn is_within(target: &str, module: &str) -> bool {
    target
        .strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}
