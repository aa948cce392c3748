//! The public AEP corpus through the validator: every invalid case rejected for its named rule,
//! every golden line valid alone and as a stream, and a second, independent check of the golden
//! corpus straight against the vendored JSON Schemas.

use aep_core::validate::{validate_event, StreamValidator, Violation};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn conformance() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn golden() -> Vec<Value> {
    let path = conformance().join("fixtures/golden/golden.jsonl");
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, line)| serde_json::from_str(line).unwrap_or_else(|e| panic!("golden line {}: {e}", i + 1)))
        .collect()
}

/// A section reference: `AEP-0001 §5.1 #11` → ("0001", [5, 1], Some(11)).
#[derive(Debug, Clone, PartialEq)]
struct Ref {
    doc: String,
    section: Vec<u32>,
    attribute: Option<u32>,
}

/// Every `§` reference of a rule string; a bare `§7.4` belongs to the document named before it
/// (`AEP-0001 §5.1 #2 / §7.4`).
fn refs(rule: &str) -> Vec<Ref> {
    let token = Regex::new(r"AEP-(\d{4})|§(\d+(?:\.\d+)*)(?: #(\d+))?").unwrap();
    let mut doc = None;
    let mut out = Vec::new();
    for cap in token.captures_iter(rule) {
        if let Some(d) = cap.get(1) {
            doc = Some(d.as_str().to_string());
        } else if let Some(doc) = &doc {
            out.push(Ref {
                doc: doc.clone(),
                section: cap[2].split('.').map(|n| n.parse().unwrap()).collect(),
                attribute: cap.get(3).map(|n| n.as_str().parse().unwrap()),
            });
        }
    }
    out
}

/// The violation's leading reference is one of the case's, or a subsection of one (the
/// validator may be more precise: `§5.4` under the case's `§5`); an attribute number must match
/// exactly.
fn names_rule(violation: &Violation, case_rule: &str) -> bool {
    let Some(got) = refs(&violation.rule).into_iter().next() else {
        return false;
    };
    refs(case_rule).iter().any(|want| {
        want.doc == got.doc
            && got.section.starts_with(&want.section)
            && (want.attribute.is_none() || (want.section == got.section && want.attribute == got.attribute))
    })
}

#[test]
fn rule_reference_matching_is_strict() {
    let v = |rule: &str| Violation {
        rule: rule.into(),
        detail: String::new(),
        at: None,
    };
    assert!(names_rule(&v("AEP-0001 §5.1 #11 (seq)"), "AEP-0001 \u{a7}5.1 #11"));
    assert!(!names_rule(&v("AEP-0001 §5.1 #1 (aep)"), "AEP-0001 §5.1 #11"));
    assert!(!names_rule(&v("AEP-0001 §5.1 (null)"), "AEP-0001 §5.1 #11"));
    assert!(names_rule(&v("AEP-0001 §7.4 (reuse)"), "AEP-0001 §5.1 #2 / §7.4 (…)"));
    assert!(names_rule(
        &v("AEP-0002 §5.4 (payload)"),
        "AEP-0002 §4.2/§5 payload schema"
    ));
    assert!(!names_rule(&v("AEP-0002 §5 (payload)"), "AEP-0002 §5.2 payload schema"));
    assert!(!names_rule(&v("AEP-0001 §5.2 (scope)"), "AEP-0002 §5.2 payload schema"));
    assert!(!names_rule(&v("AEP-0001 §7.21"), "AEP-0001 §7.2"));
}

