//! What `aep-cline doctor` says of notifications, from their status (`/healthz` `notify`).

use crate::doctor::Report;
use serde_json::Value;

/// Notifications (AEP_CLINE_NOTIFY): each target as shown (no secret), what it sent and what
/// it could not; a target whose last send failed is a warning.
pub fn doctor(r: &mut Report, notify: &Value) {
    let Some(targets) = notify["targets"].as_array() else {
        return r.info(
            "notify",
            "off (AEP_CLINE_NOTIFY=https://ntfy.sh/TOPIC tells a person when Cline waits)",
        );
    };
    for t in targets {
        let n = |k: &str| t[k].as_u64().unwrap_or(0);
        let target = t["target"].as_str().unwrap_or("?");
        let text = format!(
            "{target}: {} sent, {} queued, {} failed, {} dropped",
            n("sent"),
            n("queued"),
            n("failed"),
            n("dropped")
        );
        match t["last_error"].as_str() {
            Some(e) if n("failed") > 0 || n("dropped") > 0 => r.warn(
                "notify",
                format!("{text}; last error: {e}"),
                "check the target's URL and that it is reachable from this machine",
            ),
            _ => r.ok("notify", text),
        }
    }
}
