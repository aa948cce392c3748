//! `data` against the type's vendored payload schema (AEP-0002 §5, AEP-0004 §3/§5), with the
//! jsonschema crate. Types without a schema (every `x.*` type, unregistered core names) have
//! open payloads: consumers tolerate unknown types (AEP-0001 §6).

use super::Violation;
use crate::schemas::{payload_schema, PAYLOAD_SCHEMAS};
use crate::types::{
    ATTENTION_ANSWERED, ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT, CONTROL_ACCEPTED, CONTROL_REJECTED,
    RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED, SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED,
    TOOL_FAILED, TOOL_REQUESTED,
};
use jsonschema::Validator;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock};

/// One slot per registered type, each schema compiled once, the first time an Event of its
/// type is validated: the daemon validates every Event it emits, and a run uses a handful of
/// the types.
static VALIDATORS: LazyLock<HashMap<&'static str, OnceLock<Validator>>> =
    LazyLock::new(|| PAYLOAD_SCHEMAS.iter().map(|(ty, _)| (*ty, OnceLock::new())).collect());

fn compile(ty: &str) -> Validator {
    let text = payload_schema(ty).unwrap_or_default();
    let schema: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("vendored schema of {ty} is not JSON ({e}); re-vendor conformance/schemas"));
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("vendored schema of {ty} does not compile ({e}); re-vendor it"))
}

/// The mandatory types (AEP-0002 §4.1), whose payloads §5.3 defines; other core types' are in
/// §5.4.
const MANDATORY: [&str; 14] = [
    SESSION_STARTED,
    SESSION_ENDED,
    RUN_STARTED,
    RUN_FINISHED,
    RUN_FAILED,
    RUN_CANCELLED,
    TOOL_REQUESTED,
    TOOL_COMPLETED,
    TOOL_FAILED,
    TOOL_DENIED,
    ATTENTION_REQUESTED,
    ATTENTION_ANSWERED,
    ATTENTION_RESOLVED,
    ATTENTION_TIMEOUT,
];

/// Payload members that hold one of the common objects of AEP-0002 §5.2 (`tool_ref`,
/// `error_info`, usage, `cost`, `document`, `citation`, `guardrail`, `field_spec`).
const COMMON_OBJECTS: [&str; 11] = [
    "tool",
    "error",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "cost",
    "documents",
    "input_documents",
    "output_documents",
    "citations",
    "guardrail",
    "fields",
];

/// Longest schema error message kept: a `required` error prints the whole instance, which at
/// `full` capture can be megabytes.
const MAX_MESSAGE: usize = 300;

pub(super) fn check(ty: &str, data: &Value) -> Result<(), Violation> {
    let Some(slot) = VALIDATORS.get(ty) else {
        return Ok(());
    };
    slot.get_or_init(|| compile(ty)).validate(data).map_err(|error| {
        let path = error.instance_path().as_str().to_string();
        let mut message = error.to_string();
        if message.len() > MAX_MESSAGE {
            let cut = (0..=MAX_MESSAGE)
                .rev()
                .find(|i| message.is_char_boundary(*i))
                .unwrap_or(0);
            message.truncate(cut);
            message.push('…');
        }
        let mut v = Violation::new(
            rule_for(ty, &path),
            format!(
                "data{path} of `{ty}`: {message}; make the payload match conformance/schemas/types/{ty}.schema.json"
            ),
        );
        v.at = Some(path);
        v
    })
}

/// The section that defines the failing part of the payload.
fn rule_for(ty: &str, path: &str) -> &'static str {
    let member = path.split('/').nth(1).unwrap_or("");
    if COMMON_OBJECTS.contains(&member) {
        "AEP-0002 §5.2 (common payload object schema)"
    } else if ty == CONTROL_ACCEPTED || ty == CONTROL_REJECTED {
        "AEP-0004 §3 (ack payload schema)"
    } else if ty.starts_with("control.") {
        "AEP-0004 §5 (command payload schema)"
    } else if MANDATORY.contains(&ty) {
        "AEP-0002 §5.3 (payload schema)"
    } else {
        "AEP-0002 §5.4 (payload schema)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_vendored_schema_compiles() {
        assert_eq!(VALIDATORS.len(), PAYLOAD_SCHEMAS.len());
        for (ty, _) in PAYLOAD_SCHEMAS {
            compile(ty);
        }
    }

    #[test]
    fn rule_names_the_defining_section() {
        let rule = |ty, data| check(ty, &data).unwrap_err().rule;
        assert!(rule("tool.completed", json!({})).starts_with("AEP-0002 §5.3"));
        assert!(rule("tool.completed", json!({"tool": {}})).starts_with("AEP-0002 §5.2"));
        assert!(rule("agent.presence", json!({"state": "asleep"})).starts_with("AEP-0002 §5.4"));
        assert!(rule("control.rejected", json!({})).starts_with("AEP-0004 §3"));
        assert!(rule("control.cancel", json!({"scope": "everything"})).starts_with("AEP-0004 §5"));
    }

    #[test]
    fn formats_are_checked_and_long_messages_cut() {
        let err = check(
            "attention.requested",
            &json!({"kind": "input", "prompt": "p", "expires_at": "tomorrow"}),
        )
        .unwrap_err();
        assert!(err.detail.contains("expires_at"), "{err}");

        let big = "x".repeat(10_000);
        let err = check("tool.completed", &json!({ "result": big })).unwrap_err();
        assert!(err.detail.len() < 1_000, "{}", err.detail.len());
    }

    #[test]
    fn types_without_a_schema_have_open_payloads() {
        assert!(check("x.cline.prompt.submitted", &json!({"anything": [1, 2]})).is_ok());
        assert!(check("tool.exploded", &json!({"tool": 3})).is_ok());
    }
}
