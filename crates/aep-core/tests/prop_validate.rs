//! Arbitrary JSON never panics the validator, and the stream validator never accepts what the
//! single-Event validator rejects.

use aep_core::validate::{validate_event, StreamValidator};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any JSON value, nested a few levels.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(vec!["", "0.1", "s1", "form", "select", "2026-07-03T10:00:00Z"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const TYPES: &[&str] = &[
    "session.started",
    "session.ended",
    "run.started",
    "run.finished",
    "run.failed",
    "run.cancelled",
    "tool.completed",
    "attention.requested",
    "attention.answered",
    "attention.resolved",
    "attention.timeout",
    "attention.routed",
    "control.accepted",
    "control.rejected",
    "control.attention.respond",
    "control.cancel",
    "agent.presence",
    "state.delta",
    "x.acme.tool.done",
    "banana.peeled",
    "tool",
];

/// An attribute value that is usually right and sometimes anything at all.
fn attribute(plausible: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Value> {
    prop_oneof![12 => plausible.boxed(), 1 => json().boxed()]
}

/// A payload: empty, shaped like a form request or a form answer (with arbitrary choices and
/// values), or anything at all.
fn data() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(serde_json::json!({})),
        json().prop_map(|choices| serde_json::json!({
            "kind": "form", "prompt": "p",
            "fields": [{"id": "a", "type": "select", "label": "A", "choices": choices}]
        })),
        json().prop_map(|value| serde_json::json!({"answer": {"values": {"a": value}}})),
        json(),
    ]
}

/// Objects shaped like Events: core attributes mostly well formed, small id/seq/session spaces
/// so the stream rules meet, random extension attributes.
fn envelope_like() -> impl Strategy<Value = Value> {
    let id = || attribute((0..4u8).prop_map(|n| Value::from(format!("E{n}"))));
    let core = (
        attribute(Just(Value::from("0.1"))),
        id(),
        attribute(prop::sample::select(TYPES).prop_map(Value::from)),
        attribute(Just(Value::from("2026-07-03T10:00:00Z"))),
        attribute(prop::sample::select(vec!["aep://h/agent/a/session/s1", "aep://h/agent/b"]).prop_map(Value::from)),
        attribute(prop::sample::select(vec!["s1", "s2"]).prop_map(Value::from)),
        attribute((0..4u64).prop_map(Value::from)),
        attribute((0..2u64).prop_map(Value::from)),
        id(),
        attribute(data()),
    );
    let present = prop::collection::vec(prop::bool::weighted(0.8), 10);
    let extension = prop_oneof![3 => "[a-z0-9]{1,6}".prop_map(Value::from), 1 => json()];
    let extensions = prop::collection::btree_map("[a-z0-9_]{0,22}", extension, 0..2);
    (core, present, extensions).prop_map(|(core, present, extensions)| {
        let (aep, id, ty, time, source, session, seq, epoch, link, data) = core;
        let attrs = [
            ("aep", aep),
            ("id", id),
            ("type", ty),
            ("time", time),
            ("source", source),
            ("session", session),
            ("seq", seq),
            ("epoch", epoch),
            ("subject", link.clone()),
            ("data", data),
        ];
        let mut event = Map::new();
        event.insert("agent".into(), Value::from("a"));
        event.insert("cause".into(), link);
        for ((name, value), keep) in attrs.into_iter().zip(present) {
            if keep || matches!(name, "aep" | "id" | "type" | "time" | "source") {
                event.insert(name.into(), value);
            }
        }
        event.extend(extensions);
        Value::Object(event)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_json_never_panics(value in json()) {
        let _ = validate_event(&value);
        let _ = StreamValidator::new().push(&value);
    }

    #[test]
    fn event_shaped_streams_never_panic_and_never_pass_what_one_event_fails(
        events in prop::collection::vec(prop_oneof![3 => envelope_like(), 1 => json()], 1..24)
    ) {
        let mut stream = StreamValidator::new();
        for event in &events {
            let alone = validate_event(event);
            let pushed = stream.push(event);
            if let Err(violation) = alone {
                prop_assert_eq!(pushed, Err(violation));
            }
        }
    }
}
