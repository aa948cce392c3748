//! `aep-cline`: the one binary. Each subcommand lives in its own module; `main` only parses
//! the command line and dispatches.

// The bus and the intake are wired to the endpoint and the relay next; until then unused.
#[allow(dead_code)]
mod bus;
mod config;
mod daemon;
mod discovery;
mod install;
#[allow(dead_code)]
mod intake;
mod journal;
mod server;
mod sessions;
mod shim;
mod shutdown;
mod spool;
mod stream;

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
