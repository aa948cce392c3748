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
    for dir in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        if dir.ends_with("cline2") {
            // Cline 2.x captures: `<case>/<file>.json`, each `{payload, meta}`.
            for case in std::fs::read_dir(dir).unwrap() {
                let case = case.unwrap().path();
                if !case.is_dir() {
                    continue;
                }
                for entry in std::fs::read_dir(case).unwrap() {
                    let capture: Value =
                        serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
                    inputs.push(capture["payload"].clone());
                }
            }
            continue;
        }
        for entry in std::fs::read_dir(dir).unwrap() {
            inputs.push(serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap());
        }
    }
    assert!(inputs.len() >= 35 + 60);
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

fn real(dir: &str, hook: &str) -> Value {
    let path = format!("{}/tests/data/{dir}/{hook}-global.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What a real `tool_result` maps to at `level`: type, `error`, severity.
fn tool_result_at(dir: &str, level: Capture) -> (String, Value, Option<aep_core::Severity>) {
    let m = map_at(&real(dir, "tool_result"), level).remove(0);
    let error = m.data.as_ref().unwrap().get("error").cloned().unwrap_or(Value::Null);
    (m.ty, error, m.severity)
}

#[test]
fn a_failure_the_output_reports_is_tool_failed_with_its_kind() {
    use aep_core::Severity::{Notice, Warning};
    // Real Cline 3.0.65 tool_result payloads: the typed error is unset (or "[object Object]"
    // for a refused approval); the output says what happened.
    for (dir, kind, severity, message) in [
        ("hooks-exit-code", "exit_code", Warning, "Command exited with code 3"),
        ("hooks-aborted", "aborted", Notice, "Command failed: Command was aborted"),
        (
            "hooks-edit-failed",
            "tool_error",
            Warning,
            "Editor operation failed: No replacement performed: text not found in ~/proj/notes.txt.",
        ),
        (
            "hooks-denied",
            "denied",
            Notice,
            "Tool \"run_commands\" requires approval in a TTY session -- NOT a tool or system failure. Clarify with user before proceeding.",
        ),
    ] {
        let (ty, error, sev) = tool_result_at(dir, Capture::Metadata);
        assert_eq!(ty, "tool.failed", "{dir}");
        assert_eq!(error, json!({"type": kind}), "{dir}: no message at metadata");
        assert_eq!(sev, Some(severity), "{dir}");
        let (_, error, _) = tool_result_at(dir, Capture::Redacted);
        assert_eq!(error, json!({"type": kind, "message": message}), "{dir}: redacted");
    }
    let m = map_at(&real("hooks-exit-code", "tool_result"), Capture::Metadata).remove(0);
    let data = m.data.unwrap();
    assert_eq!(
        data["tool"],
        json!({"name": "run_commands", "call_id": "call_561e48ad23"})
    );
    assert_eq!(data["duration_ms"], 8);
    assert!(
        !data.contains_key("result_digest"),
        "tool.failed has no result (AEP-0002 §5)"
    );
    // A command that succeeded is still completed.
    let (ty, error, sev) = tool_result_at("hooks-local", Capture::Metadata);
    assert_eq!((ty.as_str(), error, sev), ("tool.completed", Value::Null, None));
}

#[test]
fn a_real_agent_error_fails_the_run_with_the_vendor_type_and_message() {
    let error = real("hooks-error", "agent_error");
    let meta = map_at(&error, Capture::Metadata).remove(0);
    assert_eq!(meta.ty, "run.failed");
    assert_eq!(meta.step.as_deref(), Some("1"));
    // Cline 3.0.65 names a provider's refusal `Error`: that is the vendor's type.
    assert_eq!(
        Value::Object(meta.data.unwrap()),
        json!({"reason": "Error", "error": {"type": "Error"}})
    );
    let red = map_at(&error, Capture::Redacted).remove(0);
    let data = Value::Object(red.data.unwrap());
    assert_eq!(
        data["error"],
        json!({"type": "Error", "message": "fake upstream refused the request"})
    );
    assert!(!data.to_string().contains("bunfs"), "the stack is not emitted");
}

#[test]
fn an_agent_error_without_a_name_invents_no_type() {
    let mut error = real("hooks-error", "agent_error");
    error["error"] = json!({"message": "something broke"});
    let meta = map_at(&error, Capture::Metadata).remove(0);
    assert_eq!(Value::Object(meta.data.unwrap()), json!({"reason": "error"}));
    let full = map_at(&error, Capture::Full).remove(0);
    assert_eq!(
        Value::Object(full.data.unwrap()),
        json!({"reason": "error", "error": {"message": "something broke"}})
    );
    error["error"] = json!({});
    let meta = map_at(&error, Capture::Full).remove(0);
    assert_eq!(Value::Object(meta.data.unwrap()), json!({"reason": "error"}));
}
