//! The OTLP exporter's spans (`…/v1/traces`) through the real binary: a real Cline run becomes
//! one trace, `invoke_agent` with an `execute_tool` child per tool call, decoded with
//! opentelemetry-proto's Rust types and the official Python bindings; spans of a run that ended
//! while the collector was away arrive after a restart; a collector without a traces route never
//! holds the logs back.

use crate::otlp::{attributes, free_port, health, hook, one_run, real_run, Answer, Collector};
use crate::support;

use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{json, Value};
use std::time::Duration;
use support::cline::ClineSandbox;
use support::daemon::Sandbox;
use support::fake_model::{FakeModel, Script};
use support::wait::wait_until_seen;

const SESSION: &str = "1796007203184_6l7jh";
const WAIT: Duration = Duration::from_secs(30);

/// A span as JSON, named as the Python decoder names its fields.
fn plain(resource: &Value, s: &Span) -> Value {
    let status = s.status.clone().unwrap_or_default();
    json!({
        "resource": resource,
        "scope": "aep-cline",
        "trace_id": hex::encode(&s.trace_id),
        "span_id": hex::encode(&s.span_id),
        "parent_span_id": hex::encode(&s.parent_span_id),
        "name": s.name,
        "kind": s.kind,
        "start": s.start_time_unix_nano,
        "end": s.end_time_unix_nano,
        "status": {"code": status.code, "message": status.message},
        "attributes": attributes(&s.attributes),
        "events": s.events.iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
    })
}

fn spans(collector: &Collector) -> Vec<Value> {
    collector.spans().iter().map(|(r, s)| plain(r, s)).collect()
}

fn wait_spans(collector: &Collector, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    wait_until_seen(&format!("the collector to get {what}"), WAIT, || {
        let got = spans(collector);
        if done(&got) {
            Ok(got)
        } else {
            Err(format!("it has {got:#?}"))
        }
    })
}

fn named<'a>(spans: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with(prefix))
        .collect()
}

fn of<'a>(log: &'a [Value], ty: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["type"] == ty).collect()
}

fn python() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let install = std::process::Command::new("bash")
        .arg(format!("{root}/.ci/install-otlp-proto.sh"))
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "installing PyPI opentelemetry-proto: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    String::from_utf8(install.stdout).unwrap().trim().to_string()
}

