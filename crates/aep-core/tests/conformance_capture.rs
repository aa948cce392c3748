//! The capture corpora of the vendored AEP conformance fixtures: down-leveling at a hop
//! (`downlevel`, AEP-0001 §8.2), type-dependent gating of form answers (`capture-gating`,
//! AEP-0006) and the attr-match filter (`attr-match`, AEP-0003 §6). Every case runs; the
//! counts are asserted so a shrunken corpus cannot pass silently, and failures name their cases.

use aep_core::filter::{Filter, INVALID_FILTER};
use aep_core::gate::{downlevel, gate, gate_form_values};
use aep_core::validate::validate_event;
use aep_core::{Capture, Envelope};
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

/// Counts this thread's allocations, so the filter's hot path can be held allocation-free.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn corpus(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn cases<'a>(corpus: &'a Value, key: &str) -> &'a Vec<Value> {
    corpus[key]
        .as_array()
        .unwrap_or_else(|| panic!("corpus has no `{key}` array"))
}

fn capture(value: &Value) -> Capture {
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{value} is not a capture level"))
}

fn report(corpus: &str, ran: usize, expected: usize, failures: &[String]) {
    assert_eq!(ran, expected, "{corpus}: expected {expected} cases, found {ran}");
    assert!(
        failures.is_empty(),
        "{corpus}: {} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn downlevel_corpus() {
    let corpus = corpus("downlevel/cases.json");
    let cases = cases(&corpus, "cases");
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("<unnamed>");
        let event = &case["event"];
        let out = downlevel(event, capture(&case["ceiling"]));

        let mut problems = Vec::new();
        if out.get("capture") != Some(&case["expect_capture"]) {
            problems.push(format!(
                "capture {:?}, expected {}",
                out.get("capture"),
                case["expect_capture"]
            ));
        }
        let expect_data = match &case["expect_data"] {
            Value::Null => None,
            data => Some(data),
        };
        if out.get("data") != expect_data {
            problems.push(format!("data {:?}, expected {expect_data:?}", out.get("data")));
        }
        // Down-leveling rewrites `capture` and `data` only; the rest of the envelope rides along.
        for (attribute, value) in event.as_object().unwrap() {
            if attribute != "capture" && attribute != "data" && out.get(attribute) != Some(value) {
                problems.push(format!("envelope attribute `{attribute}` changed"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("  {name}: {}", problems.join("; ")));
        }
    }
    report("downlevel", cases.len(), 18, &failures);
}

/// The golden Events honor their declared capture, so gating one at that level must change
/// nothing (no over-dropping on real payloads); and every hop rewrite of it must still be a
/// valid Event, at every ceiling.
#[test]
fn golden_events_survive_gating_and_down_leveling() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/fixtures/golden/golden.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut failures = Vec::new();
    let mut ran = 0;
    for line in text.lines() {
        ran += 1;
        let original: Value = serde_json::from_str(line).expect("golden lines are JSON");
        let id = original["id"].as_str().unwrap_or("<no id>").to_string();
        let mut event: Envelope = serde_json::from_str(line).expect("golden lines are Envelopes");
        let declared = event.capture_or_default();
        gate(&mut event, declared);
        if event.data.as_ref() != original.get("data").and_then(Value::as_object) {
            failures.push(format!("  {id}: gating at its own level {declared} changed data"));
        }
        for ceiling in Capture::ALL {
            let out = downlevel(&original, ceiling);
            if let Err(violation) = validate_event(&out) {
                failures.push(format!("  {id} at ceiling {ceiling}: {violation}"));
            }
        }
    }
    report("golden gating", ran, 64, &failures);
}

#[test]
fn capture_gating_corpus() {
    let corpus = corpus("capture-gating/cases.json");
    let cases = cases(&corpus, "cases");
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("<unnamed>");
        let fields = case["fields"].as_array().expect("fields array");
        let values = case["values"].as_object().expect("values object");
        let out = Value::Object(gate_form_values(fields, values, capture(&case["ceiling"])));
        if out != case["expect"] {
            failures.push(format!("  {name}: got {out}, expected {}", case["expect"]));
        }
    }
    report("capture-gating", cases.len(), 6, &failures);
}

#[test]
fn attr_match_corpus() {
    let corpus = corpus("attr-match/cases.json");

    let matching = cases(&corpus, "match");
    let mut failures = Vec::new();
    for case in matching {
        let name = case["name"].as_str().unwrap_or("<unnamed>");
        match Filter::parse(&case["filter"]) {
            Err(e) => failures.push(format!("  {name}: valid filter refused: {e}")),
            Ok(filter) => {
                let expected = case["match"].as_bool().expect("match verdict");
                if filter.matches(&case["event"]) != expected {
                    failures.push(format!("  {name}: expected match={expected}"));
                }
            }
        }
    }
    report("attr-match (match)", matching.len(), 14, &failures);

    let invalid = cases(&corpus, "invalid");
    let mut failures = Vec::new();
    for case in invalid {
        let name = case["name"].as_str().unwrap_or("<unnamed>");
        match Filter::parse(&case["filter"]) {
            Ok(_) => failures.push(format!("  {name}: {} accepted, must be refused", case["filter"])),
            Err(e) if e.code() != INVALID_FILTER => failures.push(format!("  {name}: code {}", e.code())),
            Err(_) => {}
        }
    }
    report("attr-match (invalid)", invalid.len(), 10, &failures);
}

/// The endpoint calls `matches` per Event per subscriber: it must not allocate.
#[test]
fn attr_match_never_allocates_while_matching() {
    let corpus = corpus("attr-match/cases.json");
    for case in cases(&corpus, "match") {
        let filter = Filter::parse(&case["filter"]).expect("valid filter");
        let before = ALLOCATIONS.with(Cell::get);
        let verdict = filter.matches(&case["event"]);
        let allocations = ALLOCATIONS.with(Cell::get) - before;
        assert_eq!(
            allocations, 0,
            "{}: matching allocated {allocations} times",
            case["name"]
        );
        std::hint::black_box(verdict);
    }
}
