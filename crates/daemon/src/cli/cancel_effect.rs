//! Whether an accepted cancel did anything. The hub answers `run.abort` ok whatever it finds (a
//! run whose client is gone, say, goes on waiting), so `control.accepted` says only that the
//! command was sent: `cancel` tells the person what happened to the run, read from the
//! session's log, and says so when nothing did after a bounded wait, with what to do instead.

use crate::lane::Journal;
use aep_core::types::{RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, SESSION_ENDED};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long, after the ack, `cancel` watches the session's log for the run's end.
pub const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// How often the log is read meanwhile.
const EVERY: Duration = Duration::from_millis(250);

/// What became of the run a cancel was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// It ended (its terminal's type) or the session did.
    Ended(String),
    /// Still open after the wait.
    Nothing,
}

/// Whether an outcome Event the daemon sent with the ack is the end of a run or the session.
pub fn ends(outcome: &Value) -> Option<String> {
    let ty = outcome["type"].as_str()?;
    matches!(ty, RUN_CANCELLED | RUN_FAILED | RUN_FINISHED | SESSION_ENDED).then(|| ty.to_string())
}

/// Watches `session`'s log until the run `run` (the one open when the cancel was sent; `None`:
/// whichever is open) is no longer the open one, or `wait` runs out.
pub fn watch(journal: &Journal, session: &str, run: Option<&str>, wait: Duration) -> Effect {
    let path = journal.path(session);
    let deadline = Instant::now() + wait;
    loop {
        if let Ok((Some(s), _)) = crate::views::logs::summarize(&path) {
            let ended = s.state == crate::views::State::Ended;
            let open = s.active_run.as_deref();
            if ended || (run.is_some() && open != run) {
                return Effect::Ended(if ended { SESSION_ENDED } else { "the run ended" }.to_string());
            }
        }
        if Instant::now() >= deadline {
            return Effect::Nothing;
        }
        std::thread::sleep(EVERY);
    }
}

/// What `cancel` prints when nothing happened: that, and what to do.
pub fn nothing_happened(session: &str, run: Option<&str>, waited: Duration) -> String {
    let run = run
        .map(|r| format!(" {}", crate::views::summary::short_id(r)))
        .unwrap_or_default();
    format!(
        "the cancel was accepted but nothing happened: the run{run} of {session} is still open after {}s. Cline did \
         not act on it (the client that drove the session may be gone). `aep-cline end {session}` ends the session; \
         `aep-cline show {session}` shows what it last did",
        waited.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_end_is_an_effect() {
        assert_eq!(
            ends(&serde_json::json!({"type": "run.cancelled"})).as_deref(),
            Some("run.cancelled")
        );
        assert_eq!(
            ends(&serde_json::json!({"type": "session.ended"})).as_deref(),
            Some("session.ended")
        );
        assert_eq!(ends(&serde_json::json!({"type": "control.accepted"})), None);
        assert_eq!(ends(&Value::Null), None);
        let said = nothing_happened("s1", None, CANCEL_WAIT);
        assert!(
            said.contains("nothing happened") && said.contains("aep-cline end s1"),
            "{said}"
        );
    }

    #[test]
    fn a_log_with_the_run_still_open_is_no_effect() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        let line = |ty: &str, seq: u64, run: Option<&str>| {
            let mut e = serde_json::json!({"aep": "0.1", "id": format!("e{seq}"), "type": ty,
                "time": "2026-12-01T05:05:51.000Z", "source": "aep://h/agent/cline/session/s1",
                "agent": "cline", "session": "s1", "seq": seq, "data": {}});
            if let Some(r) = run {
                e["run"] = r.into();
            }
            format!("{e}\n")
        };
        let path = journal.path("s1");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            line("session.started", 0, None) + &line("run.started", 1, Some("r1")),
        )
        .unwrap();
        let wait = Duration::from_millis(300);
        assert_eq!(watch(&journal, "s1", Some("r1"), wait), Effect::Nothing);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&line("run.cancelled", 2, Some("r1")));
        std::fs::write(&path, text).unwrap();
        assert!(matches!(watch(&journal, "s1", Some("r1"), wait), Effect::Ended(_)));
    }
}
