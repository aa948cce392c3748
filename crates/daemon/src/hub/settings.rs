//! The hub tap's gates and endpoint, as resolved at start from the settings defined in
//! `daemon::settings` (design record, "Gates"). Two grants, two gates: observing the approval
//! loop (`AEP_CLINE_HUB=1`) and answering it (`AEP_CLINE_HUB_CONTROL=1`, which implies the
//! tap). A bad value is a start error that names the variable; a hub that is absent or refuses
//! is not (the tap retries and the hooks never notice).

use cline_hub::discovery::Endpoint;
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
