//! Capture gating at the producer (AEP-0002 §5.1, AEP-0003 §9.1–§9.2, §9.5) and down-leveling
//! at a hop (AEP-0001 §8.2), driven by the `x-aep-capture` annotations `build.rs` generates
//! from the vendored schemas, so the rules cannot drift from the schemas they implement.
//!
//! Both directions share one mechanism: drop every field whose minimum capture is above the
//! level (unannotated fields default to `metadata`, AEP-0002 §5.1 rule 4), then, below
//! `redacted`, degrade the `[metadata*]` exception fields (AEP-0002 §5.3, AEP-0006) whose
//! annotation says `metadata` but whose content may be free text: `attention.requested`'s
//! `prompt` is synthesized from structure, option, field and choice labels become their ids,
//! and `answer.values` keeps only numbers and booleans.
//!
//! Neither function runs the redaction pipeline: gating at `redacted` asserts that the
//! `redacted`-gated text already passed it (AEP-0001 §8.2(e)), which is why a hop never
//! rewrites a `full` Event to `redacted`.

use crate::schemas::capture_annotations;
use crate::types::{ATTENTION_ANSWERED, ATTENTION_REQUESTED, CONTROL_ATTENTION_RESPOND};
use crate::{Capture, Envelope};
use serde_json::{Map, Value};

/// Gates `event` for emission at `level`, the producer's ceiling (AEP-0003 §9.1).
///
/// Drops every `data` field annotated above the level honored, degrades the `[metadata*]`
/// fields below `redacted`, and sets `capture` to the level honored (AEP-0003 §9.5): `level`,
/// or the lower `capture` the producer already declared (gating never up-levels). At `none`
/// the Event keeps its envelope only.
///
/// A type without a payload schema (every `x.*` type) has no annotations to gate by, so below
/// `full` its `data` members are all dropped, the conservative direction hops take too
/// (downlevel corpus DL8). A producer that knows its vendor payload declares it with
/// [`gate_with`] instead.
///
/// `answer.values` keeps numbers and booleans only: without the request's `field_spec`s a
/// string may be free text. A producer holding them gates the values with
/// [`gate_form_values`], which also keeps closed-select ids, and puts the result back.
pub fn gate(event: &mut Envelope, level: Capture) {
    let annotations = capture_annotations(&event.ty);
    gate_by(event, annotations, level);
}

/// [`gate`] with annotations the producer declares for its own vendor type, in the registry's
/// form: `(dotted path, minimum capture)`, array items as `name[]` (`items[].text`).
/// Unlisted fields default to `metadata` (AEP-0002 §5.1 rule 4).
pub fn gate_with(event: &mut Envelope, annotations: &[(&str, Capture)], level: Capture) {
    gate_by(event, Some(annotations), level);
}

fn gate_by(event: &mut Envelope, annotations: Option<&[(&str, Capture)]>, level: Capture) {
    let honored = event.capture.map_or(level, |declared| declared.min(level));
    event.capture = Some(honored);
    if honored == Capture::None {
        event.data = None;
        return;
    }
    let Some(data) = event.data.as_mut() else {
        return;
    };
    match annotations {
        Some(annotations) => {
            prune(data, annotations, honored);
            let origin = Origin {
                ty: &event.ty,
                agent: &event.agent,
                subject: event.subject.as_deref(),
            };
            degrade_exceptions(&origin, data, honored);
        }
        None if honored < Capture::Full => data.clear(),
        None => {}
    }
}

