//! Validation of one Event and of a stream of Events. Every rejection names the rule it
//! enforces, as the invalid corpus does (`conformance/fixtures/invalid`): `rule` starts with
//! the spec reference (`AEP-0001 §5.2`, `AEP-0001 §5.1 #11`) so a caller can tell which
//! obligation broke, then says in a few words what the rule is.
//!
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
}

impl Violation {
    fn new(rule: impl Into<String>, detail: impl Into<String>) -> Self {
        Violation {
            rule: rule.into(),
            detail: detail.into(),
        }
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