#[test]
fn every_invalid_case_is_rejected_for_its_named_rule() {
    let cases = read_json(&conformance().join("fixtures/invalid/cases.json"));
    let cases = cases["cases"].as_array().expect("cases array");
    assert_eq!(
        cases.len(),
        35,
        "the vendored invalid corpus has 35 cases; none skipped"
    );

    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let rule = case["rule"].as_str().unwrap();
        assert!(!refs(rule).is_empty(), "case {name:?}: no § reference in {rule:?}");
        let outcome = match (case.get("event"), case.get("events").and_then(Value::as_array)) {
            (Some(event), None) => single(event, rule),
            (None, Some(events)) => stream(events, rule),
            _ => Err("case has neither `event` nor `events`".to_string()),
        };
        if let Err(why) = outcome {
            failures.push(format!("{name:?} (rule {rule:?}): {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "invalid cases not rejected as named:\n{}",
        failures.join("\n")
    );
}

fn single(event: &Value, rule: &str) -> Result<(), String> {
    let violation = validate_event(event).err().ok_or("validate_event accepted it")?;
    if !names_rule(&violation, rule) {
        return Err(format!("rejected for another rule: {violation}"));
    }
    let pushed = StreamValidator::new()
        .push(event)
        .err()
        .ok_or("StreamValidator accepted it")?;
    if pushed != violation {
        return Err(format!("StreamValidator disagrees: {pushed}"));
    }
    Ok(())
}

/// Every Event but the last is legal; the last breaks the named cross-event rule.
fn stream(events: &[Value], rule: &str) -> Result<(), String> {
    let (last, prefix) = events.split_last().ok_or("empty stream")?;
    let mut validator = StreamValidator::new();
    for (i, event) in prefix.iter().enumerate() {
        validate_event(event).map_err(|v| format!("event {i} alone is invalid: {v}"))?;
        validator
            .push(event)
            .map_err(|v| format!("event {i} rejected early: {v}"))?;
    }
    validate_event(last).map_err(|v| format!("last event is invalid alone, not by the stream rule: {v}"))?;
    let violation = validator.push(last).err().ok_or("the stream was accepted")?;
    if !names_rule(&violation, rule) {
        return Err(format!("rejected for another rule: {violation}"));
    }
    Ok(())
}

#[test]
fn every_golden_line_is_valid_alone_and_as_one_stream() {
    let events = golden();
    assert_eq!(events.len(), 64);
    let mut validator = StreamValidator::new();
    for (i, event) in events.iter().enumerate() {
        let line = i + 1;
        if let Err(v) = validate_event(event) {
            panic!("golden line {line} ({}) rejected: {v}", event["type"]);
        }
        if let Err(v) = validator.push(event) {
            panic!("golden line {line} ({}) rejected by the stream: {v}", event["type"]);
        }
    }
    // Redelivering the whole corpus is legal: every line is deduped on (source, id).
    for (i, event) in events.iter().enumerate() {
        if let Err(v) = validator.push(event) {
            panic!("redelivered golden line {} rejected: {v}", i + 1);
        }
    }
}

/// The independent check: the vendored schemas, read from the files and compiled here, not
/// through the validator.
struct Schemas {
    envelope: jsonschema::Validator,
    payloads: HashMap<String, jsonschema::Validator>,
}

impl Schemas {
    fn load() -> Self {
        let compile = |path: &Path| {
            jsonschema::options()
                .should_validate_formats(true)
                .build(&read_json(path))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let dir = conformance().join("schemas/types");
        let payloads = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter_map(|path| {
                let ty = path.file_name()?.to_str()?.strip_suffix(".schema.json")?.to_string();
                Some((ty, compile(&path)))
            })
            .collect::<HashMap<_, _>>();
        assert!(payloads.len() >= 14, "payload schemas missing from {}", dir.display());
        Schemas {
            envelope: compile(&conformance().join("schemas/aep-event.schema.json")),
            payloads,
        }
    }

    fn errors(&self, event: &Value) -> Vec<String> {
        let mut errors: Vec<String> = self
            .envelope
            .iter_errors(event)
            .map(|e| format!("envelope: {e}"))
            .collect();
        let payload = event["type"].as_str().and_then(|ty| self.payloads.get(ty));
        if let (Some(schema), Some(data)) = (payload, event.get("data")) {
            errors.extend(
                schema
                    .iter_errors(data)
                    .map(|e| format!("data{}: {e}", e.instance_path())),
            );
        }
        errors
    }
}

#[test]
fn golden_corpus_passes_the_vendored_schemas_directly() {
    let schemas = Schemas::load();
    for (i, event) in golden().iter().enumerate() {
        let errors = schemas.errors(event);
        assert!(errors.is_empty(), "golden line {}: {errors:?}", i + 1);
    }
}

/// Keeps the independent check honest: the same schemas reject every single-Event invalid case
/// (the stream cases need cross-event rules no schema states).
#[test]
fn the_vendored_schemas_reject_the_single_event_invalid_cases() {
    let schemas = Schemas::load();
    let cases = read_json(&conformance().join("fixtures/invalid/cases.json"));
    let mut singles = 0;
    for case in cases["cases"].as_array().unwrap() {
        if let Some(event) = case.get("event") {
            singles += 1;
            assert!(!schemas.errors(event).is_empty(), "schemas accept {:?}", case["name"]);
        }
    }
    assert_eq!(singles, 25);
}
