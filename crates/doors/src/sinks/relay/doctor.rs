//! What `aep-cline doctor` says of the relay binding, from its status (`/healthz` `relay`).

use crate::doctor::Report;
use serde_json::Value;

pub fn doctor(r: &mut Report, relay: &Value) {
    if relay.is_null() {
        return r.info("relay", "off (AEP_RELAY_URL names one)");
    }
    let url = relay["url"].as_str().unwrap_or("?");
    let dropped = relay["dropped"].as_u64().unwrap_or(0);
    if relay["connected"] != true {
        // The daemon's own words for why, when an attempt has ended (a TLS refusal names its fix).
        let (why, fix) = match relay["last_error"].as_str() {
            Some(why) => (format!(": {why}"), "see the reason above"),
            None => (
                String::new(),
                "check that the relay runs and that AEP_RELAY_TOKEN (or AEP_TOKEN) is its token",
            ),
        };
        r.fail(
            "relay",
            format!(
                "not connected to {url}{why}; {} Events wait in the outbox",
                relay["outbox"]
            ),
            fix,
        );
    } else if dropped > 0 {
        r.warn(
            "relay",
            format!("connected to {url}; {dropped} debug/info Events were dropped while it was away"),
            "raise AEP_RELAY_OUTBOX if that matters",
        );
    } else {
        r.ok("relay", format!("connected to {url}"));
    }
}
