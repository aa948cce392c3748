//! What `aep-cline doctor` says of the policy, from its status (`/healthz` `policy`).

use crate::doctor::Report;
use serde_json::Value;

/// The active policy (AEP_CLINE_POLICY): its file, rules, last reload and last error.
pub fn doctor(r: &mut Report, policy: &Value, control: bool) {
    if policy.is_null() {
        return r.info(
            "policy",
            "none: a person answers every approval (AEP_CLINE_POLICY=FILE answers by rules)",
        );
    }
    let active = format!(
        "{}: {} rule(s), read at {} UTC",
        policy["path"].as_str().unwrap_or("?"),
        policy["rules"].as_u64().unwrap_or(0),
        crate::human_time::when(policy["loaded_at"].as_str().unwrap_or("?"))
    );
    if let Some(error) = policy["last_error"].as_str() {
        r.warn(
            "policy",
            format!("{active}; the file as it is now is not used, the last good policy stays active: {error}"),
            "fix the file (`aep-cline policy test FILE --command ...` names the line); it is read again when it changes",
        );
    } else if !control {
        r.warn(
            "policy",
            format!("{active}; it answers nothing while control is off"),
            "set AEP_CLINE_HUB_CONTROL=1: a policy answers through the hub, as a person would",
        );
    } else {
        r.ok("policy", active);
    }
}