/// Down-levels `event` to a subscriber's `ceiling` at a hop (AEP-0001 §8.2, AEP-0003 §6.4).
///
/// An Event at or below the ceiling passes unchanged (never up-level, §8.2(b)). Otherwise the
/// target is the ceiling, except that a `full` Event at a `redacted` ceiling lands on
/// `metadata`: a mechanical hop cannot mint the `redacted` provenance claim (§8.2(e)).
/// `data` goes entirely at `none`, for a type without a payload schema, and when it is not
/// an object; otherwise fields above the target are pruned along their dotted paths and the
/// `[metadata*]` fields degrade as in [`gate`]. `capture` is rewritten to the target.
///
/// An absent `capture` is the default `metadata` (§8.2(d)); an unknown one is treated as
/// `full`, the reading that strips the most. A non-object is returned unchanged: it is not an
/// Event and validation rejects it before any hop.
pub fn downlevel(event: &Value, ceiling: Capture) -> Value {
    let Some(fields) = event.as_object() else {
        return event.clone();
    };
    let declared = match fields.get("capture") {
        None => Capture::default(),
        Some(value) => value
            .as_str()
            .and_then(|s| Capture::ALL.into_iter().find(|c| c.as_str() == s))
            .unwrap_or(Capture::Full),
    };
    if ceiling >= declared {
        return event.clone();
    }
    let target = if ceiling == Capture::Redacted && declared == Capture::Full {
        Capture::Metadata
    } else {
        ceiling
    };

    let mut out = fields.clone();
    out.insert("capture".to_string(), Value::from(target.as_str()));
    let ty = fields.get("type").and_then(Value::as_str).unwrap_or_default();
    let annotations = capture_annotations(ty).filter(|_| target > Capture::None);
    match (out.get_mut("data"), annotations) {
        (Some(Value::Object(data)), Some(annotations)) => {
            prune(data, annotations, target);
            let origin = Origin {
                ty,
                agent: fields.get("agent").and_then(Value::as_str).unwrap_or_default(),
                subject: fields.get("subject").and_then(Value::as_str),
            };
            degrade_exceptions(&origin, data, target);
        }
        (None, _) => {}
        _ => {
            out.remove("data");
        }
    }
    Value::Object(out)
}

/// Gates the `answer.values` of a `kind: "form"` answer against the request's `fields`
/// (AEP-0002 §5.3, AEP-0006): number and boolean answers and closed-select choice ids are
/// structural and always kept; string answers and `other` free text on a select need
/// `redacted` or above. Keys no `field_spec` declares are dropped (conservative).
///
/// A value whose JSON type contradicts its `field_spec` (a string for a number field) is
/// treated as free text. Only the metadata/redacted asymmetry is applied here: at `none` the
/// caller drops `data` as a whole (capture-gating corpus, last-but-one case). At `redacted`
/// the caller passes the kept free text through the redaction pipeline (AEP-0003 §9.4).
pub fn gate_form_values(fields: &[Value], values: &Map<String, Value>, level: Capture) -> Map<String, Value> {
    let free_text_allowed = level >= Capture::Redacted;
    values
        .iter()
        .filter(|(id, value)| {
            let Some(spec) = fields
                .iter()
                .find(|spec| spec.get("id").and_then(Value::as_str) == Some(id.as_str()))
            else {
                return false;
            };
            let structural = match spec.get("type").and_then(Value::as_str) {
                Some("number") => value.is_number(),
                Some("boolean") => value.is_boolean(),
                Some("select") => is_closed_choice(spec, value),
                _ => false,
            };
            structural || free_text_allowed
        })
        .map(|(id, value)| (id.clone(), value.clone()))
        .collect()
}

/// A select answer is structural when it is a `choices[].id`, or an array of them (`multi`).
fn is_closed_choice(spec: &Value, value: &Value) -> bool {
    let choices = spec
        .get("choices")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let is_choice = |entry: &Value| entry.is_string() && choices.iter().any(|choice| choice.get("id") == Some(entry));
    match value {
        Value::Array(entries) => entries.iter().all(is_choice),
        entry => is_choice(entry),
    }
}

/// The minimum capture of a dotted path; unannotated paths are `metadata` (AEP-0002 §5.1 r4).
fn min_capture(annotations: &[(&str, Capture)], path: &str) -> Capture {
    annotations
        .iter()
        .find(|(annotated, _)| *annotated == path)
        .map_or(Capture::Metadata, |(_, level)| *level)
}

