//! The hub tap's gates and endpoint, as resolved at start from the settings defined in
//! `server::settings` (design record, "Gates"). Two grants, two gates: observing the approval
//! loop (`AEP_CLINE_HUB=1`) and answering it (`AEP_CLINE_HUB_CONTROL=1`, which implies the
//! tap). A bad value is a start error that names the variable; a hub that is absent or refuses
//! is not (the tap retries and the hooks never notice).

use crate::setting;
use anyhow::bail;
use clap::{ArgAction, Args};
use cline_hub::discovery::{DiscoveryError, Endpoint};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long the tap waits between connection attempts (design record: 1 s).
pub const RECONNECT: Duration = Duration::from_secs(1);
/// How long the upgrade and the `client.register` reply may take.
pub const HANDSHAKE: Duration = Duration::from_secs(5);

/// Where the hub is.
#[derive(Debug, Clone)]
pub enum Source {
    /// `AEP_CLINE_HUB_URL` + `AEP_CLINE_HUB_TOKEN`.
    Direct(Endpoint),
    /// `AEP_CLINE_HUB_DISCOVERY`: the vendor's discovery file, read again at every attempt (a
    /// restarted hub has a new token and may have a new port).
    Discovery(PathBuf),
}

impl Source {
    pub fn resolve(&self) -> Result<Endpoint, String> {
        match self {
            Source::Direct(endpoint) => Ok(endpoint.clone()),
            Source::Discovery(path) => {
                // The vendor's file: a FIFO there must not block this task (`vendor_file`).
                let mut bytes = Vec::new();
                cline_usage::vendor_file::read(path, MAX_DISCOVERY_BYTES, &mut bytes).map_err(|e| {
                    format!(
                        "cannot read the hub discovery file {} ({e}); is the hub running (`cline hub ensure`)?",
                        path.display()
                    )
                })?;
                Endpoint::from_discovery(&bytes).map_err(|e| format!("{}: {e}", path.display()))
            }
        }
    }
}

/// A discovery file is a few hundred bytes.
const MAX_DISCOVERY_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub struct Settings {
    /// `AEP_CLINE_HUB_CONTROL=1`: commands are accepted and actuated through the hub.
    pub control: bool,
    pub source: Source,
    pub ack_guard: Duration,
    pub reconnect: Duration,
    pub handshake: Duration,
    /// Told when an approval starts waiting (`AEP_CLINE_NOTIFY`).
    pub notify: Option<Arc<crate::notify::Notifier>>,
    /// `AEP_CLINE_POLICY`: the rules that answer approvals before a person does.
    pub policy: Option<std::sync::Arc<crate::policy::Active>>,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Cline hub tap (off by default)")]
pub struct HubArgs {
    /// 1 mirrors Cline's approval loop as attention events: 1 or 0.
    #[arg(long, env = "AEP_CLINE_HUB", default_value = "0", value_name = "1|0",
          value_parser = setting::gate("AEP_CLINE_HUB"), action = ArgAction::Set)]
    pub hub: bool,
    /// 1 also accepts control.attention.respond, control.cancel and x.cline.control.send_input,
    /// carried out through the hub (implies AEP_CLINE_HUB=1): 1 or 0.
    #[arg(long, env = "AEP_CLINE_HUB_CONTROL", default_value = "0", value_name = "1|0",
          value_parser = setting::gate("AEP_CLINE_HUB_CONTROL"), action = ArgAction::Set)]
    pub hub_control: bool,
    /// The hub's discovery file ($CLINE_DIR/data/locks/hub/production.json for
    /// `cline hub ensure`), read again at every connection attempt.
    #[arg(long, env = "AEP_CLINE_HUB_DISCOVERY", value_name = "FILE")]
    pub hub_discovery: Option<PathBuf>,
    /// The hub named directly (ws://127.0.0.1:25463/hub), with AEP_CLINE_HUB_TOKEN.
    #[arg(long, env = "AEP_CLINE_HUB_URL", value_name = "WS_URL")]
    pub hub_url: Option<String>,
    /// The hub's authToken, with AEP_CLINE_HUB_URL.
    #[arg(long, env = "AEP_CLINE_HUB_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub hub_token: Option<String>,
    /// How long a command waits for the hub's reply before it is accepted anyway (1 to 9999,
    /// under the 10 000 ms ack window).
    #[arg(long, env = "AEP_CLINE_HUB_ACK_GUARD_MS", default_value = "8000", value_name = "MS",
          value_parser = ack_guard)]
    pub hub_ack_guard_ms: u64,
    /// Rules that approve, deny or ask before each tool call (TOML; README, "Policy"), read
    /// again when the file changes. They decide at Cline's tool_call hook in every mode: a deny
    /// fails the call (the run goes on), an ask holds it until a person answers. With
    /// AEP_CLINE_HUB_CONTROL=1 they also answer the hub's approvals (docs/guardrails.md).
    #[arg(long, env = "AEP_CLINE_POLICY", value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

