//! Validation of one Event and of a stream of Events. Every rejection names the rule it
//! enforces, as the invalid corpus does (`conformance/fixtures/invalid`).
//!
//! Skeleton: filled in by the validation work (see the foundation issue).

use serde_json::Value;

/// One broken rule: `rule` cites the spec (`AEP-0001 §5.2`), `detail` says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {detail}")]
pub struct Violation {
    pub rule: String,
    pub detail: String,
}

/// Checks one Event: envelope (AEP-0001 §5–§6) and payload schema (AEP-0002).
pub fn validate_event(event: &Value) -> Result<(), Violation> {
    let _ = event;
    Ok(())
}

/// Checks a stream, Event by Event, with the cross-event rules (AEP-0001 §7, AEP-0002 §2 and
/// §7, AEP-0004 §3).
#[derive(Debug, Default)]
pub struct StreamValidator {}

impl StreamValidator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates `event` alone and against everything seen before it.
    pub fn push(&mut self, event: &Value) -> Result<(), Violation> {
        validate_event(event)
    }
}
