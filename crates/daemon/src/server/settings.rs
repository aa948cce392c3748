//! Every setting of `aep-cline daemon`, composed: each subsystem defines its own clap struct in
//! its `settings.rs` (the endpoint, the relay, OTLP, JetStream, the hub tap, notifications) and
//! this file flattens them into the command beside the daemon's own (listener, logs, sessions,
//! connections, dashboard). Each field is read from its flag or its `AEP_*` variable with its
//! default, through the readers of [`crate::setting`]; `aep-cline daemon --help` is printed from
//! these same definitions, so it cannot drift from what the code reads. A malformed value is
//! refused at start, naming the setting. Only these structs read the environment.

use crate::endpoint::settings::EndpointArgs;
use crate::http::serve::Limits;
use crate::hub::settings::HubArgs;
use crate::lane::Lifetime;
use crate::setting;
use crate::sinks::relay::settings::RelayArgs;
use aep_core::redact::RedactOptions;
use aep_core::CapturePolicy;
use anyhow::bail;
use clap::{ArgAction, Args};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The default listener: loopback, next to (not on) an AEP relay's 8787.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8789";

/// Run the daemon: receive hooks, map them to AEP events, write the session logs, serve them.
///
/// Every setting below is a flag or, more usually, an environment variable; the flag wins.
/// A bad value stops the daemon at start with the setting's name. Stop it with SIGINT or
/// SIGTERM: in-flight hooks finish, then it exits 0.
#[derive(Args, Debug, Clone)]
pub struct DaemonArgs {
    #[command(flatten)]
    pub core: CoreArgs,
    #[command(flatten)]
    pub logs: LogArgs,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub connections: ConnectionArgs,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub relay: RelayArgs,
    #[command(flatten)]
    pub otlp: crate::sinks::otlp::settings::OtlpArgs,
    #[command(flatten)]
    pub nats: crate::sinks::nats::settings::NatsArgs,
    #[command(flatten)]
    pub hub: HubArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
    #[command(flatten)]
    pub notify: crate::notify::settings::NotifyArgs,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Dashboard")]
pub struct DashboardArgs {
    /// The dashboard at / (`aep-cline open` signs in to it): 1 or 0.
    #[arg(long, env = "AEP_DASHBOARD", default_value = "1", value_name = "1|0",
          value_parser = setting::gate("AEP_DASHBOARD"), action = ArgAction::Set)]
    pub dashboard: bool,
    /// The local view: the dashboard, `approvals` and `show` show the signed-in owner what a
    /// pending approval asks (command, files, diff summary) and each session's title and
    /// folder, from the daemon's memory and Cline's own store, redacted; never in an Event
    /// (AEP_CAPTURE alone governs those): 1 or 0.
    #[arg(long, env = "AEP_CLINE_LOCAL_DETAIL", default_value = "1", value_name = "1|0",
          value_parser = setting::gate("AEP_CLINE_LOCAL_DETAIL"), action = ArgAction::Set)]
    pub local_detail: bool,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Hooks and logs")]
