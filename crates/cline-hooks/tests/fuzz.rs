//! A fault campaign over hook bodies (issue #19): thousands of mutations of the real payloads
//! of both Cline generations (`tests/data`), each read and mapped by a tracker that has seen
//! its session start. Whatever a body holds, reading it never panics, and every event the
//! mapping plans is valid AEP or refused by the envelope rules (which the daemon drops and
//! logs), never a panic. Deterministic: a fixed seed, so a finding reproduces.

use aep_core::redact::{RedactOptions, Redactor};
use aep_core::sequence::{MemorySequencer, Sequencer};
use aep_core::{Capture, CapturePolicy};
use cline_hooks::mapping::MapContext;
use cline_hooks::{HookPayload, SessionTracker};
use serde_json::{json, Value};
use std::path::Path;

/// xorshift64*: enough randomness for mutations, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every real payload: the 3.x captures as they are, the 2.x captures' `payload`.
fn real_payloads() -> Vec<Value> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut out = Vec::new();
    let mut dirs = vec![data.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "json") {
                let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                out.push(v.get("payload").cloned().unwrap_or(v));
            }
        }
    }
    out.retain(|v| v.get("hookName").is_some());
    out.sort_by_key(|v| v.to_string());
    out
}

/// Values that have broken readers before, or could.
fn odd_value(rng: &mut Rng) -> Value {
    let choices = [
        Value::Null,
        json!(true),
        json!(-1),
        json!(0),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1e308),
        json!(-1e-308),
        json!(0.5),
        json!(""),
        json!("9999999999999999"),
        json!("253402300800000"),
        json!("+275760-09-13T00:00:00.000Z"),
        json!("2026-13-40T99:99:99Z"),
        json!("9999-12-31T23:59:59.999Z"),
        json!("0000-01-01T00:00:00Z"),
        json!("\u{0}\u{202e}😀\u{feff}"),
        json!("x".repeat(70_000)),
        json!([]),
        json!({}),
        json!([1, "a", null]),
        json!({"a": {"b": [1]}}),
        json!("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ];
    choices[rng.below(choices.len())].clone()
}

/// Every place in `v` (JSON pointers), the root excluded.
fn places(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(here.clone());
                places(child, here, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let here = format!("{at}/{i}");
                out.push(here.clone());
                places(child, here, out);
            }
        }
        _ => {}
    }
}

fn mutate(v: &mut Value, rng: &mut Rng) {
    for _ in 0..1 + rng.below(4) {
        let mut all = Vec::new();
        places(v, String::new(), &mut all);
        if all.is_empty() {
            return;
        }
        let at = all[rng.below(all.len())].clone();
        if rng.below(5) == 0 {
            let (parent, key) = at.rsplit_once('/').unwrap();
            match v.pointer_mut(parent) {
                Some(Value::Object(map)) => {
                    map.remove(&key.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(items)) => {
                    items.remove(key.parse::<usize>().unwrap());
                }
                _ => {}
            }
        } else if let Some(slot) = v.pointer_mut(&at) {
            *slot = odd_value(rng);
        }
    }
}

#[test]
fn thousands_of_mutated_real_payloads_never_panic_and_map_to_valid_events() {
    let payloads = real_payloads();
    assert!(payloads.len() > 50, "the real captures are there");
    let policy = CapturePolicy::new(Capture::Full);
    let redactor = Redactor::new(RedactOptions::default()).unwrap();
    let ctx = MapContext {
        capture: &policy,
        redactor: &redactor,
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut read, mut refused) = (0, 0);
    for round in 0..4000 {
        let original = &payloads[rng.below(payloads.len())];
        let mut v = original.clone();
        mutate(&mut v, &mut rng);
        let mut body = serde_json::to_vec(&v).unwrap();
        match rng.below(10) {
            0 => body.truncate(rng.below(body.len() + 1)),
            1 => body.splice(0..0, *b"\xEF\xBB\xBF").for_each(drop),
            _ => {}
        }
        let payload = match HookPayload::parse(&body) {
            Ok(p) => p,
            Err(e) => {
                assert!(
                    !matches!(e, cline_hooks::PayloadError::Panicked(_)),
                    "round {round}: {e}"
                );
                refused += 1;
                continue;
            }
        };
        read += 1;
        // A tracker that saw the session start, then the mutated hook.
        let mut tracker = SessionTracker::new();
        let start = HookPayload::from_value(original.clone()).unwrap();
        let mut ids = 0u64;
        let mut id = || {
            ids += 1;
            format!("ID{ids}")
        };
        let mut planned = tracker.plan(&start, &ctx, &mut id);
        planned.extend(tracker.plan(&payload, &ctx, &mut id));
        let session = payload.session_key().unwrap().to_string();
        let mut seq = MemorySequencer::new(0);
        let source = aep_core::source::session_source("h", "cline", &session);
        for p in planned {
            let position = seq.next(&session);
            // Refused by the envelope rules is a result (the daemon logs and drops it).
            if let Ok(envelope) = p.to_envelope(&source, &session, "2026-12-01T00:00:00Z", position) {
                let value = envelope.to_value();
                aep_core::validate::validate_event(&value)
                    .unwrap_or_else(|e| panic!("round {round}: planned event invalid ({e}): {value}"));
            }
        }
    }
    assert!(read > 1000 && refused > 100, "read {read}, refused {refused}");
}
