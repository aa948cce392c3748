//! What `aep-cline doctor` says of the spool, read from the state folder: its size against its
//! bound, what waits and since when, hooks lost, files quarantined.

use crate::doctor::{size, Report};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Spooled hooks older than this while the daemon runs mean it is not draining.
const STUCK: Duration = Duration::from_secs(10);

pub fn doctor(r: &mut Report, state_dir: &Path, daemon_running: bool) {
    let dir = super::dir(state_dir);
    let files = super::pending(state_dir);
    let bytes: u64 = files.iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
    let oldest = files
        .iter()
        .filter_map(|f| f.metadata().ok()?.modified().ok())
        .min()
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    let quarantine = super::quarantine_dir(state_dir);
    let quarantined = std::fs::read_dir(&quarantine)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_none_or(|x| x != "reason"))
                .count()
        })
        .unwrap_or(0);
    let max = super::limit::max();
    if bytes + 4096 > max {
        r.fail(
            "spool",
            format!(
                "the spool is full ({} of its {} bound): new hooks are not being kept",
                size(bytes),
                size(max)
            ),
            "start the daemon so it takes them; AEP_CLINE_SPOOL_MAX raises the bound",
        );
    } else if super::limit::near(bytes, max) {
        r.warn(
            "spool",
            format!("the spool is near its bound ({} of {})", size(bytes), size(max)),
            "start the daemon so it takes them; AEP_CLINE_SPOOL_MAX raises the bound",
        );
    }
    match (files.len(), oldest) {
        (0, _) => r.ok("spool", format!("{} is empty", dir.display())),
        (n, Some(age)) if daemon_running && age > STUCK => r.fail(
            "spool",
            format!(
                "{n} hooks ({}) wait in {}, the oldest for {}",
                size(bytes),
                dir.display(),
                crate::human_time::short_duration(age)
            ),
            "the daemon is not taking them: its log (or `journalctl --user -u aep-cline`) says why",
        ),
        (n, age) => r.warn(
            "spool",
            format!(
                "{n} hooks ({}) wait in {}{}",
                size(bytes),
                dir.display(),
                age.map(|a| format!(", the oldest for {}", crate::human_time::short_duration(a)))
                    .unwrap_or_default()
            ),
            if daemon_running {
                "the daemon takes them within a second"
            } else {
                "the daemon takes them when it starts"
            },
        ),
    }
    let (lost, list) = super::limit::lost(state_dir);
    if lost > 0 {
        r.warn(
            "spool",
            format!(
                "{lost} hooks were lost: the spool could not keep them (full or unwritable), so their sessions' logs miss them ({} lists when and which)",
                list.display()
            ),
            format!(
                "keep the daemon running (`aep-cline doctor` above says what stops it) or raise AEP_CLINE_SPOOL_MAX; then remove {} to clear this warning",
                list.display()
            ),
        );
    }
    if quarantined > 0 {
        r.warn(
            "spool",
            format!(
                "{quarantined} spooled hooks could never be ingested and wait in {}",
                quarantine.display()
            ),
            "each has a .reason beside it: read them, then delete the files",
        );
    }
}
