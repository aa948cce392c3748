//! Validation of one Event and of a stream of Events. Every rejection names the rule it
//! enforces, as the invalid corpus does (`conformance/fixtures/invalid`): `rule` starts with
//! the spec reference (`AEP-0001 §5.2`, `AEP-0001 §5.1 #11`) so a caller can tell which
//! obligation broke, then says in a few words what the rule is.
//!
//! - [`without_bad_numbers`]: [`validate_event`], taking out of `data` a member whose number
//!   the schema refuses, so the daemon keeps such an Event without it instead of losing it.
//! - [`validate_event`]: one Event alone: the envelope (AEP-0001 §5–§6, §8.1–§8.2), the
//!   payload against its vendored schema (AEP-0002 §5, AEP-0004 §3/§5) and the single-Event
//!   half of the `kind: "form"` rules (AEP-0006).
//! - [`StreamValidator`]: an emitter's stream in emission order (a JSONL log, the daemon's
//!   output): ordering, `(source, id)` reuse, terminal exclusivity, pending attention at
//!   `session.ended`, one ack per command, and form answers against their request.

mod envelope;
mod form;
mod payload;
mod stream;

use serde_json::Value;

pub use stream::StreamValidator;

/// One broken rule: `rule` cites the spec (`AEP-0001 §5.2 (…)`), `detail` says what was wrong
/// and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {detail}")]
pub struct Violation {
    pub rule: String,
    pub detail: String,
    /// Where in `data` the payload schema failed (a JSON pointer, `""` for `data` itself);
    /// `None` for every other rule.
    pub at: Option<String>,
}

impl Violation {
    fn new(rule: impl Into<String>, detail: impl Into<String>) -> Self {
        Violation {
            rule: rule.into(),
            detail: detail.into(),
            at: None,
        }
    }
}

/// A payload member [`without_bad_numbers`] left out, and the violation that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub member: String,
    pub why: String,
}

/// How many members [`without_bad_numbers`] takes out before it gives up.
const MAX_REMOVED: usize = 16;

/// Checks one Event like [`validate_event`]; when the payload schema refuses a number (out of
/// its range, or the `null` a non-finite number becomes in JSON), the member of `data` that
/// holds it is taken out and the Event checked again, so an Event is kept without a bad
/// number rather than lost for it. Returns what was taken out (nothing for a valid Event);
/// any other violation, or one left after that, is the error. Pure: no I/O.
pub fn without_bad_numbers(event: &mut Value) -> Result<Vec<Removed>, Violation> {
    let mut removed = Vec::new();
    loop {
        let v = match validate_event(event) {
            Ok(()) => return Ok(removed),
            Err(v) => v,
        };
        let Some(at) = v.at.as_deref().filter(|_| removed.len() < MAX_REMOVED) else {
            return Err(v);
        };
        let numeric = event["data"].pointer(at).is_some_and(|x| x.is_number() || x.is_null());
        let member = at
            .strip_prefix('/')
            .and_then(|p| p.split('/').next())
            .map(|m| m.replace("~1", "/").replace("~0", "~"));
        let data = event.get_mut("data").and_then(Value::as_object_mut);
        let taken = match (numeric, member, data) {
            (true, Some(member), Some(data)) => data.remove(&member).map(|_| member),
            _ => None,
        };
        let Some(member) = taken else { return Err(v) };
        removed.push(Removed {
            member,
            why: v.to_string(),
        });
    }
}

/// Checks one Event: envelope (AEP-0001 §5–§6), payload schema (AEP-0002 §5) and the
/// single-Event form rules (AEP-0006). Never panics, whatever JSON it is given.
pub fn validate_event(event: &Value) -> Result<(), Violation> {
    checked(event).map(|_| ())
}

/// [`validate_event`], returning the Event's attributes for the stream rules.
fn checked(event: &Value) -> Result<envelope::Facts<'_>, Violation> {
    let facts = envelope::check(event)?;
    if let Some(data) = facts.data {
        payload::check(facts.ty, data)?;
        form::check_event(facts.ty, data)?;
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(ty: &str, data: Value) -> Value {
        json!({"aep": "0.1", "id": "01JEVENTEVENTEVENTEVENTEVE", "type": ty, "time": "2026-12-03T08:00:00Z",
            "source": "aep://host/agent/cline", "agent": "cline", "session": "s", "run": "01JRUNRUNRUNRUNRUNRUNRUNRU", "seq": 1,
            "data": data})
    }

    #[test]
    fn a_refused_number_is_taken_out_with_its_member_and_nothing_else() {
        let mut e = event(
            "run.finished",
            json!({"cost": {"currency": "USD", "total": null}, "gen_ai.usage.output_tokens": -1, "duration_ms": 5}),
        );
        let removed = without_bad_numbers(&mut e).unwrap();
        let members: Vec<&str> = removed.iter().map(|r| r.member.as_str()).collect();
        assert_eq!(members.len(), 2, "{removed:?}");
        assert!(members.contains(&"cost") && members.contains(&"gen_ai.usage.output_tokens"));
        assert_eq!(e["data"], json!({"duration_ms": 5}));
        assert!(validate_event(&e).is_ok());
        let mut fine = event("run.finished", json!({"duration_ms": 5}));
        assert_eq!(without_bad_numbers(&mut fine).unwrap(), []);
    }

    #[test]
    fn what_is_not_a_bad_number_is_still_refused() {
        // A string where a number goes is no number to take out; a missing required member either.
        let mut wrong = event("run.finished", json!({"duration_ms": "five"}));
        assert!(without_bad_numbers(&mut wrong).is_err());
        assert_eq!(wrong["data"]["duration_ms"], "five", "left as it was");
        let mut missing = event("tool.requested", json!({}));
        assert!(without_bad_numbers(&mut missing).is_err());
    }
}