/// Drops every member of `data` annotated above `level`, at any depth.
fn prune(data: &mut Map<String, Value>, annotations: &[(&str, Capture)], level: Capture) {
    prune_object(data, annotations, level, &mut String::new());
}

fn prune_object(object: &mut Map<String, Value>, annotations: &[(&str, Capture)], level: Capture, path: &mut String) {
    object.retain(|key, value| {
        let parent = path.len();
        if parent > 0 {
            path.push('.');
        }
        path.push_str(key);
        let keep = min_capture(annotations, path) <= level;
        if keep {
            prune_value(value, annotations, level, path);
        }
        path.truncate(parent);
        keep
    });
}

fn prune_value(value: &mut Value, annotations: &[(&str, Capture)], level: Capture, path: &mut String) {
    match value {
        Value::Object(object) => prune_object(object, annotations, level, path),
        Value::Array(items) => {
            let parent = path.len();
            path.push_str("[]");
            if min_capture(annotations, path) <= level {
                items
                    .iter_mut()
                    .for_each(|item| prune_value(item, annotations, level, path));
            } else {
                items.clear();
            }
            path.truncate(parent);
        }
        _ => {}
    }
}

/// The envelope attributes the metadata synthesis of a prompt may use (AEP-0003 §9.2).
struct Origin<'a> {
    ty: &'a str,
    agent: &'a str,
    subject: Option<&'a str>,
}

/// Below `redacted`, the `[metadata*]` fields may not keep their content (AEP-0002 §5.3): it
/// is replaced by structure, never smuggled (AEP-0003 §9.2). A malformed exception field (a
/// non-array `options`, a non-object option) is dropped rather than guessed at.
fn degrade_exceptions(origin: &Origin<'_>, data: &mut Map<String, Value>, level: Capture) {
    if level >= Capture::Redacted {
        return;
    }
    match origin.ty {
        ATTENTION_REQUESTED => {
            if data.contains_key("prompt") {
                let kind = data.get("kind").and_then(Value::as_str).unwrap_or("attention");
                let prompt = match origin.subject {
                    Some(subject) => format!("{} requests {kind}: {subject}", origin.agent),
                    None => format!("{} requests {kind}", origin.agent),
                };
                data.insert("prompt".to_string(), Value::String(prompt));
            }
            degrade_labelled_list(data, "options", |_| {});
            degrade_labelled_list(data, "fields", |field| degrade_labelled_list(field, "choices", |_| {}));
        }
        ATTENTION_ANSWERED | CONTROL_ATTENTION_RESPOND => {
            let Some(answer) = data.get_mut("answer").and_then(Value::as_object_mut) else {
                return;
            };
            match answer.get_mut("values") {
                Some(Value::Object(values)) => values.retain(|_, value| value.is_number() || value.is_boolean()),
                Some(_) => {
                    answer.remove("values");
                }
                None => {}
            }
        }
        _ => {}
    }
}

