//! The JetStream sink's settings (`AEP_NATS_*`), one clap definition flattened into
//! `aep-cline daemon`. Where the server is and how to reach it ([`Server`]) is the NATS
//! contract's, shared with the fleet console and `tail --nats`, so every side reaches a server
//! the same way. Everything is checked at start: a malformed URL, a credentials file that cannot
//! be read, two ways to authenticate at once, a bad stream name or CA file stop the daemon with
//! the setting's name. Secrets never reach a message or a log.

use crate::nats_contract::connect::{Connect, Server};
use crate::setting;
use anyhow::bail;
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "JetStream sink (AEP-0005 CloudEvents on NATS)")]
pub struct NatsArgs {
    #[command(flatten)]
    pub server: Server,
    /// Events held in memory while the server is slow or away; past it they are resent from
    /// the logs, so nothing is lost.
    #[arg(long = "nats-outbox", env = "AEP_NATS_OUTBOX", default_value = "10000", value_name = "EVENTS",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub outbox: u32,
    /// The duplicate window of a stream this sink creates: a redelivery within it is dropped
    /// by the server (an existing stream keeps its own).
    #[arg(long = "nats-dedupe-window", env = "AEP_NATS_DEDUPE_WINDOW", default_value = "2m", value_name = "DURATION",
          value_parser = setting::duration("AEP_NATS_DEDUPE_WINDOW", Duration::from_secs(1), "2m"))]
    pub dedupe_window: Duration,
    /// 1: take AEP control commands from NATS, on this host's subject only
    /// (`aep-control.<host>`, request/reply), through the same intake as `POST /control`; the
    /// hub control gate (AEP_CLINE_HUB_CONTROL) still decides what is accepted. Who may send
    /// them is the NATS server's permissions (docs/fleet.md): 1 or 0.
    #[arg(long = "nats-control", env = "AEP_NATS_CONTROL", default_value = "0", value_name = "1|0",
          value_parser = setting::gate("AEP_NATS_CONTROL"), action = clap::ArgAction::Set)]
    pub control: bool,
}

/// The sink's settings, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub connect: Connect,
    pub stream: String,
    pub outbox: usize,
    pub dedupe_window: Duration,
    /// Control commands are taken on this host's subject (`AEP_NATS_CONTROL=1`).
    pub control: bool,
}

impl NatsArgs {
    /// `None` when no server is named.
    pub fn settings(&self) -> anyhow::Result<Option<Settings>> {
        let Some((connect, stream)) = self.server.resolve()? else {
            if self.control {
                bail!("AEP_NATS_CONTROL=1 but AEP_NATS_URL is not set: name the NATS server the commands come through");
            }
            return Ok(None);
        };
        Ok(Some(Settings {
            connect,
            stream,
            outbox: self.outbox as usize,
            dedupe_window: self.dedupe_window,
            control: self.control,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        nats: NatsArgs,
    }

    fn settings(flags: &[&str]) -> Result<Option<Settings>, String> {
        let cmd = Cmd::try_parse_from(std::iter::once("x").chain(flags.iter().copied())).map_err(|e| e.to_string())?;
        cmd.nats.settings().map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn off_without_a_url_and_resolved_with_one() {
        assert!(settings(&[]).unwrap().is_none());
        let s = settings(&["--nats-url", "nats://127.0.0.1:4222"]).unwrap().unwrap();
        assert_eq!((s.stream.as_str(), s.outbox), ("AEP", 10_000));
        assert_eq!(s.connect.shown, "nats://127.0.0.1:4222");
        assert_eq!(s.dedupe_window, Duration::from_secs(120));
        assert!(!s.connect.require_tls);
        assert!(!s.control, "control over NATS is off by default");
        let s = settings(&["--nats-url", "nats://h", "--nats-control", "1"])
            .unwrap()
            .unwrap();
        assert!(s.control);
        let s = settings(&["--nats-url", "tls://a:4222, nats://b"]).unwrap().unwrap();
        assert_eq!(s.connect.shown, "tls://a:4222,nats://b:4222");
        assert!(s.connect.require_tls);
    }

    #[test]
    fn malformed_settings_are_refused_naming_the_setting_and_never_a_secret() {
        for (flags, needle) in [
            (&["--nats-url", "http://h:4222"][..], "AEP_NATS_URL"),
            (&["--nats-url", "ws://h:4222"], "nats://"),
            (&["--nats-url", "nats://u:s3cret@h:4222", "--nats-token", "t"], "one"),
            (&["--nats-url", " , "], "AEP_NATS_URL"),
            (&["--nats-url", "nats://h", "--nats-user", "u"], "AEP_NATS_PASSWORD"),
            (&["--nats-url", "nats://h", "--nats-password", "p"], "AEP_NATS_USER"),
            (
                &[
                    "--nats-url",
                    "nats://h",
                    "--nats-token",
                    "t",
                    "--nats-user",
                    "u",
                    "--nats-password",
                    "p",
                ],
                "one of",
            ),
            (
                &["--nats-url", "nats://h", "--nats-creds", "/nowhere.creds"],
                "AEP_NATS_CREDS=/nowhere.creds",
            ),
            (
                &["--nats-url", "nats://h", "--nats-ca", "/nowhere.pem"],
                "AEP_NATS_CA=/nowhere.pem",
            ),
            (&["--nats-url", "nats://h", "--nats-stream", "a.b"], "AEP_NATS_STREAM"),
            (&["--nats-url", "nats://h", "--nats-outbox", "0"], "0"),
            (
                &["--nats-url", "nats://h", "--nats-dedupe-window", "0s"],
                "AEP_NATS_DEDUPE_WINDOW",
            ),
            (&["--nats-token", "t"], "AEP_NATS_URL"),
            (&["--nats-control", "1"], "AEP_NATS_URL"),
            (&["--nats-url", "nats://h", "--nats-control", "yes"], "AEP_NATS_CONTROL"),
        ] {
            let err = settings(flags).unwrap_err();
            assert!(err.contains(needle), "{flags:?}: {err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("bad.creds");
        std::fs::write(&creds, "not a creds file").unwrap();
        let err = settings(&["--nats-url", "nats://h", "--nats-creds", creds.to_str().unwrap()]).unwrap_err();
        assert!(err.contains("AEP_NATS_CREDS") && err.contains("credentials"), "{err}");
        assert_eq!(crate::http::redact::url("nats://u:s3cret@h:4222"), "nats://h:4222");
    }
}
