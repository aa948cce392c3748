//! `aep-cline`: the one binary. Each subcommand lives in its own module; `main` only parses
//! the command line and dispatches.

mod bus;
mod config;
mod control_http;
mod daemon;
mod discovery;
mod endpoint;
mod hub;
mod install;
mod intake;
mod journal;
mod relay;
mod server;
mod sessions;
mod shim;
mod shutdown;
mod spool;
mod stream;
mod tail;
mod validate_cmd;

use clap::{Parser, Subcommand};

/// Makes the Cline coding agent observable and controllable through the Agent Event Protocol
/// (AEP 0.1).
///
/// Quick start: run `aep-cline daemon` (keep it running), then `aep-cline install-hooks` once.
/// Every Cline session's activity then lands as AEP events in ~/.aep/logs/cline/<session>.jsonl.
#[derive(Parser)]
#[command(name = "aep-cline", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: receive hooks, map them to AEP events, write the session logs.
    ///
    /// Settings (environment): AEP_LISTEN (default 127.0.0.1:8789), AEP_LOG_DIR (default
    /// ~/.aep/logs; events go to AEP_LOG_DIR/cline/<session>.jsonl), AEP_CAPTURE (capture
    /// ceiling, default `metadata`; per-category overrides like `metadata,tool=redacted`),
    /// AEP_REDACT_PII (1 or 0, default 1), AEP_REDACT_SECRET_ENV (comma-separated names of
    /// environment variables whose values are redacted), AEP_CLINE_MAX_BODY (bytes, default
    /// 32 MiB), AEP_HOST (the host in `source` URIs), AEP_CLINE_STATE_DIR (discovery file and
    /// spool, default ~/.aep/cline). Stop it with SIGINT or SIGTERM.
    ///
    /// The embedded AEP endpoint (GET/POST /events, GET /stream, /socket) is on by default:
    /// AEP_ENDPOINT (0 turns it off), AEP_TOKEN (bearer token; without it the endpoint is open
    /// for observation and refuses every command), AEP_BUFFER (replay Events per session,
    /// default 10000), AEP_MAX_SESSIONS, AEP_MAX_BODY, AEP_MAX_BATCH, AEP_MAX_FROM, AEP_PING_MS.
    /// The relay binding is on when AEP_RELAY_URL names a relay (ws://host:8787/socket), with
    /// AEP_RELAY_TOKEN (default AEP_TOKEN) and AEP_RELAY_OUTBOX (default 10000 Events).
    ///
    /// The hub control tap is off by default: AEP_CLINE_HUB=1 mirrors Cline's approvals as
    /// attention events, AEP_CLINE_HUB_CONTROL=1 also accepts respond, cancel and send_input
    /// commands; the hub is AEP_CLINE_HUB_DISCOVERY (its discovery file, e.g.
    /// $CLINE_DIR/data/locks/hub/production.json) or AEP_CLINE_HUB_URL with AEP_CLINE_HUB_TOKEN;
    /// AEP_CLINE_HUB_ACK_GUARD_MS (default 8000). POST /control takes one command Event with the
    /// discovery file's token.
    Daemon,
    /// The hook shim Cline runs (from the files install-hooks writes): stdin to the daemon.
    ///
    /// Prints nothing on stdout, always exits 0, and never blocks Cline for more than 250 ms:
    /// if the daemon is not there it spools the payload under AEP_CLINE_STATE_DIR/spool, and the
    /// daemon ingests it when it next runs.
    Hook,
    /// Install (or remove) the Cline hook files that run the shim.
    InstallHooks(install::InstallArgs),
    Stream(stream::StreamArgs),
    Tail(tail::TailArgs),
    Validate(validate_cmd::ValidateArgs),
}

fn main() -> std::process::ExitCode {
    // Cline blocks on the shim twice per tool call: `aep-cline hook` skips even the argument
    // parser. Anything else after `hook` goes through clap (and its errors) as usual.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "hook") && args.next().is_none() {
        return shim::run();
    }
    let cli = Cli::parse();
    let result = match cli.command {
        // The shim's path stays minimal: no logging setup, no runtime.
        Command::Hook => return shim::run(),
        Command::Daemon => {
            init_tracing();
            daemon::run()
        }
        Command::InstallHooks(args) => install::run(args),
        Command::Stream(args) => stream::run(args),
        Command::Tail(args) => tail::run(args),
        Command::Validate(args) => validate_cmd::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aep-cline: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs to stderr; `RUST_LOG` adjusts the level (default `info`).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
