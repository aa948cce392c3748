//! What `/metrics` costs a hook: the lane's [`Recorder`] fed as it is for one hook (its name and
//! outcome, then each Event appended: class, policy audit, request bookkeeping), against a
//! hook's time through the daemon (docs/benchmarks.md, "Event pipeline"); and what one scrape of
//! the recorder's families costs, with every hook and class series present.
//!
//! Run: `cargo bench -p aep-cline --bench metrics [HOOKS]`.

use aep_cline::metrics::{HookOutcome, Recorder};
use prometheus_client::registry::Registry;
use serde_json::json;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let hooks: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    // A tool call's hook as the lane appends it: its request, an approval asked and answered.
    let events = [
        json!({"type": "tool.requested", "id": "E1", "time": "2026-12-03T10:00:00Z",
            "data": {"tool": {"name": "read_file", "call_id": "c1"}}}),
        json!({"type": "attention.requested", "id": "E2", "time": "2026-12-03T10:00:00Z",
            "data": {"kind": "permission"}}),
        json!({"type": "attention.resolved", "id": "E3", "subject": "E2", "time": "2026-12-03T10:00:03Z",
            "data": {"outcome": "approved"}}),
    ];
    let recorder = Recorder::default();
    let names = ["tool_call", "tool_result", "agent_start", "prompt_submit"];
    let start = Instant::now();
    for n in 0..hooks {
        recorder.hook(Some(names[n % names.len()]), HookOutcome::Taken);
        recorder.appended(&events);
    }
    let per_hook = start.elapsed() / hooks as u32;
    println!(
        "{hooks} hooks of {} Events each: {per_hook:?} per hook recorded",
        events.len()
    );

    let mut registry = Registry::default();
    recorder.register(&mut registry);
    let scrapes = 10_000;
    let mut bytes = 0;
    let start = Instant::now();
    for _ in 0..scrapes {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        bytes = out.len();
    }
    println!(
        "{scrapes} encodings of the recorder's families ({bytes} bytes): {:?} each",
        start.elapsed() / scrapes
    );
}
