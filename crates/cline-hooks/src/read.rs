//! Reading a hook body: which generation of Cline wrote it (a PascalCase `hookName` is Cline
//! 2.x's, [`crate::legacy`]; 3.x's are snake_case), then its shape, refusing what cannot be
//! placed on a session.
//!
//! One optional field of the wrong type costs that field, not the hook ([`crate::tolerant`]).
//! A panic while reading costs that one hook too ([`PayloadError::Panicked`]).

use crate::payload::{HookPayload, PayloadError};
use crate::tolerant::tolerant;
use serde_json::Value;

/// The UTF-8 byte order mark some writers put first (JSON forbids it, RFC 8259 §8.1, and lets
/// a parser ignore it).
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl HookPayload {
    /// Parses a hook body, refusing what cannot be placed on a session.
    pub fn parse(body: &[u8]) -> Result<Self, PayloadError> {
        let body = body.strip_prefix(BOM).unwrap_or(body);
        let value: Value = serde_json::from_slice(body)?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Self, PayloadError> {
        std::panic::catch_unwind(move || Self::read(value)).unwrap_or_else(|panic| Err(PayloadError::panicked(panic)))
    }

    fn read(mut value: Value) -> Result<Self, PayloadError> {
        let kind = match &value {
            Value::Object(_) => None,
            Value::Null => Some("null"),
            Value::Bool(_) => Some("a boolean"),
            Value::Number(_) => Some("a number"),
            Value::String(_) => Some("a string"),
            Value::Array(_) => Some("an array"),
        };
        if let Some(kind) = kind {
            return Err(PayloadError::NotObject(kind));
        }
        let Some(name) = value.get("hookName").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            return Err(PayloadError::NoHookName);
        };
        let payload: HookPayload = if crate::legacy::is_legacy(name) {
            crate::legacy::normalize(value)?
        } else {
            let (mut payload, dropped) = tolerant::<HookPayload>(&mut value)?;
            payload.dropped = dropped;
            payload
        };
        if payload.session_key().is_none() {
            return Err(PayloadError::NoSession);
        }
        Ok(payload)
    }
}
