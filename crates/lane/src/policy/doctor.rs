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
    } else {
        r.ok("policy", format!("{active}; {}", reach(control)));
    }
}

/// Where the rules act: at every tool call's hook always; on the hub's approvals with control.
fn reach(control: bool) -> &'static str {
    match control {
        true => "decided at every tool call's hook (a deny fails the call, an ask waits for a person) and on the hub's approvals",
        false => {
            "decided at every tool call's hook (a deny fails the call, an ask waits for a person);              the hub's own approvals are answered by a person (AEP_CLINE_HUB_CONTROL=1 lets the rules answer them)"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Control off is no warning: the rules act at the hook without it (#46).
    #[test]
    fn a_policy_without_control_still_acts_and_is_no_warning() {
        let policy = json!({"path": "/p.toml", "rules": 3, "loaded_at": "2026-12-07T10:00:00Z"});
        for control in [false, true] {
            let mut r = Report::default();
            doctor(&mut r, &policy, control);
            assert_eq!(r.warnings(), 0, "control {control}: {}", r.text());
            assert!(r.text().contains("decided at every tool call's hook"), "{}", r.text());
        }
        let mut r = Report::default();
        doctor(&mut r, &policy, false);
        assert!(r.text().contains("AEP_CLINE_HUB_CONTROL=1 lets the rules answer them"));
    }
}