/// Replaces each item's `label` with its `id` (the hop's structural placeholder, downlevel
/// corpus DL3/DL4); an item without a usable id loses its label. `inner` degrades nested
/// lists (a field's `choices`).
fn degrade_labelled_list(parent: &mut Map<String, Value>, key: &str, inner: impl Fn(&mut Map<String, Value>)) {
    let Some(list) = parent.get_mut(key) else {
        return;
    };
    let Some(items) = list.as_array_mut() else {
        parent.remove(key);
        return;
    };
    items.retain(Value::is_object);
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        let placeholder = match item.get("id") {
            Some(Value::String(id)) => Some(id.clone()),
            Some(Value::Number(id)) => Some(id.to_string()),
            _ => None,
        };
        match placeholder {
            Some(id) => {
                item.insert("label".to_string(), Value::String(id));
            }
            None => {
                item.remove("label");
            }
        }
        inner(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(ty: &str, subject: Option<&str>, data: Value) -> Envelope {
        let mut e = Envelope::new(
            "01J",
            ty,
            "2026-07-03T10:00:00Z",
            "aep://h/agent/cline/session/s",
            "cline",
        )
        .unwrap();
        e.session = Some("s".into());
        e.seq = Some(0);
        e.subject = subject.map(String::from);
        e.data = data.as_object().cloned();
        e
    }

    fn data(e: &Envelope) -> Value {
        Value::Object(e.data.clone().unwrap_or_default())
    }

    #[test]
    fn gate_drops_fields_above_the_level_and_sets_capture() {
        let full = json!({"tool": {"name": "execute_command", "call_id": "c1"}, "duration_ms": 812,
            "result_digest": "9623cdc86ee0e1f01e338bc35845417f", "result": "ok 42 tests",
            "result_redacted": "ok 42 tests", "vendorextra": 1});
        let mut e = event("tool.completed", Some("execute_command"), full.clone());
        gate(&mut e, Capture::Metadata);
        assert_eq!(e.capture, Some(Capture::Metadata));
        assert_eq!(
            data(&e),
            json!({"tool": {"name": "execute_command", "call_id": "c1"}, "duration_ms": 812,
                "result_digest": "9623cdc86ee0e1f01e338bc35845417f", "vendorextra": 1})
        );

        let mut e = event("tool.completed", None, full.clone());
        gate(&mut e, Capture::Redacted);
        assert_eq!(e.capture, Some(Capture::Redacted));
        assert!(e.data.as_ref().unwrap().contains_key("result_redacted"));
        assert!(!e.data.as_ref().unwrap().contains_key("result"));

        let mut e = event("tool.completed", None, full.clone());
        gate(&mut e, Capture::Full);
        assert_eq!(data(&e), full);
    }

    #[test]
    fn gate_prunes_nested_paths() {
        let mut e = event(
            "run.failed",
            None,
            json!({"reason": "ApiError", "error": {"type": "ApiError", "message": "boom at /home/u"}}),
        );
        gate(&mut e, Capture::Metadata);
        assert_eq!(data(&e), json!({"reason": "ApiError", "error": {"type": "ApiError"}}));
    }

    #[test]
    fn gate_at_none_keeps_the_envelope_only() {
        let mut e = event("session.ended", None, json!({"reason": "normal"}));
        gate(&mut e, Capture::None);
        assert_eq!(e.capture, Some(Capture::None));
        assert_eq!(e.data, None);
    }

    #[test]
    fn gate_never_up_levels_a_declared_capture() {
        let mut e = event(
            "run.cancelled",
            None,
            json!({"by": "user", "reason": "user pressed escape"}),
        );
        e.capture = Some(Capture::Metadata);
        gate(&mut e, Capture::Full);
        assert_eq!(e.capture, Some(Capture::Metadata));
        assert_eq!(data(&e), json!({"by": "user"}));
    }

    #[test]
    fn gate_synthesizes_the_prompt_and_degrades_labels_below_redacted() {
        let requested = json!({"kind": "permission", "prompt": "Cline wants to run rm -rf build/",
            "options": [{"id": "approve", "label": "Approve"}, {"id": "deny", "label": "Deny"}, "Maybe"],
            "respond_via": ["control"], "context": {"command": "rm -rf build/"}});
        let mut e = event("attention.requested", Some("execute_command"), requested.clone());
        gate(&mut e, Capture::Metadata);
        assert_eq!(
            data(&e),
            json!({"kind": "permission", "prompt": "cline requests permission: execute_command",
                "options": [{"id": "approve", "label": "approve"}, {"id": "deny", "label": "deny"}],
                "respond_via": ["control"]})
        );

        let mut e = event("attention.requested", None, requested);
        gate(&mut e, Capture::Redacted);
        assert_eq!(data(&e)["prompt"], "Cline wants to run rm -rf build/");
        assert_eq!(data(&e)["options"][0]["label"], "Approve");
    }

    #[test]
    fn malformed_exception_fields_are_dropped_not_kept() {
        let mut e = event(
            "attention.requested",
            None,
            json!({"kind": "input", "prompt": "free text", "options": "Allow or Deny?",
                "fields": [{"id": 7, "type": "string", "label": "secret"}, {"type": "string", "label": "secret"}]}),
        );
        gate(&mut e, Capture::Metadata);
        assert_eq!(
            data(&e),
            json!({"kind": "input", "prompt": "cline requests input",
                "fields": [{"id": 7, "type": "string", "label": "7"}, {"type": "string"}]})
        );

        let mut e = event(
            "attention.answered",
            None,
            json!({"answer": {"option": "deny", "values": "secret"}}),
        );
        gate(&mut e, Capture::Metadata);
        assert_eq!(data(&e), json!({"answer": {"option": "deny"}}));
    }

    #[test]
    fn gate_keeps_only_numbers_and_booleans_in_answer_values_below_redacted() {
        let mut e = event(
            "attention.answered",
            None,
            json!({"answer": {"option": "1", "text": "free", "values": {"n": 3, "b": false, "s": "free", "a": ["1"]}}}),
        );
        gate(&mut e, Capture::Metadata);
        assert_eq!(
            data(&e),
            json!({"answer": {"option": "1", "values": {"n": 3, "b": false}}})
        );
    }

    #[test]
    fn vendor_types_lose_their_data_below_full_unless_declared() {
        let payload = json!({"delivery": "queue", "text": "fix the build"});
        let mut e = event("x.cline.input.sent", None, payload.clone());
        gate(&mut e, Capture::Redacted);
        assert_eq!(data(&e), json!({}));

        let mut e = event("x.cline.input.sent", None, payload.clone());
        gate(&mut e, Capture::Full);
        assert_eq!(data(&e), payload);

        let mut e = event("x.cline.input.sent", None, payload);
        gate_with(&mut e, &[("text", Capture::Redacted)], Capture::Metadata);
        assert_eq!(data(&e), json!({"delivery": "queue"}));
    }

    #[test]
    fn downlevel_never_raises_and_handles_malformed_input() {
        let base = json!({"aep": "0.1", "id": "1", "type": "tool.failed", "time": "t", "source": "s",
            "agent": "a", "session": "s", "seq": 0,
            "data": {"tool": {"name": "Bash"}, "error": {"type": "E", "message": "secret"}}});
        // Absent capture is metadata: a metadata ceiling passes it unchanged.
        assert_eq!(downlevel(&base, Capture::Metadata), base);

        let mut unknown = base.clone();
        unknown["capture"] = json!("everything");
        let out = downlevel(&unknown, Capture::Redacted);
        assert_eq!(out["capture"], "metadata");
        assert_eq!(out["data"], json!({"tool": {"name": "Bash"}, "error": {"type": "E"}}));

        let mut not_object = base.clone();
        not_object["capture"] = json!("full");
        not_object["data"] = json!("verbatim secret");
        let out = downlevel(&not_object, Capture::Metadata);
        assert_eq!(out.get("data"), None);
        assert_eq!(out["capture"], "metadata");

        let mut no_data = base.clone();
        no_data.as_object_mut().unwrap().remove("data");
        no_data["capture"] = json!("full");
        assert_eq!(downlevel(&no_data, Capture::None).get("data"), None);

        assert_eq!(downlevel(&json!([1, 2]), Capture::None), json!([1, 2]));
    }

    #[test]
    fn form_values_treat_type_mismatches_as_free_text() {
        let fields = json!([{"id": "n", "type": "number", "label": "N"}, {"id": "b", "type": "boolean", "label": "B"},
            {"id": "c", "type": "select", "label": "C", "choices": [{"id": "1", "label": "one"}]},
            {"id": "x", "type": "mystery", "label": "X"}]);
        let values = json!({"n": "not a number", "b": "yes", "c": ["1", 1], "x": 5});
        let fields = fields.as_array().unwrap();
        let values = values.as_object().unwrap();
        assert_eq!(
            Value::Object(gate_form_values(fields, values, Capture::Metadata)),
            json!({})
        );
        assert_eq!(
            Value::Object(gate_form_values(fields, values, Capture::Redacted)),
            Value::Object(values.clone())
        );
    }
}
