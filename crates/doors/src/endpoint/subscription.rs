//! One subscription, as SSE query parameters or a WebSocket `subscribe` frame express it
//! (AEP-0003 §3.3, §6.5): an attr-match filter, where replay starts, and a capture ceiling.
//! Parsing refuses anything malformed with the closed code set (fail closed, §6.2); rendering
//! applies the filter and down-levels to the ceiling (§6.4), forwarding the Event's original
//! line whenever the ceiling does not touch it.

use super::feed::Resume;
use super::stored::Stored;
use aep_core::filter::{Filter, INVALID_FILTER};
use aep_core::gate::downlevel;
use aep_core::sequence::Position;
use aep_core::Capture;
use serde_json::Value;
use std::borrow::Cow;

/// The `limit-exceeded` code (AEP-0003 §6.5).
pub const LIMIT_EXCEEDED: &str = "limit-exceeded";

/// A refused subscription: `code` is from the closed §6.5 set.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub code: &'static str,
    pub detail: String,
}

impl Refused {
    fn invalid(detail: impl Into<String>) -> Self {
        Refused {
            code: INVALID_FILTER,
            detail: detail.into(),
        }
    }
}

pub struct Subscription {
    pub filter: Filter,
    pub resume: Resume,
    pub ceiling: Option<Capture>,
    /// The sessions the filter pins (`session`: a string or an array of them): a replay-all
    /// reads only their logs.
    pub sessions: Option<Vec<String>>,
}

impl Subscription {
    /// Builds a subscription from its parsed parts. `max_from` bounds the resume positions.
    pub fn parse(
        filter: Option<&Value>,
        from: Option<&Value>,
        capture: Option<&Value>,
        max_from: usize,
    ) -> Result<Self, Refused> {
        let filter_value = filter;
        let filter = match filter {
            None => Filter::default(),
            Some(f) => Filter::parse(f).map_err(|e| Refused::invalid(e.to_string()))?,
        };
        let resume = match from {
            None => Resume::Live,
            Some(from) => parse_from(from, max_from)?,
        };
        let ceiling = match capture {
            None => None,
            Some(Value::String(level)) => Some(
                level
                    .parse()
                    .map_err(|e: aep_core::CaptureError| Refused::invalid(e.to_string()))?,
            ),
            Some(other) => {
                return Err(Refused::invalid(format!(
                    "capture must be a level name (none, metadata, redacted, full), got {other}"
                )))
            }
        };
        Ok(Subscription {
            sessions: pinned_sessions(filter_value),
            filter,
            resume,
            ceiling,
        })
    }

    /// The line to deliver for `event`, or `None` when the filter does not match.
    pub fn render<'a>(&self, event: &'a Stored) -> Option<Cow<'a, str>> {
        if !self.filter.matches(event.value()) {
            return None;
        }
        Some(render(event, self.ceiling))
    }
}

/// The sessions an attr-match filter pins: `session` as a string or an array of strings.
fn pinned_sessions(filter: Option<&Value>) -> Option<Vec<String>> {
    match filter?.get("session")? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(list) => list.iter().map(|s| s.as_str().map(str::to_string)).collect(),
        _ => None,
    }
}

/// The Event's line at `ceiling`: untouched when the ceiling allows it (never up-leveled).
pub fn render(event: &Stored, ceiling: Option<Capture>) -> Cow<'_, str> {
    match ceiling {
        Some(ceiling) if ceiling < event.capture => Cow::Owned(downlevel(event.value(), ceiling).to_string()),
        _ => Cow::Borrowed(event.event.line.as_str()),
    }
}

