//! Subjects: every Event goes to `aep.<agent>.<session>` (the stream takes `aep.>`), so a
//! consumer can follow one session (`aep.*.<session>`), one agent (`aep.<agent>.>`) or the
//! fleet. A NATS subject token may not hold `.` (the separator), `*` or `>` (wildcards),
//! whitespace or control characters, nor be empty; AEP ids may hold any of them. Each such
//! byte is written `%XX` (percent-encoding, `%` itself as `%25`; non-ASCII bytes too, since
//! NATS advises ASCII subjects), so the mapping is reversible and every other id is its own
//! token. An Event without a session goes to `aep.<agent>.%` (a lone `%` is no escape).

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::Value;

/// The subjects' first token.
pub const ROOT: &str = "aep";
/// What the stream is created with: every subject of this sink.
pub const ALL: &str = "aep.>";
/// The token of an absent session.
const NONE: &str = "%";

/// What a token escapes: controls and non-ASCII (always, by the crate), and these.
const ESCAPED: &AsciiSet = &CONTROLS.add(b' ').add(b'.').add(b'*').add(b'>').add(b'%');

/// One id as a subject token (an empty one, which AEP never has, as the absent token).
pub fn token(id: &str) -> String {
    if id.is_empty() {
        return NONE.to_string();
    }
    utf8_percent_encode(id, ESCAPED).to_string()
}

/// The id a token stands for; `None` for the absent-session token or a token that is not one
/// of ours.
pub fn id(token: &str) -> Option<String> {
    if token == NONE || token.is_empty() {
        return None;
    }
    let decoded = percent_decode_str(token).decode_utf8().ok()?.into_owned();
    // Only the canonical form is ours: one id, one token.
    (self::token(&decoded) == token).then_some(decoded)
}

/// The subject of an Event: `aep.<agent>.<session>`.
pub fn of(event: &Value) -> String {
    let agent = event.get("agent").and_then(Value::as_str).unwrap_or_default();
    let session = match event.get("session").and_then(Value::as_str) {
        Some(session) => token(session),
        None => NONE.to_string(),
    };
    format!("{ROOT}.{}.{session}", token(agent))
}

/// The subject filter for one session of any agent.
pub fn of_session(session: &str) -> String {
    format!("{ROOT}.*.{}", token(session))
}

/// The JetStream message id (`Nats-Msg-Id`): the Event's `source` and `id` (AEP-0001 §5.1:
/// the pair is the Event's identity), joined by a space, which a URI never holds. The server
/// drops a second message with the same id within the stream's duplicate window.
pub fn message_id(event: &Value) -> Option<String> {
    let source = event.get("source").and_then(Value::as_str)?;
    let id = event.get("id").and_then(Value::as_str)?;
    Some(format!("{source} {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_escape_what_nats_forbids_and_nothing_else_and_come_back() {
        for name in [
            "1796108324129_xl5g1",
            "conv_01.2",
            "a b\tc",
            "*",
            ">",
            "100%",
            "é",
            "%2E",
            "x\ny",
        ] {
            let t = token(name);
            assert!(
                !t.is_empty() && !t.contains(['.', '*', '>', ' ', '\t', '\n']) && t.is_ascii(),
                "{name:?} → {t:?}"
            );
            assert_eq!(id(&t).as_deref(), Some(name), "{t}");
        }
        assert_eq!(
            token("1796108324129_xl5g1"),
            "1796108324129_xl5g1",
            "plain ids are their own token"
        );
        assert_eq!(token("a.b"), "a%2Eb");
        assert_eq!(id("%"), None);
        assert_eq!(id("a%2eb"), None, "only the canonical form is ours");
        let e = json!({"agent": "cline", "session": "s.1", "source": "aep://h/agent/cline/session/s.1", "id": "01J"});
        assert_eq!(of(&e), "aep.cline.s%2E1");
        assert_eq!(of(&json!({"agent": "cline"})), "aep.cline.%");
        assert_eq!(of_session("s.1"), "aep.*.s%2E1");
        assert_eq!(message_id(&e).as_deref(), Some("aep://h/agent/cline/session/s.1 01J"));
    }
}
