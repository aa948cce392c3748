//! Property tests for capture gating (AEP-0002 §5.1) and down-leveling (AEP-0001 §8.2):
//! gating never leaves a field annotated above the level and never drops one at or below it;
//! down-leveling never raises `capture` and leaves nothing above the level it claims.
//!
//! The annotations are read here straight from the vendored schema files, independently of
//! the table `build.rs` generates, so a walker bug there shows up as a failure here.

use aep_core::gate::{downlevel, gate};
use aep_core::{Capture, Envelope};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::LazyLock;

/// One `x-aep-capture` annotation: the property names on the way to it (`[]` for array items;
/// a name may itself contain dots, like `gen_ai.usage.input_tokens`), the path as the registry
/// spells it (`options[].label`), and the minimum level.
struct Annotation {
    segments: Vec<String>,
    path: String,
    level: Capture,
}

/// How many annotated leaves a generated payload can cover; no schema has more.
const LEAVES: usize = 32;

/// `(type, annotations)` for every vendored payload schema.
static REGISTRY: LazyLock<Vec<(String, Vec<Annotation>)>> = LazyLock::new(|| {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/schemas/types");
    let mut registry: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let ty = path.file_name()?.to_str()?.strip_suffix(".schema.json")?.to_string();
            let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let mut annotations = Vec::new();
            collect(&schema, &[], &mut annotations);
            Some((ty, annotations))
        })
        .collect();
    registry.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        registry.len() > 40,
        "expected the vendored registry, found {} schemas",
        registry.len()
    );
    for (ty, annotations) in &registry {
        assert!(
            leaves(annotations).len() <= LEAVES,
            "{ty} has more than {LEAVES} annotated leaves"
        );
    }
    registry
});

fn collect(node: &Value, prefix: &[String], out: &mut Vec<Annotation>) {
    let level = |n: &Value| {
        n.get("x-aep-capture")
            .and_then(Value::as_str)
            .map(|s| s.parse().unwrap())
    };
    for (key, child) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let segments = [prefix, std::slice::from_ref(key)].concat();
        if let Some(level) = level(child) {
            out.push(Annotation::new(segments.clone(), level));
        }
        collect(child, &segments, out);
        if let Some(items) = child.get("items") {
            let item_segments = [&segments[..], &["[]".to_string()]].concat();
            if let Some(level) = level(items) {
                out.push(Annotation::new(item_segments.clone(), level));
            }
            collect(items, &item_segments, out);
        }
    }
}

impl Annotation {
    fn new(segments: Vec<String>, level: Capture) -> Self {
        let mut path = String::new();
        for segment in &segments {
            if !path.is_empty() && segment != "[]" {
                path.push('.');
            }
            path.push_str(segment);
        }
        Annotation { segments, path, level }
    }
}

fn min_capture(annotations: &[Annotation], path: &str) -> Capture {
    annotations
        .iter()
        .find(|a| a.path == path)
        .map_or(Capture::Metadata, |a| a.level)
}

/// Annotations no other annotation lies under: where random content goes.
fn leaves(annotations: &[Annotation]) -> Vec<&Annotation> {
    annotations
        .iter()
        .filter(|a| {
            !annotations
                .iter()
                .any(|b| b.segments.len() > a.segments.len() && b.segments.starts_with(&a.segments))
        })
        .collect()
}

/// Puts `leaf` under `segments`, creating objects, and two-item arrays for `[]`.
fn insert(value: &mut Value, segments: &[String], leaf: &Value) {
    let Some((head, rest)) = segments.split_first() else {
        *value = leaf.clone();
        return;
    };
    if head == "[]" {
        if !value.is_array() {
            *value = json!([{}, {}]);
        }
        for item in value.as_array_mut().unwrap() {
            insert(item, rest, leaf);
        }
    } else {
        if !value.is_object() {
            *value = json!({});
        }
        let child = value
            .as_object_mut()
            .unwrap()
            .entry(head.as_str())
            .or_insert(Value::Null);
        insert(child, rest, leaf);
    }
}

/// Every path present in `value`, with `name[]` for array items.
fn paths(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, child) in object {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                out.push(child_path.clone());
                paths(child, &child_path, out);
            }
        }
        Value::Array(items) => {
            let item_path = format!("{path}[]");
            for item in items {
                out.push(item_path.clone());
                paths(item, &item_path, out);
            }
        }
        _ => {}
    }
}

/// `a`, `a[]`, `a[].b` for `a[].b`: the path and every container on the way to it.
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    let containers = path.char_indices().filter_map(move |(i, c)| match c {
        '.' | '[' => Some(&path[..i]),
        ']' => Some(&path[..=i]),
        _ => None,
    });
    containers.chain([path])
}

/// The `[metadata*]` fields whose content gating replaces or drops below `redacted`.
fn is_exception(path: &str) -> bool {
    path == "prompt" || path.starts_with("answer.values") || (path.contains("[]") && path.ends_with(".label"))
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "[a-zA-Z /]{0,12}".prop_map(Value::from),
    ]
}