/// `from`: an array of `{session, epoch, seq}` positions or the string `all` (AEP-0003 §5).
pub fn parse_from(from: &Value, max_from: usize) -> Result<Resume, Refused> {
    match from {
        Value::String(s) if s == "all" => Ok(Resume::All),
        Value::Array(positions) => {
            if positions.len() > max_from {
                return Err(Refused {
                    code: LIMIT_EXCEEDED,
                    detail: format!(
                        "from names {} resume positions; this endpoint replays at most {max_from} per subscription (AEP_MAX_FROM)",
                        positions.len()
                    ),
                });
            }
            positions
                .iter()
                .map(parse_position)
                .collect::<Result<_, _>>()
                .map(Resume::Sessions)
        }
        other => Err(Refused::invalid(format!(
            "from must be an array of {{session, epoch, seq}} resume positions or the string \"all\" (AEP-0003 §5), got {other}"
        ))),
    }
}

fn parse_position(p: &Value) -> Result<(String, Option<Position>), Refused> {
    let bad = || {
        Refused::invalid(format!(
            "resume position {p} is not {{\"session\": string, \"epoch\": integer >= 0, \"seq\": integer >= 0}}"
        ))
    };
    let session = p.get("session").and_then(Value::as_str).ok_or_else(bad)?;
    let epoch = match p.get("epoch") {
        None => 0,
        Some(e) => e.as_u64().ok_or_else(bad)?,
    };
    let seq = p.get("seq").and_then(Value::as_u64).ok_or_else(bad)?;
    Ok((session.to_string(), Some(Position { epoch, seq })))
}

/// `Last-Event-ID: {session}:{epoch}:{seq}` (AEP-0003 §3.3); the session may hold colons.
pub fn parse_last_event_id(id: &str) -> Option<(String, Option<Position>)> {
    let (rest, seq) = id.rsplit_once(':')?;
    let (session, epoch) = rest.rsplit_once(':')?;
    if session.is_empty() {
        return None;
    }
    let position = Position {
        epoch: epoch.parse().ok()?,
        seq: seq.parse().ok()?,
    };
    Some((session.to_string(), Some(position)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn malformed_subscriptions_are_refused_from_the_closed_set() {
        let refuse = |f: Option<Value>, from: Option<Value>, c: Option<Value>| {
            Subscription::parse(f.as_ref(), from.as_ref(), c.as_ref(), 3)
                .err()
                .unwrap()
        };
        assert_eq!(refuse(Some(json!({"seq": 1})), None, None).code, "invalid-filter");
        assert_eq!(refuse(None, Some(json!({})), None).code, "invalid-filter");
        assert_eq!(refuse(None, Some(json!("some")), None).code, "invalid-filter");
        assert_eq!(
            refuse(None, Some(json!([{"session": "s"}])), None).code,
            "invalid-filter"
        );
        assert_eq!(
            refuse(None, Some(json!([{"session": "s", "seq": -1}])), None).code,
            "invalid-filter"
        );
        let many = json!([{"session": "a", "seq": 0}, {"session": "b", "seq": 0}, {"session": "c", "seq": 0}, {"session": "d", "seq": 0}]);
        assert_eq!(refuse(None, Some(many), None).code, "limit-exceeded");
        assert_eq!(refuse(None, None, Some(json!("loud"))).code, "invalid-filter");
        assert_eq!(refuse(None, None, Some(json!(2))).code, "invalid-filter");
        let ok = Subscription::parse(None, Some(&json!("all")), Some(&json!("metadata")), 3).unwrap();
        assert_eq!(ok.resume, Resume::All);
        assert_eq!(ok.ceiling, Some(Capture::Metadata));
        assert_eq!(ok.sessions, None);
        let pinned = |f: Value| Subscription::parse(Some(&f), None, None, 3).unwrap().sessions;
        assert_eq!(pinned(json!({"session": "a"})), Some(vec!["a".to_string()]));
        assert_eq!(
            pinned(json!({"session": ["a", "b"]})),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(pinned(json!({"type": "run.*"})), None);
    }

    #[test]
    fn last_event_id_keeps_colons_in_the_session() {
        assert_eq!(
            parse_last_event_id("a:b:2:7"),
            Some(("a:b".into(), Some(Position { epoch: 2, seq: 7 })))
        );
        assert_eq!(parse_last_event_id("s:x:1"), None);
        assert_eq!(parse_last_event_id(":0:1"), None);
        assert_eq!(parse_last_event_id("nothing"), None);
    }
}
