//! The hub tap's gates and endpoint, read from the environment once at start (design record,
//! "Gates"). Two grants, two gates: observing the approval loop (`AEP_CLINE_HUB=1`) and
//! answering it (`AEP_CLINE_HUB_CONTROL=1`, which implies the tap). A bad value is a start
//! error that names the variable; a hub that is absent or refuses is not (the tap retries and
//! the hooks never notice).

use anyhow::{bail, Context};
use cline_hub::discovery::{DiscoveryError, Endpoint};
use std::path::PathBuf;
use std::time::Duration;

/// `AEP_CLINE_HUB_ACK_GUARD_MS` default: under the 10 000 ms ack window this daemon declares.
pub const DEFAULT_ACK_GUARD: Duration = Duration::from_millis(8000);
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
                let bytes = std::fs::read(path).map_err(|e| {
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

#[derive(Debug, Clone)]
pub struct Settings {
    /// `AEP_CLINE_HUB_CONTROL=1`: commands are accepted and actuated through the hub.
    pub control: bool,
    pub source: Source,
    pub ack_guard: Duration,
    pub reconnect: Duration,
    pub handshake: Duration,
}

impl Settings {
    /// `None` when the tap is off (the default: observe-only through the hooks).
    pub fn from_env() -> anyhow::Result<Option<Settings>> {
        Self::from_vars(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Option<Settings>> {
        let control = gate(&var, "AEP_CLINE_HUB_CONTROL")?;
        if !(gate(&var, "AEP_CLINE_HUB")? || control) {
            return Ok(None);
        }
        let source = match (
            var("AEP_CLINE_HUB_URL"),
            var("AEP_CLINE_HUB_TOKEN"),
            var("AEP_CLINE_HUB_DISCOVERY"),
        ) {
            (Some(url), Some(token), _) => Source::Direct(Endpoint::direct(&url, &token).map_err(|e| match e {
                DiscoveryError::BadToken => anyhow::anyhow!("AEP_CLINE_HUB_TOKEN: {e}"),
                other => anyhow::anyhow!("AEP_CLINE_HUB_URL: {other}"),
            })?),
            (Some(_), None, _) => bail!(
                "AEP_CLINE_HUB_URL is set without AEP_CLINE_HUB_TOKEN: set the hub's authToken too, or use \
                 AEP_CLINE_HUB_DISCOVERY instead"
            ),
            (None, _, Some(path)) => Source::Discovery(PathBuf::from(path)),
            (None, _, None) => bail!(
                "the hub tap is on but names no hub: set AEP_CLINE_HUB_DISCOVERY to the hub's discovery file \
                 ($CLINE_DIR/data/locks/hub/production.json for `cline hub ensure`), or AEP_CLINE_HUB_URL and \
                 AEP_CLINE_HUB_TOKEN"
            ),
        };
        let ack_guard = match var("AEP_CLINE_HUB_ACK_GUARD_MS") {
            None => DEFAULT_ACK_GUARD,
            Some(v) => {
                let ms: u64 = v
                    .trim()
                    .parse()
                    .with_context(|| format!("AEP_CLINE_HUB_ACK_GUARD_MS={v:?} is not a number of milliseconds"))?;
                if ms == 0 || ms >= crate::intake::ACK_WINDOW_MS {
                    bail!(
                        "AEP_CLINE_HUB_ACK_GUARD_MS={ms}: use 1 to {} (under the {} ms ack window this daemon \
                         declares)",
                        crate::intake::ACK_WINDOW_MS - 1,
                        crate::intake::ACK_WINDOW_MS
                    );
                }
                Duration::from_millis(ms)
            }
        };
        Ok(Some(Settings {
            control,
            source,
            ack_guard,
            reconnect: RECONNECT,
            handshake: HANDSHAKE,
        }))
    }
}

fn gate(var: &impl Fn(&str) -> Option<String>, name: &str) -> anyhow::Result<bool> {
    match var(name).as_deref().map(str::trim) {
        None | Some("0") | Some("false") | Some("off") => Ok(false),
        Some("1") | Some("true") | Some("on") => Ok(true),
        Some(other) => bail!("{name}={other:?}: use 1 to turn it on or 0 (default) to leave it off"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> anyhow::Result<Option<Settings>> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn the_tap_is_off_by_default_and_control_implies_it() {
        assert!(settings(&[]).unwrap().is_none());
        assert!(settings(&[("AEP_CLINE_HUB", "0")]).unwrap().is_none());
        let s = settings(&[
            ("AEP_CLINE_HUB_CONTROL", "1"),
            ("AEP_CLINE_HUB_DISCOVERY", "/x/production.json"),
        ])
        .unwrap()
        .unwrap();
        assert!(s.control);
        assert!(matches!(s.source, Source::Discovery(_)));
        assert_eq!(s.ack_guard, DEFAULT_ACK_GUARD);
        let tap = settings(&[
            ("AEP_CLINE_HUB", "1"),
            ("AEP_CLINE_HUB_URL", "ws://127.0.0.1:1/hub"),
            ("AEP_CLINE_HUB_TOKEN", "t0k"),
        ])
        .unwrap()
        .unwrap();
        assert!(!tap.control);
        assert!(matches!(tap.source, Source::Direct(_)));
    }

    #[test]
    fn bad_settings_name_the_variable_and_never_the_token() {
        let err = |vars: &[(&str, &str)]| settings(vars).unwrap_err().to_string();
        assert!(err(&[("AEP_CLINE_HUB", "yes")]).contains("AEP_CLINE_HUB="));
        assert!(err(&[("AEP_CLINE_HUB", "1")]).contains("AEP_CLINE_HUB_DISCOVERY"));
        assert!(err(&[("AEP_CLINE_HUB", "1"), ("AEP_CLINE_HUB_URL", "ws://h/hub")]).contains("AEP_CLINE_HUB_TOKEN"));
        let bad_url = err(&[
            ("AEP_CLINE_HUB", "1"),
            ("AEP_CLINE_HUB_URL", "http://h/hub"),
            ("AEP_CLINE_HUB_TOKEN", "secret-token"),
        ]);
        assert!(
            bad_url.contains("AEP_CLINE_HUB_URL") && !bad_url.contains("secret-token"),
            "{bad_url}"
        );
        let bad_token = err(&[
            ("AEP_CLINE_HUB", "1"),
            ("AEP_CLINE_HUB_URL", "ws://h/hub"),
            ("AEP_CLINE_HUB_TOKEN", "a b"),
        ]);
        assert!(
            bad_token.contains("AEP_CLINE_HUB_TOKEN") && !bad_token.contains("a b"),
            "{bad_token}"
        );
        let base = [("AEP_CLINE_HUB", "1"), ("AEP_CLINE_HUB_DISCOVERY", "/x")];
        for guard in ["abc", "0", "10000"] {
            let mut vars = base.to_vec();
            vars.push(("AEP_CLINE_HUB_ACK_GUARD_MS", guard));
            assert!(err(&vars).contains("AEP_CLINE_HUB_ACK_GUARD_MS"), "{guard}");
        }
    }

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
    }
}