pub struct CoreArgs {
    /// The listener for hooks and the AEP endpoint; `host:0` picks a free port (the discovery
    /// file says which).
    #[arg(long, env = "AEP_LISTEN", default_value = DEFAULT_LISTEN, value_name = "HOST:PORT",
          value_parser = listen)]
    pub listen: SocketAddr,
    /// Where the logs go: DIR/cline/<session>.jsonl [default: ~/.aep/logs]
    #[arg(long, env = "AEP_LOG_DIR", value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// The lock, the discovery file and the spool; the shim reads the same variable
    /// [default: ~/.aep/cline]
    #[arg(long, env = "AEP_CLINE_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The capture ceiling (AEP-0003 §9.1): none, metadata, redacted or full, then per-category
    /// overrides, e.g. `metadata,tool=redacted,attention=redacted`.
    #[arg(long, env = "AEP_CAPTURE", default_value = "metadata", value_name = "LEVEL[,CATEGORY=LEVEL]",
          value_parser = capture)]
    pub capture: CapturePolicy,
    /// Email and phone redaction at `redacted` (AEP-0003 §9.4d): 1 or 0.
    #[arg(long, env = "AEP_REDACT_PII", default_value = "1", value_name = "1|0",
          value_parser = setting::gate("AEP_REDACT_PII"), action = ArgAction::Set)]
    pub redact_pii: bool,
    /// Comma-separated names of environment variables whose values are always redacted
    /// (AEP-0003 §9.4b).
    #[arg(long, env = "AEP_REDACT_SECRET_ENV", value_name = "NAME,...", value_delimiter = ',')]
    pub redact_secret_env: Vec<String>,
    /// Hook bodies above this many bytes get 413.
    #[arg(long, env = "AEP_CLINE_MAX_BODY", default_value = "33554432", value_name = "BYTES",
          value_parser = setting::positive("AEP_CLINE_MAX_BODY", "bytes"))]
    pub max_body: usize,
    /// Spooled hooks kept at most, in bytes; past it a new hook is not spooled and the oldest
    /// are kept. The shim reads the same variable, so set it where Cline's hooks see it too.
    #[arg(long, env = "AEP_CLINE_SPOOL_MAX", default_value = "268435456", value_name = "BYTES",
          value_parser = setting::positive("AEP_CLINE_SPOOL_MAX", "bytes"))]
    pub spool_max: usize,
    /// The `{host}` of every `source` URI [default: the hostname]
    #[arg(long, env = "AEP_HOST", value_name = "HOST")]
    pub host: Option<String>,
    /// Prices for models the bundled table lacks (a private model): OpenRouter's models JSON,
    /// the format `aep-cline usage --prices` reads; runs of those models then carry a cost.
    #[arg(long, env = "AEP_CLINE_PRICES", value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Money limits in USD on a run, a session and a UTC day, e.g. `run=2.00,session=10,day=50`:
    /// at 80% a notice, at 100% the run is cancelled through Cline's hub (README, "Budgets").
    #[arg(long, env = "AEP_CLINE_BUDGET", value_name = "BUDGETS", value_parser = budget)]
    pub budget: Option<crate::budget::Budgets>,
    /// What a budget reached at a tool call stops: `tool` (the call does nothing and fails, the
    /// model is told the budget is spent, the run goes on to its end) or `run` (the run ends).
    #[arg(long, env = "AEP_CLINE_BUDGET_STOP", default_value = "tool", value_name = "tool|run",
          value_parser = budget_stop)]
    pub budget_stop: crate::policy::rules::Stop,
}

fn budget_stop(text: &str) -> Result<crate::policy::rules::Stop, String> {
    match text.trim() {
        "tool" => Ok(crate::policy::rules::Stop::Tool),
        "run" => Ok(crate::policy::rules::Stop::Run),
        other => Err(format!(
            "AEP_CLINE_BUDGET_STOP={other:?}: write tool (the call fails, the run goes on) or run (the run ends)"
        )),
    }
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Hooks and logs")]
pub struct LogArgs {
    /// Remove the logs of sessions that ended and were last written longer ago than this
    /// (e.g. 30d), checked at start and daily; logs of sessions that never ended are kept
    /// [default: keep every log]
    #[arg(long, env = "AEP_LOG_RETAIN", value_name = "DURATION", value_parser = setting::duration("AEP_LOG_RETAIN", Duration::ZERO, "60s, 5m or 4h"))]
    pub log_retain: Option<Duration>,
    /// Sync each hook's log lines to the disk (fdatasync) before the hook is answered, so a
    /// power loss loses no answered hook: 1 or 0. A process crash loses nothing either way
    /// [default: 0; the cost is in docs/benchmarks.md]
    #[arg(long, env = "AEP_LOG_SYNC", default_value = "0", value_name = "1|0",
          value_parser = setting::gate("AEP_LOG_SYNC"), action = ArgAction::Set)]
    pub log_sync: bool,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Session lifetime")]
