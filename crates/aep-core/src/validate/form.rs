//! The `kind: "form"` prose rules of AEP-0006 (in AEP-0002 §5.3) that JSON Schema cannot
//! express: `fields` only on a form request, `answer.values` a flat map, and, across Events,
//! each value fitting the requested field (choice ids unless `other: true`; number bounds)
//! and never carrying user-authored text below `redacted` capture.

use super::envelope::json_kind;
use super::Violation;
use crate::types::{ATTENTION_ANSWERED, ATTENTION_REQUESTED, CONTROL_ATTENTION_RESPOND};
use crate::Capture;
use serde_json::{Map, Value};

const FIELDS_ONLY_ON_FORMS: &str = "AEP-0002 §5.3 (fields only on a kind form request)";
const FLAT_VALUES: &str = "AEP-0002 §5.3 (answer values are a flat map)";
const VALUES_MATCH_FIELDS: &str = "AEP-0002 §5.3 (answer values match the requested fields)";

/// The single-Event rules, for a payload that already passed its schema.
pub(super) fn check_event(ty: &str, data: &Value) -> Result<(), Violation> {
    match ty {
        ATTENTION_REQUESTED => {
            let kind = data.get("kind").and_then(Value::as_str);
            if data.get("fields").is_some() && kind != Some("form") {
                return Err(Violation::new(
                    FIELDS_ONLY_ON_FORMS,
                    format!("`fields` on a request of kind {kind:?}; use kind \"form\" or drop `fields`"),
                ));
            }
        }
        ATTENTION_ANSWERED | CONTROL_ATTENTION_RESPOND => {
            if let Some(values) = values_of(data) {
                for (key, value) in values {
                    let flat = match value {
                        Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
                        Value::Array(items) => items.iter().all(Value::is_string),
                        _ => false,
                    };
                    if !flat {
                        return Err(Violation::new(
                            FLAT_VALUES,
                            format!(
                                "answer.values.{key} is {}; a value is a string, number, boolean or array of choice ids",
                                json_kind(value)
                            ),
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `data.answer.values`, when it is an object.
pub(super) fn values_of(data: &Value) -> Option<&Map<String, Value>> {
    data.get("answer")?.get("values")?.as_object()
}

/// The fields of a `kind: "form"` request, kept to check its answers.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Form {
    fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    id: String,
    kind: FieldKind,
}

#[derive(Debug, Clone, PartialEq)]
enum FieldKind {
    String,
    Number {
        min: Option<f64>,
        max: Option<f64>,
    },
    Boolean,
    Select {
        choices: Vec<String>,
        multi: bool,
        other: bool,
    },
}

impl Form {
    /// The form an `attention.requested` payload declares; `None` for any other kind.
    pub(super) fn of_request(data: Option<&Value>) -> Option<Form> {
        let data = data?;
        if data.get("kind")?.as_str()? != "form" {
            return None;
        }
        let fields = data
            .get("fields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Field::parse)
            .collect();
        Some(Form { fields })
    }

    /// Checks the `values` of an answer to this form, carried at `capture`.
    pub(super) fn check_answer(
        &self,
        request: &str,
        values: &Map<String, Value>,
        capture: Capture,
    ) -> Result<(), Violation> {
        let wrong = |detail: String| Err(Violation::new(VALUES_MATCH_FIELDS, detail));
        for (key, value) in values {
            let Some(field) = self.fields.iter().find(|f| &f.id == key) else {
                return wrong(format!(
                    "answer.values.{key} names no field of request {request}; answer its fields only"
                ));
            };
            let free_text = match (&field.kind, value) {
                (FieldKind::String, Value::String(_)) => true,
                (FieldKind::Boolean, Value::Bool(_)) => false,
                (FieldKind::Number { min, max }, Value::Number(n)) => {
                    let n = n.as_f64().unwrap_or(f64::NAN);
                    if min.is_some_and(|min| n < min) || max.is_some_and(|max| n > max) {
                        return wrong(format!(
                            "answer.values.{key} = {n} is outside the field's bounds [{min:?}, {max:?}]"
                        ));
                    }
                    false
                }
                (
                    FieldKind::Select {
                        choices,
                        multi: false,
                        other,
                    },
                    Value::String(s),
                ) => select_free_text(key, choices, *other, s)?,
                (
                    FieldKind::Select {
                        choices,
                        multi: true,
                        other,
                    },
                    Value::Array(items),
                ) => {
                    let mut any = false;
                    for item in items {
                        // Flatness (strings only) is a single-Event rule checked before.
                        any |= select_free_text(key, choices, *other, item.as_str().unwrap_or_default())?;
                    }
                    any
                }
                (kind, _) => {
                    return wrong(format!(
                        "answer.values.{key} is {} but the field is {}",
                        json_kind(value),
                        kind.expects()
                    ))
                }
            };
            // User-authored text follows answer.text's rule: redacted minimum (AEP-0006 gating).
            if free_text && capture < Capture::Redacted {
                return wrong(format!(
                    "answer.values.{key} carries free text at capture {capture}; text needs capture redacted or \
                     full, drop the value at {capture}"
                ));
            }
        }
        Ok(())
    }
}

/// Whether a select answer is free text; an error when free text is not allowed.
fn select_free_text(key: &str, choices: &[String], other: bool, answer: &str) -> Result<bool, Violation> {
    if choices.iter().any(|c| c == answer) {
        Ok(false)
    } else if other {
        Ok(true)
    } else {
        Err(Violation::new(
            VALUES_MATCH_FIELDS,
            format!(
                "answer.values.{key} = {answer:?} is not one of the field's choice ids {choices:?} and the field \
                 has no other:true; answer with a choice id"
            ),
        ))
    }
}

impl Field {
    fn parse(spec: &Value) -> Option<Field> {
        let flag = |name| spec.get(name).and_then(Value::as_bool).unwrap_or(false);
        let kind = match spec.get("type")?.as_str()? {
            "string" => FieldKind::String,
            "boolean" => FieldKind::Boolean,
            "number" => FieldKind::Number {
                min: spec.get("min").and_then(Value::as_f64),
                max: spec.get("max").and_then(Value::as_f64),
            },
            "select" => FieldKind::Select {
                choices: spec
                    .get("choices")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| Some(c.get("id")?.as_str()?.to_string()))
                    .collect(),
                multi: flag("multi"),
                other: flag("other"),
            },
            _ => return None,
        };
        Some(Field {
            id: spec.get("id")?.as_str()?.to_string(),
            kind,
        })
    }
}

impl FieldKind {
    fn expects(&self) -> &'static str {
        match self {
            FieldKind::String => "type string (a string)",
            FieldKind::Number { .. } => "type number (a number)",
            FieldKind::Boolean => "type boolean (a boolean)",
            FieldKind::Select { multi: false, .. } => "a single select (one choice id)",
            FieldKind::Select { multi: true, .. } => "a multi select (an array of choice ids)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Form {
        Form::of_request(Some(&json!({
            "kind": "form",
            "prompt": "p",
            "fields": [
                {"id": "name", "type": "string", "label": "Name"},
                {"id": "n", "type": "number", "label": "N", "min": 1, "max": 5},
                {"id": "ok", "type": "boolean", "label": "Ok"},
                {"id": "db", "type": "select", "label": "Db", "choices": [{"id": "1", "label": "pg"}]},
                {"id": "tags", "type": "select", "label": "Tags", "multi": true, "other": true,
                 "choices": [{"id": "a", "label": "A"}]}
            ]
        })))
        .expect("a form")
    }

    fn answer(values: Value, capture: Capture) -> Result<(), Violation> {
        form().check_answer("R1", values.as_object().unwrap(), capture)
    }

    #[test]
    fn fitting_values_pass() {
        let all = json!({"name": "svc", "n": 3, "ok": true, "db": "1", "tags": ["a", "custom"]});
        assert_eq!(answer(all, Capture::Redacted), Ok(()));
        // Structural values stay legal at metadata.
        assert_eq!(
            answer(
                json!({"n": 1, "ok": false, "db": "1", "tags": ["a"]}),
                Capture::Metadata
            ),
            Ok(())
        );
    }

    #[test]
    fn misfitting_values_are_rejected_with_the_rule() {
        for (values, capture) in [
            (json!({"unknown": "x"}), Capture::Redacted),
            (json!({"n": 9}), Capture::Redacted),
            (json!({"n": "3"}), Capture::Redacted),
            (json!({"ok": "yes"}), Capture::Redacted),
            (json!({"db": "MariaDB"}), Capture::Redacted),
            (json!({"db": ["1"]}), Capture::Redacted),
            (json!({"tags": "a"}), Capture::Redacted),
            (json!({"name": "svc"}), Capture::Metadata),
            (json!({"tags": ["a", "custom"]}), Capture::Metadata),
        ] {
            let err = answer(values.clone(), capture).expect_err(&values.to_string());
            assert_eq!(err.rule, VALUES_MATCH_FIELDS, "{values}");
        }
    }

    #[test]
    fn only_form_requests_have_a_form() {
        assert_eq!(
            Form::of_request(Some(&json!({"kind": "permission", "prompt": "p"}))),
            None
        );
        assert_eq!(Form::of_request(None), None);
    }

    #[test]
    fn single_event_rules() {
        let fields = json!({"kind": "input", "prompt": "p", "fields": []});
        assert_eq!(
            check_event("attention.requested", &fields).unwrap_err().rule,
            FIELDS_ONLY_ON_FORMS
        );
        let nested = json!({"answer": {"values": {"a": {"b": 1}}}});
        assert_eq!(
            check_event("attention.answered", &nested).unwrap_err().rule,
            FLAT_VALUES
        );
        assert_eq!(
            check_event("control.attention.respond", &nested).unwrap_err().rule,
            FLAT_VALUES
        );
        let mixed = json!({"answer": {"values": {"a": ["1", 2]}}});
        assert_eq!(check_event("attention.answered", &mixed).unwrap_err().rule, FLAT_VALUES);
        let flat = json!({"answer": {"values": {"a": ["1"], "b": 2.5, "c": false, "d": "x"}}});
        assert_eq!(check_event("attention.answered", &flat), Ok(()));
    }
}