fn level() -> impl Strategy<Value = Capture> {
    prop::sample::select(Capture::ALL.to_vec())
}

/// A registered type and random data over its annotated leaves plus unannotated vendor extras.
fn payload() -> impl Strategy<Value = (usize, Map<String, Value>, Vec<String>)> {
    (
        0..REGISTRY.len(),
        prop::collection::vec((any::<bool>(), scalar()), LEAVES),
        prop::collection::btree_map("vendor_[a-z]{1,5}", scalar(), 0..3),
    )
        .prop_map(|(index, picks, extras)| {
            let annotations = &REGISTRY[index].1;
            let mut data = json!({});
            let mut chosen = Vec::new();
            for (leaf, (picked, value)) in leaves(annotations).into_iter().zip(picks) {
                if picked {
                    insert(&mut data, &leaf.segments, &value);
                    chosen.push(leaf.path.clone());
                }
            }
            let Value::Object(mut data) = data else {
                unreachable!("the payload root is an object")
            };
            for (key, value) in extras {
                chosen.push(key.clone());
                data.insert(key, value);
            }
            (index, data, chosen)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn gating_never_leaves_a_field_above_the_level(
        (index, data, chosen) in payload(),
        level in level(),
        subject in prop::option::of("[A-Za-z_]{1,10}"),
    ) {
        let (ty, annotations) = &REGISTRY[index];
        let mut event = Envelope::new("01J", ty, "2026-07-03T10:00:00Z", "aep://h/agent/cline/session/s", "cline").unwrap();
        event.subject = subject.clone();
        event.data = Some(data);
        gate(&mut event, level);

        prop_assert_eq!(event.capture, Some(level));
        if level == Capture::None {
            prop_assert!(event.data.is_none(), "data survived capture none");
            return Ok(());
        }
        let out = Value::Object(event.data.clone().unwrap_or_default());
        let mut present = Vec::new();
        paths(&out, "", &mut present);
        for path in &present {
            prop_assert!(min_capture(annotations, path) <= level, "{} kept {} at {}", ty, path, level);
        }
        // Nothing at or below the level is lost, apart from the [metadata*] content.
        for leaf in &chosen {
            let allowed = prefixes(leaf).all(|prefix| min_capture(annotations, prefix) <= level);
            if allowed && !(level < Capture::Redacted && is_exception(leaf)) {
                prop_assert!(present.contains(leaf), "{} dropped {} at {}", ty, leaf, level);
            }
        }
        if level < Capture::Redacted {
            if let Some(prompt) = out.get("prompt") {
                let kind = out.get("kind").and_then(Value::as_str).unwrap_or("attention");
                let expected = match &subject {
                    Some(subject) => format!("cline requests {kind}: {subject}"),
                    None => format!("cline requests {kind}"),
                };
                prop_assert_eq!(prompt, &Value::from(expected));
            }
            if let Some(values) = out.pointer("/answer/values") {
                let values = values.as_object().expect("values stays an object");
                prop_assert!(values.values().all(|v| v.is_number() || v.is_boolean()), "free text in {}", out);
            }
        }
    }

    #[test]
    fn downlevel_never_raises_capture(
        (index, data, _) in payload(),
        declared in prop::option::of(level()),
        ceiling in level(),
        vendor in any::<bool>(),
    ) {
        let ty = if vendor { "x.acme.session.custom_blob" } else { REGISTRY[index].0.as_str() };
        let mut event = json!({"aep": "0.1", "id": "01J", "type": ty, "time": "2026-07-03T10:00:00Z",
            "source": "aep://h/agent/a", "agent": "a", "session": "s1", "seq": 0, "data": data});
        if let Some(declared) = declared {
            event["capture"] = Value::from(declared.as_str());
        }
        let out = downlevel(&event, ceiling);

        let declared = declared.unwrap_or_default();
        if ceiling >= declared {
            prop_assert_eq!(&out, &event);
            return Ok(());
        }
        let honored: Capture = out["capture"].as_str().unwrap().parse().unwrap();
        prop_assert!(honored <= ceiling && honored < declared, "{} -> {} at ceiling {}", declared, honored, ceiling);
        if ceiling == Capture::Redacted && declared == Capture::Full {
            prop_assert_eq!(honored, Capture::Metadata);
        }
        match out.get("data") {
            None => {}
            Some(_) if vendor || honored == Capture::None => prop_assert!(false, "data kept: {}", out),
            Some(data) => {
                let annotations = &REGISTRY[index].1;
                let mut present = Vec::new();
                paths(data, "", &mut present);
                for path in &present {
                    prop_assert!(min_capture(annotations, path) <= honored, "{} kept {} at {}", ty, path, honored);
                }
            }
        }
    }
}
