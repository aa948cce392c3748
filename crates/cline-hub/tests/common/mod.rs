//! The real hub frames in `tests/data/hub-frames.jsonl`, by name.
#![allow(dead_code)]

use aep_core::redact::{RedactOptions, Redactor};
use aep_core::{Capture, CapturePolicy};
use cline_hub::frame::{self, HubEvent, Incoming};
use serde_json::Value;

pub fn frames() -> Vec<Value> {
    let path = format!("{}/tests/data/hub-frames.jsonl", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path)
        .expect("tests/data/hub-frames.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The frame named `name`, as the JSON text that went over the socket.
pub fn text(name: &str) -> String {
    frames()
        .into_iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no frame named {name}"))["frame"]
        .to_string()
}

pub fn event(name: &str) -> HubEvent {
    match frame::parse(&text(name)).unwrap() {
        Incoming::Event(e) => e,
        other => panic!("{name} is not an event: {other:?}"),
    }
}

pub fn redactor() -> Redactor {
    Redactor::new(RedactOptions {
        home: Some("/home/dev".into()),
        ..RedactOptions::default()
    })
    .unwrap()
}

pub fn policy(level: Capture) -> CapturePolicy {
    CapturePolicy::new(level)
}
