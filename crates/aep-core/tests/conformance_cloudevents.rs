//! AEP-0005 §5 rules 1, 2 and 5 on the vendored corpus: every golden Event forwards to exactly
//! its pinned CloudEvent (`ce-roundtrip/ce-expected.jsonl`), which is valid CloudEvents 1.0 and
//! maps back to the golden Event (canonical-JSON identity); every hand-authored inbound case
//! (`ce-roundtrip/inbound-cases.json`) maps to its pinned envelope, which validates.

use aep_core::cloudevents::{check, forward, inverse, DropReason};
use aep_core::validate::validate_event;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn conformance() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/fixtures")
}

fn lines(path: &str) -> Vec<Map<String, Value>> {
    let path = conformance().join(path);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .enumerate()
        .map(|(i, line)| match serde_json::from_str(line) {
            Ok(Value::Object(o)) => o,
            other => panic!("{} line {}: {other:?}", path.display(), i + 1),
        })
        .collect()
}

/// Canonical JSON (RFC 8785): the comparison §5 rule 1 names.
fn canonical(object: &Map<String, Value>) -> String {
    serde_jcs::to_string(object).unwrap()
}

#[test]
fn every_golden_event_round_trips_through_its_pinned_cloudevent() {
    let golden = lines("golden/golden.jsonl");
    let expected = lines("ce-roundtrip/ce-expected.jsonl");
    assert_eq!(golden.len(), 64, "the whole golden corpus");
    assert_eq!(golden.len(), expected.len(), "one pinned CloudEvent per golden Event");
    for (i, (event, pinned)) in golden.iter().zip(&expected).enumerate() {
        let ce = forward(event).unwrap_or_else(|e| panic!("golden {}: {e}", i + 1));
        assert_eq!(canonical(&ce), canonical(pinned), "golden {}: forward", i + 1);
        check(&ce).unwrap_or_else(|e| panic!("golden {}: {e}", i + 1));
        let back = inverse(&ce).unwrap_or_else(|e| panic!("golden {}: {e}", i + 1));
        assert!(back.dropped.is_empty(), "golden {}: dropped {:?}", i + 1, back.dropped);
        assert_eq!(canonical(&back.event), canonical(event), "golden {}: inverse", i + 1);
        // Through the wire form too: what the JetStream sink publishes and `tail --nats` reads.
        let wire: Map<String, Value> = serde_json::from_str(&serde_json::to_string(&ce).unwrap()).unwrap();
        assert_eq!(canonical(&inverse(&wire).unwrap().event), canonical(event));
    }
}

#[test]
fn inbound_cases_preserve_legal_extensions_and_drop_illegal_names() {
    let path = conformance().join("ce-roundtrip/inbound-cases.json");
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = cases["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let inbound = inverse(case["ce"].as_object().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = case["expected"].as_object().unwrap();
        assert_eq!(canonical(&inbound.event), canonical(expected), "{name}");
        let event = Value::Object(inbound.event.clone());
        validate_event(&event).unwrap_or_else(|v| panic!("{name}: {v:?}"));
        let dropped: Vec<(&str, DropReason)> = inbound.dropped.iter().map(|d| (d.name.as_str(), d.reason)).collect();
        if name.contains("dropped") {
            assert_eq!(dropped, [("aep_bad", DropReason::IllegalName)], "{name}");
        } else {
            assert!(dropped.is_empty(), "{name}: {dropped:?}");
        }
    }
}
