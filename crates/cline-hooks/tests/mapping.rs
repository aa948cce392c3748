//! The hook mapping against the public pins (`conformance/fixtures/mappings/cline.json`) and
//! the real Cline 3.0.65 payloads in `tests/data/`.

use aep_core::digest::canonical_json;
use aep_core::redact::{RedactOptions, Redactor};
use aep_core::{Capture, CapturePolicy};
use cline_hooks::mapping::{map_hook, MapContext};
use cline_hooks::HookPayload;
use serde_json::{json, Value};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../conformance/fixtures/mappings/cline.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn redactor() -> Redactor {
    Redactor::new(RedactOptions {
        home: Some("/home/dev".into()),
        ..RedactOptions::default()
    })
    .unwrap()
}

fn map_at(payload: &Value, level: Capture) -> Vec<cline_hooks::Mapped> {
    let policy = CapturePolicy::new(level);
    let redactor = redactor();
    let ctx = MapContext {
        capture: &policy,
        redactor: &redactor,
    };
    map_hook(&HookPayload::from_value(payload.clone()).unwrap(), &ctx)
}

#[test]
fn every_pin_is_reproduced_exactly_at_metadata() {
    let fx = fixture();
    let mut cases: Vec<(String, Value)> = fx["hooks"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, case)| (name.clone(), case.clone()))
        .collect();
    assert_eq!(cases.len(), 13, "the fixture pins 13 hook cases");
    cases.push(("fallback".into(), fx["fallback"].clone()));
    for (name, case) in cases {
        let got: Vec<Value> = map_at(&case["input"], Capture::Metadata)
            .iter()
            .map(|m| m.pin_view())
            .collect();
        assert_eq!(
            canonical_json(&Value::Array(got.clone())),
            canonical_json(&case["expected"]),
            "pin {name}: got {}",
            Value::Array(got)
        );
    }
}

#[test]
fn content_appears_only_at_redacted_and_full() {
    let fx = fixture();
    let mut call = fx["hooks"]["tool_call"]["input"].clone();
    call["tool_call"]["input"] = json!({"command": "curl -H 'Authorization: Bearer abcdef123456' /home/dev/x"});
    let red = map_at(&call, Capture::Redacted);
    let data = red[0].data.as_ref().unwrap();
    let args = canonical_json(&data["args_redacted"]);
    assert!(
        args.contains("[REDACTED:secret]") && !args.contains("abcdef123456"),
        "{args}"
    );
    assert!(args.contains("~/x") && !args.contains("/home/dev"), "{args}");
    assert!(!data.contains_key("args"));
    assert_eq!(red[0].capture, Capture::Redacted);
    let full = map_at(&call, Capture::Full);
    assert_eq!(full[0].data.as_ref().unwrap()["args"], call["tool_call"]["input"]);
    // The digest is over the original content at every level (AEP-0003 §9.3).
    let meta = map_at(&call, Capture::Metadata);
    assert_eq!(meta[0].data.as_ref().unwrap()["args_digest"], data["args_digest"]);
    let none = map_at(&call, Capture::None);
    assert!(none[0].data.is_none());

    let err = map_at(&fx["hooks"]["tool_result_error"]["input"], Capture::Redacted);
    assert_eq!(
        err[0].data.as_ref().unwrap()["error"]["message"],
        "EACCES: permission denied"
    );
    let failed = map_at(&fx["hooks"]["agent_error"]["input"], Capture::Redacted);
    assert_eq!(failed[0].data.as_ref().unwrap()["error"]["message"], "rate limited");
    let abort = map_at(&fx["hooks"]["agent_abort"]["input"], Capture::Full);
    assert_eq!(abort[0].data.as_ref().unwrap()["reason"], "user pressed escape");
    let ok = map_at(&fx["hooks"]["tool_result_ok"]["input"], Capture::Redacted);
    assert_eq!(ok[0].data.as_ref().unwrap()["result_redacted"], "ok 42 tests");
    // pre_compact's context dump paths are never emitted (no annotated home).
    for level in Capture::ALL {
        let pc = map_at(&fx["hooks"]["pre_compact"]["input"], level);
        let text = format!("{:?}", pc[0].data);
        assert!(!text.contains("/tmp/ctx"), "{level}: {text}");
    }
}

#[test]
fn every_mapped_event_is_a_valid_aep_payload_at_every_level() {
    let fx = fixture();
    let mut inputs: Vec<Value> = fx["hooks"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["input"].clone())
        .collect();
    inputs.push(fx["fallback"]["input"].clone());
    for dir in ["hooks-local", "hooks-cancel"] {
        for entry in std::fs::read_dir(format!("{}/tests/data/{dir}", env!("CARGO_MANIFEST_DIR"))).unwrap() {
            inputs.push(serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap());
        }
    }
    assert!(inputs.len() >= 20);
    for level in Capture::ALL {
        for input in &inputs {
            for (i, m) in map_at(input, level).into_iter().enumerate() {
                let planned = cline_hooks::Planned {
                    id: format!("E{i}"),
                    run: None,
                    cause: None,
                    agent: None,
                    event: m,
                };
                let pos = aep_core::sequence::Position {
                    epoch: 0,
                    seq: i as u64,
                };
                let env = planned
                    .to_envelope("aep://h/agent/cline/session/s", "s", "2026-11-30T00:00:00Z", pos)
                    .unwrap();
                if let Err(v) = aep_core::validate::validate_event(&env.to_value()) {
                    panic!("{level} {}: {v}", env.to_line().unwrap());
                }
            }
        }
    }
}
