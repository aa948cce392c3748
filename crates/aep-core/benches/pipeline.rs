//! The producer's path for one typical Event: build a `tool.completed` (fresh id, result
//! digest over the original content), gate it at the default `metadata` ceiling, validate it,
//! and serialize it to a JSONL line. Events per second = 1 / the reported time per iteration.

use aep_core::digest::digest;
use aep_core::gate::gate;
use aep_core::id::new_id;
use aep_core::source::session_source;
use aep_core::validate::validate_event;
use aep_core::{Capture, Envelope};
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use std::hint::black_box;

/// What a Cline `execute_command` tool result looks like before gating.
fn result() -> Value {
    json!({
        "exitCode": 0,
        "output": "> aep-cline@0.1.0 test\n> cargo test --workspace\n\nrunning 42 tests\n\
                   test result: ok. 42 passed; 0 failed; 0 ignored; finished in 0.81s\n",
    })
}

fn tool_completed(result: &Value, source: &str) -> Envelope {
    let mut event = Envelope::new(new_id(), "tool.completed", "2026-07-03T10:00:00.000Z", source, "cline")
        .expect("tool.completed is a registered type");
    event.subject = Some("execute_command".into());
    event.session = Some("1751536800000".into());
    event.run = Some(new_id());
    event.step = Some("3".into());
    event.seq = Some(17);
    event.epoch = Some(0);
    event.cause = Some(new_id());
    let data = json!({
        "tool": {"name": "execute_command", "call_id": "toolu_01A09q90qw90lq917835lq9"},
        "duration_ms": 812,
        "status": "success",
        "result_digest": digest(result),
        "result_redacted": result.clone(),
        "result": result.clone(),
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 85,
    });
    event.data = data.as_object().cloned();
    event
}

fn pipeline(c: &mut Criterion) {
    let result = result();
    let source = session_source("devbox", "cline", "1751536800000");
    c.bench_function("tool.completed build+gate+validate+serialize", |b| {
        b.iter(|| {
            let mut event = tool_completed(black_box(&result), &source);
            gate(&mut event, Capture::Metadata);
            validate_event(&event.to_value()).expect("the benchmark event is valid");
            black_box(event.to_line().expect("the benchmark event serializes"))
        })
    });
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
