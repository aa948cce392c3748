//! What the fleet shares over NATS besides the Events (docs/fleet.md): each daemon's machine
//! record, its heartbeat, in a JetStream key-value bucket, and the subject a daemon takes
//! control commands on. The daemon writes the record and answers on its subject
//! (`AEP_NATS_CONTROL=1`); the console (`aep-cline fleet`) reads the records and sends the
//! commands. One definition here, so both sides agree.

use super::subject;
use aep_core::types::CONTROL_REJECTED;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The key-value bucket of machine records: one key per host (its subject token), the latest
/// record only.
pub const BUCKET: &str = "aep-cline-machines";
/// How long a record is kept after its last write: a console shows a machine that went quiet
/// (offline, with its last state) for a week, then forgets it.
pub const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// The fleet console's key-value bucket: a checkpoint of its folded view per stream (key: the
/// stream's name, as [`key`] writes it), so a console start reads the stream from there on
/// instead of from its first message (`crate::fleet::checkpoint`). Written by `fleet serve`,
/// read by every console; no daemon touches it.
pub const FLEET_BUCKET: &str = "aep-cline-fleet";

/// The stream of a key-value bucket as the client's `create_key_value` makes it (latest value
/// per key), made by hand: that call first asks the account's limits, whose answer from a 2.9
/// server the client cannot read, and would need one more permission.
pub fn bucket_config(bucket: &str, description: &str, max_age: Duration) -> async_nats::jetstream::stream::Config {
    use async_nats::jetstream::stream;
    stream::Config {
        name: format!("KV_{bucket}"),
        description: Some(description.to_string()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    }
}

/// How often a daemon writes its record.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// A machine whose latest record is older than this is offline (the console's default).
pub const OFFLINE_AFTER: Duration = Duration::from_secs(30);

/// The first token of control subjects. Outside the stream's `aep.>` on purpose: a command is
/// not an Event of the stream, and a request on a stream's subject would be answered by the
/// stream's publish ack instead of by the daemon.
pub const CONTROL_ROOT: &str = "aep-control";

/// The subject one host's daemon takes control commands on (core NATS request/reply: the
/// request is one AEP control command Event, the reply its ack Event). Naming the host in the
/// subject is what lets NATS permissions say who may command which machines.
pub fn control_subject(host: &str) -> String {
    format!("{CONTROL_ROOT}.{}", subject::token(host))
}

/// The `ask` of a question on the control subject: what a pending approval asks. A question is
/// `{"ask": "detail", "attention": "<the attention.requested id>"}`, no command and no Event:
/// it asks the owning daemon, over the subject whose publish permission lets a person command
/// that machine, for what it holds in memory of the approval (the command, the files, the diff
/// summary: its local view, redacted, `AEP_CLINE_LOCAL_DETAIL`), so nothing of it is ever in
/// the stream and only those who may answer it may see it.
pub const ASK_DETAIL: &str = "detail";

/// A question for `attention`'s detail.
pub fn ask_detail(attention: &str) -> serde_json::Value {
    serde_json::json!({"ask": ASK_DETAIL, "attention": attention})
}

/// The answer: `detail` is what the approval asks, or null with `why` in words.
pub fn detail_answer(attention: &str, detail: Option<serde_json::Value>, why: Option<&str>) -> serde_json::Value {
    serde_json::json!({"ask": ASK_DETAIL, "attention": attention, "detail": detail, "why": why})
}

/// The reply to a request the daemon could not take as a command (not JSON, too large, not a
/// command Event, a session this daemon does not emit): shaped like a `control.rejected` ack
/// (`cause` = the command's id when it has one, `data.reason` from AEP's nack reasons,
/// `data.detail` in words), so a console reads every reply the same way; but it is no Event
/// (no `id`, `source` or `aep`) and is never logged, as AEP-0004 §4.2 answers such a request
/// on the transport. Every other reply is the ack Event itself, as logged.
pub fn refusal(cause: Option<&str>, reason: &str, detail: &str) -> serde_json::Value {
    serde_json::json!({
        "type": CONTROL_REJECTED,
        "cause": cause,
        "data": {"reason": reason, "detail": detail},
    })
}

/// The bucket key of a host's record. A key-value key may hold only `A-Z a-z 0-9 - _ = / .`
/// (a subject token's `%` escape is refused), so every other byte, and `=`, `/` and `.`, is
/// written `=XX`: one key per host, and back.
pub fn key(host: &str) -> String {
    use std::fmt::Write as _;
    let mut key = String::with_capacity(host.len());
    for b in host.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            key.push(char::from(b));
        } else {
            let _ = write!(key, "={b:02X}");
        }
    }
    key
}

/// A daemon's machine record, written every [`HEARTBEAT_EVERY`] (and once more, `stopped`,
/// when it shuts down cleanly). Unknown fields are ignored and missing ones default, so
/// consoles and daemons of different versions read each other.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Machine {
    /// The `{host}` of the daemon's `source` URIs (`AEP_HOST`).
    pub host: String,
    /// aep-cline's version.
    pub version: String,
    /// When this record was written (RFC 3339, milliseconds, UTC).
    pub time: String,
    /// When the daemon started.
    pub started: String,
    /// `running`, or `stopped` in the last record of a daemon that shut down cleanly.
    pub state: String,
    /// Whether the daemon takes control commands over NATS (`AEP_NATS_CONTROL=1` with the hub
    /// control gate on).
    pub control: bool,
    /// The folders where aep-cline's hook files are installed (Cline's global hook folders;
    /// empty: none, the machine records nothing until a workspace has them).
    pub hooks: Vec<String>,
    /// Each sink's state (`relay`, `otlp`, `nats`, ...): `ok`, `off`, or what is wrong.
    pub sinks: BTreeMap<String, String>,
    /// Whether the hub tap is connected to Cline's hub (`None`: the tap is off).
    pub hub: Option<bool>,
    pub sessions: Sessions,
    pub spool: Spool,
}

/// The daemon's sessions in memory, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sessions {
    pub live: u64,
    pub running: u64,
    pub waiting: u64,
}

/// Hooks waiting in the spool for the daemon (written by the shim while it was unreachable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Spool {
    pub files: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_keys_name_the_host_as_one_token() {
        assert_eq!(control_subject("dev-1"), "aep-control.dev-1");
        assert_eq!(control_subject("ci.runner 7"), "aep-control.ci%2Erunner%207");
        assert_eq!(key("a.b"), "a=2Eb");
        assert_eq!(key("dev-1_x"), "dev-1_x");
        assert_eq!(key("ci runner=é/"), "ci=20runner=3D=C3=A9=2F");
    }

    #[test]
    fn a_record_from_another_version_still_reads() {
        let m: Machine = serde_json::from_str(r#"{"host":"h","time":"2026-12-01T00:00:00.000Z","new":1}"#).unwrap();
        assert_eq!((m.host.as_str(), m.sessions.live, m.control), ("h", 0, false));
    }
}