pub struct SessionArgs {
    /// How long an ended session stays in memory, for late hooks, hub frames and acks
    /// (e.g. 60s, 5m).
    #[arg(long, env = "AEP_SESSION_GRACE", default_value = "60s", value_name = "DURATION",
          value_parser = setting::duration("AEP_SESSION_GRACE", Duration::ZERO, "60s, 5m or 4h"))]
    pub session_grace: Duration,
    /// How long a session without any work stays in memory; it is reloaded from its log if it
    /// speaks again (e.g. 4h, 30m).
    #[arg(long, env = "AEP_SESSION_IDLE", default_value = "4h", value_name = "DURATION",
          value_parser = setting::duration("AEP_SESSION_IDLE", Duration::ZERO, "60s, 5m or 4h"))]
    pub session_idle: Duration,
    /// How long a session whose Cline store exists but cannot be read (sessions.db locked,
    /// say) waits for it before it is ended on the rest of the evidence (e.g. 10m).
    #[arg(long, env = "AEP_SESSION_STORE_PATIENCE", default_value = "10m", value_name = "DURATION",
          value_parser = setting::duration("AEP_SESSION_STORE_PATIENCE", Duration::ZERO, "60s, 10m or 1h"))]
    pub session_store_patience: Duration,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Connections")]
pub struct ConnectionArgs {
    /// Open connections at most (hooks, streams, sockets, posts); beyond it a new connection is
    /// closed at once and a warning logged.
    #[arg(long, env = "AEP_MAX_CONNECTIONS", default_value = "512", value_name = "CONNECTIONS",
          value_parser = setting::positive("AEP_MAX_CONNECTIONS", "connections"))]
    pub max_connections: usize,
    /// Of AEP_MAX_CONNECTIONS, how many are kept for hooks: observers never take them.
    #[arg(long, env = "AEP_HOOK_CONNECTIONS", default_value = "64", value_name = "CONNECTIONS",
          value_parser = setting::positive("AEP_HOOK_CONNECTIONS", "connections"))]
    pub hook_connections: usize,
    /// A connection that has not sent a whole request head within this is closed (e.g. 10s).
    #[arg(long, env = "AEP_HEADER_TIMEOUT", default_value = "10s", value_name = "DURATION",
          value_parser = setting::duration("AEP_HEADER_TIMEOUT", Duration::ZERO, "60s, 5m or 4h"))]
    pub header_timeout: Duration,
}

impl ConnectionArgs {
    pub fn limits(&self) -> anyhow::Result<Limits> {
        if self.hook_connections >= self.max_connections {
            bail!(
                "AEP_HOOK_CONNECTIONS={} must be less than AEP_MAX_CONNECTIONS={}: observers need a share too",
                self.hook_connections,
                self.max_connections
            );
        }
        Ok(Limits {
            max_connections: self.max_connections,
            hook_connections: self.hook_connections,
            header_timeout: self.header_timeout,
        })
    }
}

/// The daemon's own settings, resolved (paths made absolute from `$HOME`, secrets read).
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub log_dir: PathBuf,
    pub state_dir: PathBuf,
    pub capture: CapturePolicy,
    pub redact: RedactOptions,
    pub max_body: usize,
    pub host: String,
}

impl CoreArgs {
    pub fn config(&self) -> anyhow::Result<Config> {
        let log_dir = match &self.log_dir {
            Some(d) => d.clone(),
            None => crate::state::home()?.join(".aep").join("logs"),
        };
        let state_dir = match &self.state_dir {
            Some(d) => d.clone(),
            None => crate::state::state_dir()?,
        };
        let secret_names: Vec<String> = self
            .redact_secret_env
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let secret_values = secret_names
            .iter()
            .filter_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
            .collect();
        Ok(Config {
            listen: self.listen,
            log_dir,
            state_dir,
            capture: self.capture.clone(),
            redact: RedactOptions {
                home: std::env::var("HOME").ok().filter(|h| h.len() > 1),
                secret_names,
                secret_values,
                pii: self.redact_pii,
            },
            max_body: self.max_body,
            host: self.host.clone().unwrap_or_else(crate::state::host),
        })
    }
}

impl SessionArgs {
    pub fn lifetime(&self) -> Lifetime {
        Lifetime {
            grace: self.session_grace,
            idle: self.session_idle,
            store_patience: self.session_store_patience,
        }
    }
}

