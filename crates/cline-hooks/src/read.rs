//! Reading a hook body: which generation of Cline wrote it (a PascalCase `hookName` is Cline
//! 2.x's, [`crate::legacy`]; 3.x's are snake_case), then its shape, refusing what cannot be
//! placed on a session.

use crate::payload::{HookPayload, PayloadError};
use serde_json::Value;

impl HookPayload {
    /// Parses a hook body, refusing what cannot be placed on a session.
    pub fn parse(body: &[u8]) -> Result<Self, PayloadError> {
        let value: Value = serde_json::from_slice(body)?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Self, PayloadError> {
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
            serde_path_to_error::deserialize(value).map_err(|e| PayloadError::Field(e.path().to_string()))?
        };
        if payload.session_key().is_none() {
            return Err(PayloadError::NoSession);
        }
        Ok(payload)
    }
}
