//! A machine's health as the console tells it, from its record (heartbeat) in the bucket
//! ([`crate::nats_contract::machine`]): online while its records keep coming, offline when they
//! lapse, stopped when its daemon said so on a clean shutdown.

use crate::nats_contract::machine::Machine;
use serde::Serialize;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Its last record is recent.
    Online,
    /// Its last record is older than the console's `offline_after`: the daemon or its link
    /// went away without a word.
    Offline,
    /// Its daemon shut down cleanly (its last record says `stopped`).
    Stopped,
    /// Seen in the stream only: no record in the bucket (a daemon without heartbeats, or one
    /// whose record expired).
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Online => "online",
            Status::Offline => "offline",
            Status::Stopped => "stopped",
            Status::Unknown => "unknown",
        }
    }

    /// Whether a command may be sent to it: an unknown machine may still answer.
    pub fn reachable(self) -> bool {
        matches!(self, Status::Online | Status::Unknown)
    }
}

/// The status of a machine whose latest record is `record` (`None`: no record), at `now`.
pub fn status(record: Option<&Machine>, now: SystemTime, offline_after: Duration) -> Status {
    let Some(m) = record else { return Status::Unknown };
    if m.state == "stopped" {
        return Status::Stopped;
    }
    let heard = aep_core::time::parse(&m.time, true).and_then(|t| SystemTime::try_from(t).ok());
    match heard {
        Some(t) if now.duration_since(t).map_or(true, |ago| ago <= offline_after) => Status::Online,
        _ => Status::Offline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_say_online_offline_or_stopped() {
        let now = crate::cli::out::parse_time("2026-12-01T10:00:40Z").unwrap();
        let after = Duration::from_secs(30);
        let record = |time: &str, state: &str| Machine {
            host: "h".into(),
            time: time.into(),
            state: state.into(),
            ..Default::default()
        };
        assert_eq!(status(None, now, after), Status::Unknown);
        assert_eq!(
            status(Some(&record("2026-12-01T10:00:20Z", "running")), now, after),
            Status::Online
        );
        assert_eq!(
            status(Some(&record("2026-12-01T10:00:05Z", "running")), now, after),
            Status::Offline
        );
        assert_eq!(
            status(Some(&record("2026-12-01T10:00:39Z", "stopped")), now, after),
            Status::Stopped
        );
        assert_eq!(status(Some(&record("garbage", "running")), now, after), Status::Offline);
        assert_eq!(
            status(Some(&record("2026-12-01T10:01:00Z", "running")), now, after),
            Status::Online,
            "a clock ahead"
        );
    }
}
