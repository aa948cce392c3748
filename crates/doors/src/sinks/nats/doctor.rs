//! What `aep-cline doctor` says of the JetStream sink, from its status (`/healthz` `nats`).

use crate::doctor::Report;
use serde_json::Value;

pub fn doctor(r: &mut Report, nats: &Value) {
    if nats.is_null() {
        return r.info("jetstream", "off (AEP_NATS_URL names a NATS server)");
    }
    let url = nats["url"].as_str().unwrap_or("?");
    let stream = nats["stream"].as_str().unwrap_or("?");
    let pending = nats["pending"].as_u64().unwrap_or(0);
    let skipped = nats["skipped"].as_u64().unwrap_or(0);
    if nats["connected"] != true && (pending > 0 || !nats["last_error"].is_null()) {
        let error = nats["last_error"].as_str().unwrap_or("not reached yet");
        r.fail(
            "jetstream",
            format!("not publishing to {url} (stream {stream}): {error}; {pending} Events wait (kept in the logs)"),
            "check that nats-server runs with JetStream (-js) and that AEP_NATS_CREDS, AEP_NATS_TOKEN or AEP_NATS_USER are right",
        );
    } else if skipped > 0 {
        r.warn(
            "jetstream",
            format!(
                "publishing to {url} (stream {stream}); {skipped} Events were too large for the server and skipped"
            ),
            "raise the server's max_payload (they stay in the session logs)",
        );
    } else if nats["connected"] != true {
        r.info("jetstream", format!("{url} (stream {stream}): nothing published yet"));
    } else {
        r.ok(
            "jetstream",
            format!("publishing to {url} (stream {stream}), {pending} Events awaiting the server's ack"),
        );
    }
}