impl HubArgs {
    /// `None` when the tap is off (the default: observe-only through the hooks).
    pub fn settings(&self) -> anyhow::Result<Option<Settings>> {
        if !(self.hub || self.hub_control) {
            return Ok(None);
        }
        let source = match (&self.hub_url, &self.hub_token, &self.hub_discovery) {
            (Some(url), Some(token), _) => Source::Direct(Endpoint::direct(url, token).map_err(|e| match e {
                DiscoveryError::BadToken => anyhow::anyhow!("AEP_CLINE_HUB_TOKEN: {e}"),
                other => anyhow::anyhow!("AEP_CLINE_HUB_URL: {other}"),
            })?),
            (Some(_), None, _) => bail!(
                "AEP_CLINE_HUB_URL is set without AEP_CLINE_HUB_TOKEN: set the hub's authToken too, or use \
                 AEP_CLINE_HUB_DISCOVERY instead"
            ),
            (None, _, Some(path)) => Source::Discovery(path.clone()),
            (None, _, None) => bail!(
                "the hub tap is on but names no hub: set AEP_CLINE_HUB_DISCOVERY to the hub's discovery file \
                 ($CLINE_DIR/data/locks/hub/production.json for `cline hub ensure`), or AEP_CLINE_HUB_URL and \
                 AEP_CLINE_HUB_TOKEN"
            ),
        };
        Ok(Some(Settings {
            control: self.hub_control,
            source,
            ack_guard: Duration::from_millis(self.hub_ack_guard_ms),
            reconnect: RECONNECT,
            handshake: HANDSHAKE,
            notify: None,
            policy: None,
        }))
    }
}

fn ack_guard(value: &str) -> Result<u64, String> {
    let window = crate::control::ACK_WINDOW_MS;
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 && ms < window => Ok(ms),
        Ok(ms) => Err(format!(
            "AEP_CLINE_HUB_ACK_GUARD_MS={ms}: use 1 to {} (under the {window} ms ack window this daemon declares)",
            window - 1
        )),
        Err(_) => Err(format!(
            "AEP_CLINE_HUB_ACK_GUARD_MS={value:?} is not a number of milliseconds"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_discovery_file_is_a_retry_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("production.json");
        let source = Source::Discovery(path.clone());
        assert!(source.resolve().unwrap_err().contains("cline hub ensure"));
        std::fs::write(
            &path,
            r#"{"url":"ws://127.0.0.1:1/hub","authToken":"abc","protocolVersion":"v1"}"#,
        )
        .unwrap();
        assert_eq!(source.resolve().unwrap().url, "ws://127.0.0.1:1/hub");
        std::fs::write(&path, "{").unwrap();
        assert!(source.resolve().unwrap_err().contains("not JSON"));
        // A FIFO in its place is said at once, never waited on.
        std::fs::remove_file(&path).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success());
        let (done, said) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(source.resolve()).is_ok());
        let err = said
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("resolve returns")
            .unwrap_err();
        assert!(err.contains("a FIFO"), "{err}");
    }
}