fn listen(value: &str) -> Result<SocketAddr, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("AEP_LISTEN={value:?} is not ip:port, e.g. {DEFAULT_LISTEN}"))
}

fn budget(value: &str) -> Result<crate::budget::Budgets, String> {
    crate::budget::Budgets::parse(value).map_err(|e| e.to_string())
}

fn capture(value: &str) -> Result<CapturePolicy, String> {
    CapturePolicy::parse(value).map_err(|e| format!("AEP_CAPTURE={value:?}: {e}"))
}

/// `AEP_*` variables in the environment that no setting (nor the shim) reads: most likely a
/// typo, which would otherwise leave a default in force without a word.
pub fn unknown_variables() -> Vec<String> {
    let command = <DaemonArgs as Args>::augment_args(clap::Command::new("daemon"));
    let known: Vec<String> = command
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("AEP_") && !OTHER_READERS.contains(&k.as_str()) && !known.contains(k))
        .collect()
}

/// `AEP_*` variables read elsewhere than the daemon's settings: by `.ci/install-cline.sh` (both
/// Cline generations), the end-to-end tests and `aep-cline service` (its tests name another service manager).
const OTHER_READERS: [&str; 7] = [
    "AEP_CLINE_VERSION",
    "AEP_CLINE_CACHE",
    "AEP_CLINE_TEST_CLI",
    "AEP_CLINE2_VERSION",
    "AEP_CLINE2_CACHE",
    "AEP_CLINE2_TEST_CLI",
    "AEP_CLINE_SERVICE_CTL",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::settings::Source;
    use clap::Parser;

    #[derive(Parser)]
    struct Daemon {
        #[command(flatten)]
        args: DaemonArgs,
    }

    fn parse(flags: &[&str]) -> Result<DaemonArgs, String> {
        Daemon::try_parse_from(std::iter::once("daemon").chain(flags.iter().copied()))
            .map(|d| d.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_hold_without_any_setting() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.core.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(args.endpoint.buffer, 10_000);
        assert!(args.endpoint.endpoint && args.core.redact_pii);
        assert_eq!(args.sessions.lifetime().idle, Duration::from_secs(4 * 3600));
        assert!(args.hub.settings().unwrap().is_none());
        assert!(args.relay.settings(&args.endpoint).unwrap().is_none());
        assert_eq!(args.logs.log_retain, None, "every log is kept");
        assert!(!args.logs.log_sync, "the page cache: a process crash loses nothing");
        let limits = args.connections.limits().unwrap();
        assert_eq!((limits.max_connections, limits.hook_connections), (512, 64));
        assert_eq!(limits.header_timeout, Duration::from_secs(10));
        let err = parse(&["--max-connections", "8", "--hook-connections", "8"])
            .unwrap()
            .connections
            .limits()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("AEP_HOOK_CONNECTIONS") && err.contains("AEP_MAX_CONNECTIONS"),
            "{err}"
        );
        let args = parse(&["--log-retain", "30d"]).unwrap();
        assert_eq!(args.logs.log_retain, Some(Duration::from_secs(30 * 86400)));
        assert!(parse(&["--log-sync", "1"]).unwrap().logs.log_sync);
    }

    #[test]
    fn malformed_values_are_refused_with_the_settings_name() {
        for (flags, name) in [
            (&["--capture", "metadata,tools=redacted"][..], "AEP_CAPTURE"),
            (&["--capture", "everything"], "AEP_CAPTURE"),
            (&["--buffer", "0"], "AEP_BUFFER"),
            (&["--spool-max", "lots"], "AEP_CLINE_SPOOL_MAX"),
            (&["--buffer", "lots"], "AEP_BUFFER"),
            (&["--buffer-bytes", "0"], "AEP_BUFFER_BYTES"),
            (&["--max-event", "big"], "AEP_MAX_EVENT"),
            (&["--endpoint", "yes"], "AEP_ENDPOINT"),
            (&["--session-idle", "forever"], "AEP_SESSION_IDLE"),
            (&["--log-retain", "forever"], "AEP_LOG_RETAIN"),
            (&["--log-retain", "0s"], "AEP_LOG_RETAIN"),
            (&["--max-connections", "0"], "AEP_MAX_CONNECTIONS"),
            (&["--header-timeout", "soon"], "AEP_HEADER_TIMEOUT"),
            (&["--hub-ack-guard-ms", "10000"], "AEP_CLINE_HUB_ACK_GUARD_MS"),
            (&["--hub-ack-guard-ms", "0"], "AEP_CLINE_HUB_ACK_GUARD_MS"),
            (&["--listen", "localhost"], "AEP_LISTEN"),
        ] {
            let err = parse(flags).unwrap_err();
            assert!(err.contains(name), "{flags:?}: {err}");
        }
    }

    #[test]
    fn the_hub_tap_is_off_by_default_and_control_implies_it() {
        let s = parse(&["--hub-control", "1", "--hub-discovery", "/x/production.json"])
            .unwrap()
            .hub
            .settings()
            .unwrap()
            .unwrap();
        assert!(s.control);
        assert!(matches!(s.source, Source::Discovery(_)));
        assert_eq!(s.ack_guard, Duration::from_millis(8000));
        let tap = parse(&["--hub", "1", "--hub-url", "ws://127.0.0.1:1/hub", "--hub-token", "t0k"])
            .unwrap()
            .hub
            .settings()
            .unwrap()
            .unwrap();
        assert!(!tap.control);
        assert!(matches!(tap.source, Source::Direct(_)));
    }

    #[test]
    fn bad_hub_settings_name_the_variable_and_never_the_token() {
        let err = |flags: &[&str]| parse(flags).unwrap().hub.settings().unwrap_err().to_string();
        assert!(err(&["--hub", "1"]).contains("AEP_CLINE_HUB_DISCOVERY"));
        assert!(err(&["--hub", "1", "--hub-url", "ws://h/hub"]).contains("AEP_CLINE_HUB_TOKEN"));
        let bad_url = err(&["--hub", "1", "--hub-url", "http://h/hub", "--hub-token", "secret-token"]);
        assert!(
            bad_url.contains("AEP_CLINE_HUB_URL") && !bad_url.contains("secret-token"),
            "{bad_url}"
        );
        let bad_token = err(&["--hub", "1", "--hub-url", "ws://h/hub", "--hub-token", "a b"]);
        assert!(
            bad_token.contains("AEP_CLINE_HUB_TOKEN") && !bad_token.contains("a b"),
            "{bad_token}"
        );
    }

    #[test]
    fn a_relay_url_must_be_a_websocket_with_a_path_and_never_shows_its_query() {
        let err = |flags: &[&str]| {
            let args = parse(flags).unwrap();
            format!("{:#}", args.relay.settings(&args.endpoint).unwrap_err())
        };
        let e = err(&["--relay-url", "http://r/socket?access_token=s3cret"]);
        assert!(e.contains("AEP_RELAY_URL") && !e.contains("s3cret"), "{e}");
        let e = err(&["--relay-url", "ws://r:8787"]);
        assert!(e.contains("no path") && e.contains("ws://r:8787/socket"), "{e}");
        let e = err(&["--relay-url", "ws://r:8787/?access_token=s3cret"]);
        assert!(e.contains("/socket") && !e.contains("s3cret"), "{e}");
        let e = err(&["--relay-url", "ws://r/socket", "--relay-ca", "/ca.pem"]);
        assert!(e.contains("AEP_RELAY_CA") && e.contains("wss://"), "{e}");
        let e = err(&["--relay-url", "wss://r/socket", "--relay-ca", "/nowhere/ca.pem"]);
        assert!(e.contains("AEP_RELAY_CA=/nowhere/ca.pem"), "{e}");
        let args = parse(&["--relay-url", "wss://r/socket"]).unwrap();
        assert!(args.relay.settings(&args.endpoint).unwrap().unwrap().tls.is_some());
        let args = parse(&["--relay-url", "ws://r/socket", "--token", "t"]).unwrap();
        let relay = args.relay.settings(&args.endpoint).unwrap().unwrap();
        assert_eq!(relay.token.as_deref(), Some("t"), "the relay falls back to AEP_TOKEN");
    }
}