#[test]
fn a_real_cline_run_is_one_trace_of_invoke_agent_and_its_tools_as_the_genai_conventions_name_them() {
    let collector = Collector::start(0);
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_FLUSH", "100ms")
        .with_env("AEP_OTLP_METRICS_INTERVAL", "1s")
        .with_env("AEP_HOST", "fleet-host-7");
    let (daemon, session) = real_run(&aep, &cline);
    let log = aep.wait_log(&session, "a whole run", WAIT, |e| {
        e.last().is_some_and(|e| e["type"] == "session.ended")
    });
    let (runs, tools) = (of(&log, "run.started"), of(&log, "tool.requested"));
    assert!(!runs.is_empty() && !tools.is_empty(), "{log:#?}");
    let got = wait_spans(&collector, "a span per run and per tool call", |s| {
        named(s, "invoke_agent").len() >= runs.len() && named(s, "execute_tool").len() >= tools.len()
    });
    let (agents, executed) = (named(&got, "invoke_agent "), named(&got, "execute_tool "));
    assert_eq!(
        (agents.len(), executed.len()),
        (runs.len(), tools.len()),
        "each once: {got:#?}"
    );
    for (span, started) in agents.iter().zip(&runs) {
        assert_eq!(span["name"], "invoke_agent cline");
        assert_eq!(span["parent_span_id"], "", "the run is the trace's root");
        assert_eq!(
            span["resource"],
            json!({"service.name": "cline", "host.name": "fleet-host-7"})
        );
        let a = &span["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(a["gen_ai.agent.name"], "cline");
        assert_eq!(a["gen_ai.conversation.id"], session.as_str());
        assert_eq!(a["aep.run_id"], started["run"]);
        assert_eq!(a["gen_ai.request.model"], "fake-model", "the model: {a}");
        assert_eq!(a["gen_ai.provider.name"], "openai-compatible", "the provider: {a}");
        assert!(a.get("aep.span.start_unknown").is_none(), "{a}");
        assert!(span["start"].as_u64().unwrap() <= span["end"].as_u64().unwrap());
        let end = log
            .iter()
            .find(|e| {
                e["run"] == started["run"]
                    && e["type"].as_str().unwrap().starts_with("run.")
                    && e["type"] != "run.started"
            })
            .expect("the run's terminal");
        for (key, value) in end["data"].as_object().unwrap() {
            if key.starts_with("gen_ai.usage.") {
                assert_eq!(&a[key], value, "{key} from the run's end");
            }
        }
        if end["type"] == "run.finished" {
            assert_eq!(span["status"]["code"], 0, "a finished run is not an error: {span}");
        }
    }
    let run_span = |run: &Value| {
        agents
            .iter()
            .zip(&runs)
            .find(|(_, r)| r["run"] == *run)
            .map(|(s, _)| *s)
            .expect("its run's span")
    };
    for (span, requested) in executed.iter().zip(&tools) {
        let parent = run_span(&requested["run"]);
        assert_eq!(span["trace_id"], parent["trace_id"], "one trace per run");
        assert_eq!(span["parent_span_id"], parent["span_id"], "a child of invoke_agent");
        let a = &span["attributes"];
        let name = requested["data"]["tool"]["name"].as_str().unwrap();
        assert_eq!(span["name"], format!("execute_tool {name}"));
        assert_eq!(a["gen_ai.tool.name"], name);
        assert_eq!(a["gen_ai.tool.type"], "function");
        assert!(a["gen_ai.tool.call.id"].is_string());
        assert!(
            a.get("gen_ai.tool.call.arguments").is_none() && a.get("gen_ai.tool.call.result").is_none(),
            "content stays out at the default ceiling: {a}"
        );
        assert!(span["start"].as_u64().unwrap() >= parent["start"].as_u64().unwrap());
        assert!(span["end"].as_u64().unwrap() <= parent["end"].as_u64().unwrap());
    }
    let ids: std::collections::HashSet<_> = got.iter().map(|s| s["trace_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), runs.len(), "one trace per run");

    // The official Python bindings read the same spans.
    let python = python();
    let mut from_python = Vec::new();
    for attempt in collector.trace_attempts().into_iter().filter(|a| a.status == 200) {
        let mut child = std::process::Command::new(&python)
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otlp_decode.py"))
            .arg("traces")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), &attempt.raw).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        from_python.extend(serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap());
    }
    assert_eq!(from_python, got, "the official Python bindings read the same spans");

    let h = health(&daemon.addr());
    let traces = &h["otlp"]["traces"];
    assert_eq!(traces["endpoint"], format!("{}/v1/traces", collector.url()));
    assert_eq!(traces["connected"], true, "{traces}");
    assert!(aep.log_dir.join("cline/.otlp-traces.json").exists(), "its own marks");

    // The metrics (/v1/metrics): the run's tokens by class, its tool calls by outcome.
    let terminals: Vec<&Value> = log
        .iter()
        .filter(|e| ["run.finished", "run.failed", "run.cancelled"].contains(&e["type"].as_str().unwrap()))
        .collect();
    let output: u64 = terminals
        .iter()
        .filter_map(|e| e["data"]["gen_ai.usage.output_tokens"].as_u64())
        .sum();
    assert!(output > 0, "the fake model reports tokens: {terminals:#?}");
    let completed = of(&log, "tool.completed").len() as i64;
    let (tokens, calls) = wait_until_seen("the metrics to count the run", WAIT, || {
        let last = collector.metrics().last().cloned();
        let found = last.map(|request| {
            let metrics = &request.resource_metrics[0].scope_metrics[0].metrics;
            let sum = |name: &str, key: &str, value: &str| -> i64 {
                let Some(metric) = metrics.iter().find(|m| m.name == name) else {
                    return 0;
                };
                let Some(Data::Sum(s)) = &metric.data else {
                    panic!("{name} is a sum")
                };
                s.data_points
                    .iter()
                    .filter(|p| attributes(&p.attributes)[key] == value)
                    .map(|p| match p.value {
                        Some(number_data_point::Value::AsInt(i)) => i,
                        other => panic!("{other:?}"),
                    })
                    .sum()
            };
            assert!(metrics.iter().any(|m| m.name == "gen_ai.client.token.usage"));
            (
                sum("aep.token.usage", "gen_ai.token.type", "output"),
                sum("aep.tool.calls", "outcome", "completed"),
            )
        });
        found
            .filter(|(t, c)| *t == output as i64 && *c == completed)
            .ok_or_else(|| format!("they count (output tokens, completed tools) {found:?}"))
    });
    assert_eq!((tokens, calls), (output as i64, completed));
    let h = health(&daemon.addr());
    assert!(h["otlp"]["metrics"]["exports"].as_u64() >= Some(1), "{h}");
    let doctor = aep.run(&["doctor"], &[]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("otlp traces") && said.contains("otlp metrics"), "{said}");
    drop(daemon);
}

#[test]
fn spans_of_a_run_that_ended_in_an_outage_arrive_after_a_restart_parented_alike() {
    let port = free_port();
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &format!("http://127.0.0.1:{port}"))
        .with_env("AEP_OTLP_FLUSH", "50ms")
        .with_env("AEP_OTLP_BATCH", "3");
    // The collector is down: the run starts and calls two tools, the daemon stops mid-run.
    let daemon = sb.start();
    hook(&sb, "agent_start", 0);
    hook(&sb, "tool_call", 1);
    hook(&sb, "tool_result", 1);
    hook(&sb, "tool_call", 2);
    let (status, _) = daemon.stop();
    assert!(status.success());
    // Restarted: the second tool's result and the run's end, still with no collector.
    let daemon = sb.start();
    hook(&sb, "tool_result", 2);
    hook(&sb, "agent_end", 3);
    std::thread::sleep(Duration::from_secs(1));
    let collector = Collector::start(port);
    let got = wait_spans(&collector, "the run and its two tools", |s| s.len() >= 3);
    std::thread::sleep(Duration::from_millis(500));
    let got_now = spans(&collector);
    assert_eq!(got_now.len(), 3, "each span once: {got_now:#?}");
    let run = named(&got, "invoke_agent")[0];
    let tools = named(&got, "execute_tool");
    assert_eq!(tools.len(), 2);
    let log = sb.log(SESSION);
    let at = |e: &Value| {
        let t: jiff::Timestamp = e["time"].as_str().unwrap().parse().expect("an RFC 3339 time");
        t.as_nanosecond() as u64
    };
    // A span whose start this daemon did not see (the start went out in a batch taken before
    // the restart) begins at its end minus the duration its end carries, says so, and keeps
    // its ids: a child of the same run.
    let completed = of(&log, "tool.completed");
    for (tool, done) in tools.iter().zip(&completed) {
        assert_eq!(tool["trace_id"], run["trace_id"]);
        assert_eq!(tool["parent_span_id"], run["span_id"]);
        assert_eq!(tool["end"], at(done));
        let duration = done["data"]["duration_ms"].as_u64().unwrap();
        match tool["attributes"].get("aep.span.start_unknown") {
            Some(flag) => {
                assert_eq!(*flag, true);
                assert_eq!(tool["start"], at(done) - duration * 1_000_000, "{tool}");
            }
            None => {
                let requested = log.iter().find(|e| e["id"] == done["cause"]).unwrap();
                assert_eq!(tool["start"], at(requested), "{tool}");
            }
        }
    }
    let finished = of(&log, "run.finished")[0];
    assert_eq!(run["end"], at(finished));
    assert_eq!(run["attributes"]["aep.run_id"], finished["run"]);
    let h = health(&daemon.addr());
    assert_eq!(h["otlp"]["traces"]["open"], json!({"runs": 0, "tools": 0}), "{h}");
    drop(daemon);
}

