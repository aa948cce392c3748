//! `GET /metrics` of the fleet console (`aep-cline fleet serve`): how far it has followed the
//! stream and how far behind it is, what it read and skipped, and the fleet as it sees it
//! (machines by state, live sessions, approvals waiting), read from its view at each scrape.
//!
//! Like the daemon's `/metrics`, it needs no sign-in: counts and states only, no host name, no
//! session; the console's Host and Origin checks still apply. A host label would be bounded by
//! the fleet's size, but one series per machine is the machine records' job (each daemon's own
//! `/metrics`), not the console's.

use super::health::Status;
use super::view::View;
use crate::http::scrape::Metric;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::time::{Duration, SystemTime};

/// The console's numbers at one scrape.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Machines by state.
    machines: [(&'static str, u64); 4],
    sessions_live: u64,
    approvals_waiting: u64,
    /// The last stream sequence folded in; the stream's last (`None`: its state could not be
    /// read).
    applied: u64,
    stream_last: Option<u64>,
    messages: u64,
    events: u64,
    duplicates: u64,
    malformed: u64,
    unplaced: u64,
    bad_records: u64,
}

/// Reads `view` now (under its read lock: counts only, nothing copied per session).
pub fn snapshot(view: &View, now: SystemTime, offline_after: Duration, stream_last: Option<u64>) -> Snapshot {
    let mut machines = [Status::Online, Status::Offline, Status::Stopped, Status::Unknown].map(|s| (s.as_str(), 0));
    let (mut sessions_live, mut approvals_waiting) = (0, 0);
    for m in view.machines(now, offline_after) {
        if let Some(slot) = machines.iter_mut().find(|(s, _)| *s == m.status.as_str()) {
            slot.1 += 1;
        }
        sessions_live += m.sessions_live;
        approvals_waiting += m.waiting;
    }
    let c = &view.counts;
    Snapshot {
        machines,
        sessions_live,
        approvals_waiting,
        applied: view.stream_seq,
        stream_last,
        messages: c.messages,
        events: c.events,
        duplicates: c.duplicates,
        malformed: c.malformed,
        unplaced: c.unplaced,
        bad_records: c.bad_records,
    }
}

/// A registry for one scrape: the build and `snapshot`.
pub fn registry(snapshot: Snapshot) -> Registry {
    let mut registry = Registry::default();
    registry.register(
        "aep_cline_build",
        "The running console's version",
        Info::new([("version", env!("CARGO_PKG_VERSION"))]),
    );
    registry.register_collector(Box::new(snapshot));
    registry
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut machines = Metric::gauge("aep_cline_fleet_machines", "Machines the console knows, by state");
        for (state, n) in self.machines {
            machines.at(vec![("state", state)], Some(n as f64));
        }
        let mut behind = Metric::gauge(
            "aep_cline_fleet_behind_events",
            "Stream messages not yet folded into the console's view (absent when the stream's state cannot be read)",
        );
        behind.at(
            Vec::new(),
            self.stream_last.map(|l| l.saturating_sub(self.applied) as f64),
        );
        let mut read = Metric::counter(
            "aep_cline_fleet_read",
            "What the console read from the stream, by what became of it",
        );
        for (what, n) in [
            ("event", self.events),
            ("duplicate", self.duplicates),
            ("malformed", self.malformed),
            ("unplaced", self.unplaced),
        ] {
            read.at(vec![("outcome", what)], Some(n as f64));
        }
        let all = [
            machines,
            Metric::gauge("aep_cline_fleet_sessions_live", "Live sessions across the fleet")
                .one(self.sessions_live as f64),
            Metric::gauge(
                "aep_cline_fleet_approvals_waiting",
                "Approvals waiting for a person across the fleet",
            )
            .one(self.approvals_waiting as f64),
            Metric::gauge(
                "aep_cline_fleet_applied_seq",
                "The last stream sequence folded into the view",
            )
            .one(self.applied as f64),
            behind,
            Metric::counter("aep_cline_fleet_messages", "Messages read from the stream").one(self.messages as f64),
            read,
            Metric::counter("aep_cline_fleet_bad_records", "Machine records that do not read")
                .one(self.bad_records as f64),
        ];
        for metric in &all {
            metric.encode(&mut encoder)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_view_says_zero_machines_of_each_state_and_how_far_behind_it_is() {
        let view = View::default();
        let mut out = String::new();
        let snapshot = snapshot(&view, SystemTime::now(), Duration::from_secs(90), Some(7));
        prometheus_client::encoding::text::encode(&mut out, &registry(snapshot)).unwrap();
        for state in ["online", "offline", "stopped", "unknown"] {
            assert!(
                out.contains(&format!("aep_cline_fleet_machines{{state=\"{state}\"}} 0\n")),
                "{out}"
            );
        }
        assert!(out.contains("aep_cline_fleet_behind_events 7\n"), "{out}");
        assert!(
            out.contains("aep_cline_fleet_read_total{outcome=\"event\"} 0\n"),
            "{out}"
        );
        assert!(out.ends_with("# EOF\n"));
    }
}
