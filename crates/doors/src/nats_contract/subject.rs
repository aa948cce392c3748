//! Subjects: every Event goes to `aep.<host>.<agent>.<session>` (the stream takes `aep.>`),
//! `<host>` being the publishing daemon's own (`AEP_HOST`, the host of its `source`s). The host
//! is in the subject so that the server's permissions can say who speaks for which machine: a
//! daemon's user is granted `aep.<its host>.>` ([`of_host`]) and nothing else of the stream, and
//! the console trusts the host a message arrived under, never the one its body claims
//! (`crate::fleet::view`). A consumer can follow one session (`aep.<host>.*.<session>`, or
//! `aep.*.*.<session>` on every host), one machine (`aep.<host>.>`) or the fleet.
//!
//! A NATS subject token may not hold `.` (the separator), `*` or `>` (wildcards), whitespace
//! or control characters, nor be empty; hosts and AEP ids may hold any of them. Each such byte
//! is written `%XX` (percent-encoding, `%` itself as `%25`; non-ASCII bytes too, since NATS
//! advises ASCII subjects), so the mapping is reversible and every other id is its own token.
//! An Event without a session goes to `aep.<host>.<agent>.%` (a lone `%` is no escape).
//!
//! Before this layout the sink published on `aep.<agent>.<session>` (no host): such a message
//! names no machine the server vouched for, and the console skips it ([`parse`]).

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

/// The subject `host`'s daemon publishes an Event on: `aep.<host>.<agent>.<session>`.
pub fn of(host: &str, event: &Value) -> String {
    let agent = event.get("agent").and_then(Value::as_str).unwrap_or_default();
    let session = match event.get("session").and_then(Value::as_str) {
        Some(session) => token(session),
        None => NONE.to_string(),
    };
    format!("{ROOT}.{}.{}.{session}", token(host), token(agent))
}

/// Every subject of one host: what its daemon's user may publish on (docs/fleet.md).
pub fn of_host(host: &str) -> String {
    format!("{ROOT}.{}.>", token(host))
}

/// The subject filter for one session of any agent, on one host or (`None`) every host.
pub fn of_session(host: Option<&str>, session: &str) -> String {
    let host = host.map_or_else(|| "*".to_string(), token);
    format!("{ROOT}.{host}.*.{}", token(session))
}

/// What a stream message's subject says: the host it was published under (the one the
/// server's permissions vouch for) and the session token's id (`None`: no session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub host: String,
    pub session: Option<String>,
}

/// Why a subject is not one of this sink's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    #[error("a message on {0:?}, outside {ALL}")]
    Outside(String),
    #[error("a message on {0:?}, which names no host (aep.<agent>.<session>: a daemon older than aep.<host>.<agent>.<session>; upgrade it)")]
    NoHost(String),
    #[error("a message on {0:?}, not aep.<host>.<agent>.<session>")]
    Shape(String),
}

/// Reads a stream message's subject (`aep.<host>.<agent>.<session>`).
pub fn parse(subject: &str) -> Result<Placed, NotOurs> {
    let tokens: Vec<&str> = subject.split('.').collect();
    match tokens.as_slice() {
        [root, ..] if *root != ROOT => Err(NotOurs::Outside(subject.to_string())),
        [_, _, _] => Err(NotOurs::NoHost(subject.to_string())),
        [_, host, agent, session] => {
            let host = id(host).ok_or_else(|| NotOurs::Shape(subject.to_string()))?;
            if *agent != NONE && id(agent).is_none() {
                return Err(NotOurs::Shape(subject.to_string()));
            }
            let session = match *session {
                NONE => None,
                token => Some(id(token).ok_or_else(|| NotOurs::Shape(subject.to_string()))?),
            };
            Ok(Placed { host, session })
        }
        _ => Err(NotOurs::Shape(subject.to_string())),
    }
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
        assert_eq!(of("ci.runner", &e), "aep.ci%2Erunner.cline.s%2E1");
        assert_eq!(of("h", &json!({"agent": "cline"})), "aep.h.cline.%");
        assert_eq!(of_host("ci.runner"), "aep.ci%2Erunner.>");
        assert_eq!(of_session(None, "s.1"), "aep.*.*.s%2E1");
        assert_eq!(of_session(Some("h"), "s.1"), "aep.h.*.s%2E1");
        assert_eq!(message_id(&e).as_deref(), Some("aep://h/agent/cline/session/s.1 01J"));
    }

    #[test]
    fn a_subject_says_its_host_and_only_ours_read() {
        let e = json!({"agent": "cline", "session": "s.1"});
        assert_eq!(
            parse(&of("ci.runner", &e)),
            Ok(Placed {
                host: "ci.runner".into(),
                session: Some("s.1".into())
            })
        );
        assert_eq!(parse("aep.h.cline.%").map(|p| p.session), Ok(None));
        assert!(
            matches!(parse("aep.cline.s"), Err(NotOurs::NoHost(_))),
            "the old layout"
        );
        assert!(matches!(parse("other.h.cline.s"), Err(NotOurs::Outside(_))));
        for bad in [
            "aep.h.cline",
            "aep.h.cline.s.x",
            "aep.%.cline.s",
            "aep.h.cline.a%2eb",
            "aep",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