#[test]
fn a_collector_without_a_traces_route_never_holds_the_logs_back_and_the_gate_turns_spans_off() {
    let collector = Collector::start(0);
    for _ in 0..50 {
        collector.answer_traces(Answer {
            status: 404,
            retry_after: None,
            body: b"404 page not found".to_vec(),
        });
    }
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_FLUSH", "50ms");
    let daemon = sb.start();
    one_run(&sb);
    let log = sb.log(SESSION);
    collector.wait_records(log.len());
    let traces = wait_until_seen("a refused trace batch and nothing pending", WAIT, || {
        let h = health(&daemon.addr());
        if h["otlp"]["traces"]["dropped"]["refused_batches"].as_u64() >= Some(1) && h["otlp"]["pending"] == 0 {
            Ok(h["otlp"]["traces"].clone())
        } else {
            Err(format!("/healthz: {h}"))
        }
    });
    let error = traces["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("HTTP 404") && error.contains("AEP_OTLP_TRACES=0"),
        "the refusal says what to do: {traces}"
    );
    let doctor = sb.run(&["doctor"], &[]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("/v1/traces"), "doctor names the traces route: {said}");
    drop(daemon);

    // AEP_OTLP_TRACES=0: the logs alone.
    let collector = Collector::start(0);
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_TRACES", "0")
        .with_env("AEP_OTLP_FLUSH", "50ms");
    let daemon = sb.start();
    one_run(&sb);
    collector.wait_records(sb.log(SESSION).len());
    std::thread::sleep(Duration::from_millis(300));
    assert!(collector.trace_attempts().is_empty(), "no span was sent");
    assert!(health(&daemon.addr())["otlp"]["traces"].is_null());
    drop(daemon);
}
