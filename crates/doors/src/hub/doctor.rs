//! What `aep-cline doctor` says of the hub tap, from the status it reports (`/healthz` `hub`).

use crate::doctor::Report;
use serde_json::Value;

pub fn doctor(r: &mut Report, hub: &Value) {
    if hub.is_null() {
        return r.info(
            "hub tap",
            "off (AEP_CLINE_HUB=1 mirrors Cline's approvals; AEP_CLINE_HUB_CONTROL=1 also answers them)",
        );
    }
    let s = |k: &str| hub[k].as_str().unwrap_or("?").to_string();
    if hub["connected"] == true {
        r.ok(
            "hub tap",
            format!(
                "connected to {} (protocol {}) since {} UTC",
                s("url"),
                hub["protocol"].as_str().unwrap_or("not given"),
                crate::human_time::when(&s("since"))
            ),
        );
    } else if hub["hub_down"] == true {
        // Cline starts its hub when it needs one: not running now is not broken.
        r.info(
            "hub tap",
            format!(
                "Cline's hub is not running right now ({}); the tap connects when it starts",
                hub["last_error"].as_str().unwrap_or("no hub found")
            ),
        );
    } else {
        r.fail(
            "hub tap",
            format!(
                "not connected: {}",
                hub["last_error"].as_str().unwrap_or("no attempt has finished yet")
            ),
            "start Cline's hub (`cline hub ensure`) with the same CLINE_DIR, and check AEP_CLINE_HUB_DISCOVERY",
        );
    }
}
