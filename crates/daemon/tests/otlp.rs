//! The OTLP logs exporter (AEP-0005 §3) through the real binary, against a collector written
//! here on 127.0.0.1 that decodes what it receives with opentelemetry-proto's types (generated
//! from the official OTLP .proto files) and answers as an OTLP/HTTP collector does.

use crate::support;

pub(crate) use crate::support::free_port;
use flate2::read::GzDecoder;
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cline::ClineSandbox;
use support::daemon::{http, real_payload, Sandbox};
use support::fake_model::{FakeModel, Script};
use support::wait::wait_until_seen;

const SESSION: &str = "1796007203184_6l7jh";
const WAIT: Duration = Duration::from_secs(30);

/// What the collector answers to one request.
#[derive(Clone)]
pub(crate) struct Answer {
    pub status: u16,
    pub retry_after: Option<&'static str>,
    pub body: Vec<u8>,
}

/// One request the collector took (any answer).
#[derive(Clone)]
struct Attempt {
    at: Instant,
    status: u16,
    headers: HashMap<String, String>,
    /// The protobuf body, un-gzipped.
    raw: Vec<u8>,
    request: ExportLogsServiceRequest,
}

/// One request on the traces route.
#[derive(Clone)]
pub(crate) struct TraceAttempt {
    pub status: u16,
    /// The protobuf body, un-gzipped.
    pub raw: Vec<u8>,
    pub request: ExportTraceServiceRequest,
}

/// An OTLP/HTTP collector on 127.0.0.1: POST /v1/logs, /v1/traces and /v1/metrics, gzip or
/// not, protobuf. The logs' answers come from `answers`, the traces' from `trace_answers`
/// (both 200 when empty); the metrics route always answers 200.
pub(crate) struct Collector {
    port: u16,
    attempts: Arc<Mutex<Vec<Attempt>>>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    traces: Arc<Mutex<Vec<TraceAttempt>>>,
    trace_answers: Arc<Mutex<VecDeque<Answer>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Collector {
    pub(crate) fn start(port: u16) -> Collector {
        let server = tiny_http::Server::http(format!("127.0.0.1:{port}")).expect("collector port");
        let port = server.server_addr().to_ip().unwrap().port();
        let (attempts, answers, stop) = (
            Arc::default(),
            Arc::<Mutex<VecDeque<Answer>>>::default(),
            Arc::<AtomicBool>::default(),
        );
        let (traces, trace_answers, metrics) = (
            Arc::<Mutex<Vec<TraceAttempt>>>::default(),
            Arc::<Mutex<VecDeque<Answer>>>::default(),
            Arc::<Mutex<Vec<ExportMetricsServiceRequest>>>::default(),
        );
        let thread = {
            let (attempts, answers, stop): (Arc<Mutex<Vec<Attempt>>>, _, _) =
                (Arc::clone(&attempts), answers.clone(), stop.clone());
            let (traces, trace_answers, metrics) = (traces.clone(), trace_answers.clone(), metrics.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(Some(mut request)) = server.recv_timeout(Duration::from_millis(20)) else {
                        continue;
                    };
                    let headers: HashMap<String, String> = request
                        .headers()
                        .iter()
                        .map(|h| {
                            (
                                h.field.as_str().as_str().to_ascii_lowercase(),
                                h.value.as_str().to_string(),
                            )
                        })
                        .collect();
                    let mut raw = Vec::new();
                    request.as_reader().read_to_end(&mut raw).unwrap();
                    if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
                        let mut plain = Vec::new();
                        GzDecoder::new(&raw[..]).read_to_end(&mut plain).expect("a gzip body");
                        raw = plain;
                    }
                    let ok = || Answer {
                        status: 200,
                        retry_after: None,
                        body: Vec::new(),
                    };
                    match request.url() {
                        "/v1/logs" => {}
                        "/v1/traces" => {
                            let decoded =
                                ExportTraceServiceRequest::decode(&raw[..]).expect("an OTLP ExportTraceServiceRequest");
                            let answer = trace_answers.lock().unwrap().pop_front().unwrap_or_else(ok);
                            traces.lock().unwrap().push(TraceAttempt {
                                status: answer.status,
                                raw,
                                request: decoded,
                            });
                            let _ = request
                                .respond(tiny_http::Response::from_data(answer.body).with_status_code(answer.status));
                            continue;
                        }
                        "/v1/metrics" => {
                            let decoded = ExportMetricsServiceRequest::decode(&raw[..])
                                .expect("an OTLP ExportMetricsServiceRequest");
                            metrics.lock().unwrap().push(decoded);
                            let _ = request.respond(tiny_http::Response::from_data(Vec::new()));
                            continue;
                        }
                        other => panic!("the exporter posted to {other}"),
                    }
                    let decoded = ExportLogsServiceRequest::decode(&raw[..]).expect("an OTLP ExportLogsServiceRequest");
                    let answer = answers.lock().unwrap().pop_front().unwrap_or(Answer {
                        status: 200,
                        retry_after: None,
                        body: ExportLogsServiceResponse::default().encode_to_vec(),
                    });
                    attempts.lock().unwrap().push(Attempt {
                        at: Instant::now(),
                        status: answer.status,
                        headers,
                        raw,
                        request: decoded,
                    });
                    let body = answer.body;
                    let mut response = tiny_http::Response::from_data(body)
                        .with_status_code(answer.status)
                        .with_header(tiny_http::Header::from_bytes("content-type", "application/x-protobuf").unwrap());
                    if let Some(after) = answer.retry_after {
                        response = response.with_header(tiny_http::Header::from_bytes("retry-after", after).unwrap());
                    }
                    let _ = request.respond(response);
                }
            })
        };
        Collector {
            port,
            attempts,
            answers,
            traces,
            trace_answers,
            metrics,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the traces route will answer next (then 200).
    pub(crate) fn answer_traces(&self, answer: Answer) {
        self.trace_answers.lock().unwrap().push_back(answer);
    }

    pub(crate) fn trace_attempts(&self) -> Vec<TraceAttempt> {
        self.traces.lock().unwrap().clone()
    }

    /// Every span the traces route accepted (200), with its resource's attributes.
    pub(crate) fn spans(&self) -> Vec<(Value, Span)> {
        let mut out = Vec::new();
        for attempt in self.trace_attempts().into_iter().filter(|a| a.status == 200) {
            for resource_spans in attempt.request.resource_spans {
                let resource = attributes(&resource_spans.resource.unwrap().attributes);
                for scope in resource_spans.scope_spans {
                    assert_eq!(scope.scope.as_ref().unwrap().name, "aep-cline");
                    out.extend(scope.spans.into_iter().map(|s| (resource.clone(), s)));
                }
            }
        }
        out
    }

    /// Waits for `n` accepted log records.
    pub(crate) fn wait_records(&self, n: usize) {
        self.wait(&format!("{n} records"), |c| c.records().len() >= n);
    }

    pub(crate) fn metrics(&self) -> Vec<ExportMetricsServiceRequest> {
        self.metrics.lock().unwrap().clone()
    }

    fn answer(&self, answer: Answer) {
        self.answers.lock().unwrap().push_back(answer);
    }

    fn attempts(&self) -> Vec<Attempt> {
        self.attempts.lock().unwrap().clone()
    }

    /// Every record the collector accepted (200), with its resource's attributes.
    fn records(&self) -> Vec<(Value, LogRecord)> {
        let mut out = Vec::new();
        for attempt in self.attempts().into_iter().filter(|a| a.status == 200) {
            for resource_logs in attempt.request.resource_logs {
                let resource = attributes(&resource_logs.resource.unwrap().attributes);
                for scope in resource_logs.scope_logs {
                    assert_eq!(scope.scope.as_ref().unwrap().name, "aep-cline");
                    out.extend(scope.log_records.into_iter().map(|r| (resource.clone(), r)));
                }
            }
        }
        out
    }

    /// The `aep.event_id`s accepted, in arrival order.
    fn ids(&self) -> Vec<String> {
        self.records()
            .iter()
            .map(|(_, r)| {
                plain_record(r)["attributes"]["aep.event_id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    fn wait(&self, what: &str, done: impl Fn(&Collector) -> bool) {
        wait_until_seen(&format!("the collector to get {what}"), WAIT, || {
            if done(self) {
                Ok(())
            } else {
                Err(format!("it has {:?}", self.ids()))
            }
        });
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn plain(v: &AnyValue) -> Value {
    use any_value::Value as V;
    match &v.value {
        None => Value::Null,
        Some(V::BoolValue(b)) => json!(b),
        Some(V::IntValue(i)) => json!(i),
        Some(V::DoubleValue(d)) => json!(d),
        Some(V::StringValue(s)) => json!(s),
        Some(V::ArrayValue(a)) => Value::Array(a.values.iter().map(plain).collect()),
        Some(V::KvlistValue(kv)) => attributes(&kv.values),
        Some(other) => panic!("the exporter sent {other:?}"),
    }
}

pub(crate) fn attributes(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> Value {
    let mut out = Map::new();
    for kv in kvs {
        assert!(
            out.insert(kv.key.clone(), plain(kv.value.as_ref().unwrap())).is_none(),
            "{} twice",
            kv.key
        );
    }
    Value::Object(out)
}

/// A received record as JSON, fields named as in AEP-0005 §3.2.
fn plain_record(r: &LogRecord) -> Value {
    let mut out = json!({
        "time_unix_nano": r.time_unix_nano,
        "event_name": r.event_name,
        "severity_text": r.severity_text,
        "severity_number": r.severity_number,
        "attributes": attributes(&r.attributes),
    });
    if !r.trace_id.is_empty() {
        out["trace_id"] = json!(hex::encode(&r.trace_id));
        out["span_id"] = json!(hex::encode(&r.span_id));
        out["flags"] = json!(r.flags);
    }
    if let Some(body) = &r.body {
        out["body"] = plain(body);
    }
    out
}

/// What AEP-0005 §3.2–§3.4 say the record of `event` is, written from the table here, apart
/// from the exporter's code (the Event is at or below the exporter's ceiling).
fn expected_record(event: &Value) -> Value {
    let severity = event["severity"].as_str().unwrap_or("info");
    let (text, number) = match severity {
        "debug" => ("DEBUG", 5),
        "info" => ("INFO", 9),
        "notice" => ("INFO2", 10),
        "warning" => ("WARN", 13),
        "error" => ("ERROR", 17),
        "critical" => ("FATAL", 21),
        other => panic!("severity {other}"),
    };
    let time = event["time"].as_str().unwrap();
    let nanos = std::process::Command::new("date")
        .args(["-u", "-d", time, "+%s%N"])
        .output()
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().parse::<u64>().unwrap())
        .unwrap();
    let mut attributes = Map::new();
    for (member, attr) in [
        ("agent", "aep.agent_id"),
        ("id", "aep.event_id"),
        ("source", "aep.source"),
        ("session", "aep.session_id"),
        ("run", "aep.run_id"),
        ("step", "aep.step"),
        ("seq", "aep.sequence"),
        ("epoch", "aep.epoch"),
        ("cause", "aep.causation_id"),
        ("subject", "aep.subject"),
    ] {
        if let Some(v) = event.get(member) {
            attributes.insert(attr.into(), v.clone());
        }
    }
    attributes.insert(
        "aep.capture".into(),
        event.get("capture").cloned().unwrap_or(json!("metadata")),
    );
    let mut body = Map::new();
    for (k, v) in event.get("data").and_then(Value::as_object).into_iter().flatten() {
        if k.starts_with("gen_ai.") {
            attributes.insert(k.clone(), v.clone());
        } else {
            body.insert(k.clone(), v.clone());
        }
    }
    let mut out = json!({
        "time_unix_nano": nanos,
        "event_name": format!("dev.aep.{}", event["type"].as_str().unwrap()),
        "severity_text": text,
        "severity_number": number,
        "attributes": attributes,
    });
    if !body.is_empty() {
        out["body"] = Value::Object(body);
    }
    out
}

/// The real Cline CLI's run of one command with aep-cline's hooks installed and `aep`'s daemon
/// running (returned, with the run's session once its log exists).
pub(crate) fn real_run(aep: &Sandbox, cline: &ClineSandbox) -> (support::daemon::Daemon, String) {
    aep.install_hooks_for(cline);
    let daemon = aep.start();
    cline
        .run("Run the command and report what it printed.")
        .assert_success("cline --json");
    let session = aep
        .log_dir
        .join("cline")
        .read_dir()
        .unwrap()
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .find(|s| !s.starts_with('.'))
        .expect("a session log");
    (daemon, session)
}

/// A real hook payload, made a distinct firing by its `timestamp` (the delivery id is the
/// payload's hash).
pub(crate) fn hook(sb: &Sandbox, name: &str, n: u32) {
    let mut payload: Value = serde_json::from_slice(&real_payload("hooks-local", name)).unwrap();
    payload["timestamp"] = json!(format!(
        "2026-11-30T03:{:02}:{:02}.{:03}Z",
        n / 60 % 60,
        n % 60,
        n % 1000
    ));
    sb.hook_recorded(payload.to_string().as_bytes());
}

/// One run's real hooks, in order: its start, a tool call and its result, its end.
pub(crate) fn one_run(sb: &Sandbox) {
    for (name, n) in [
        ("agent_start", 0),
        ("tool_call", 1),
        ("tool_result", 1),
        ("agent_end", 2),
    ] {
        hook(sb, name, n);
    }
}

pub(crate) fn health(addr: &str) -> Value {
    let (status, body) = http(addr, "GET", "/healthz", &[], b"");
    assert_eq!(status, 200);
    serde_json::from_str(&body).unwrap()
}

pub(crate) fn wait_health(addr: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until_seen(&format!("/healthz to show {what}"), WAIT, || {
        let h = health(addr);
        if done(&h["otlp"]) {
            Ok(h["otlp"].clone())
        } else {
            Err(format!("its otlp is {}", h["otlp"]))
        }
    })
}

#[test]
fn every_field_of_a_real_cline_run_reaches_the_collector_as_aep_0005_says() {
    let collector = Collector::start(0);
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_HEADERS", "authorization=Bearer%20otlp-t0ken")
        .with_env("AEP_OTLP_FLUSH", "100ms")
        .with_env("AEP_HOST", "fleet-host-7");
    let (daemon, session) = real_run(&aep, &cline);
    let events = aep.wait_log(&session, "a whole run", WAIT, |e| {
        e.last().is_some_and(|e| e["type"] == "session.ended")
    });
    assert!(events.len() >= 6, "{events:#?}");
    collector.wait("every Event of the run", |c| c.records().len() >= events.len());
    let records = collector.records();
    assert_eq!(records.len(), events.len(), "each Event once");
    let by_id: HashMap<String, (Value, Value)> = records
        .iter()
        .map(|(resource, r)| {
            let plain = plain_record(r);
            (
                plain["attributes"]["aep.event_id"].as_str().unwrap().to_string(),
                (resource.clone(), plain),
            )
        })
        .collect();
    for event in &events {
        let (resource, got) = &by_id[event["id"].as_str().unwrap()];
        assert_eq!(*got, expected_record(event), "{event}");
        assert_eq!(*resource, json!({"service.name": "cline", "host.name": "fleet-host-7"}));
    }
    // Every §3.2 row that a real Cline run carries was seen at least once.
    let seen: HashSet<&str> = by_id
        .values()
        .flat_map(|(_, r)| r["attributes"].as_object().unwrap().keys().map(String::as_str))
        .collect();
    for attr in [
        "aep.agent_id",
        "aep.event_id",
        "aep.capture",
        "aep.source",
        "aep.session_id",
        "aep.run_id",
        "aep.sequence",
        "aep.epoch",
        "aep.causation_id",
        "aep.subject",
    ] {
        assert!(seen.contains(attr), "{attr} never exported: {seen:?}");
    }
    assert!(by_id.values().any(|(_, r)| r.get("body").is_some()));
    let attempt = &collector.attempts()[0];
    assert_eq!(attempt.headers["content-type"], "application/x-protobuf");
    assert_eq!(attempt.headers["content-encoding"], "gzip");
    assert_eq!(attempt.headers["authorization"], "Bearer otlp-t0ken");
    let otlp = wait_health(&daemon.addr(), "everything confirmed", |o| o["pending"] == 0);
    assert_eq!(otlp["connected"], true);
    assert_eq!(otlp["confirmed"], events.len());
    assert_eq!(otlp["endpoint"], format!("{}/v1/logs", collector.url()));
    let doctor = aep.run(&["doctor"], &[]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains(&format!("exporting to {}/v1/logs", collector.url())),
        "{said}"
    );
    let marks: Value = serde_json::from_slice(&std::fs::read(aep.log_dir.join("cline/.otlp.json")).unwrap()).unwrap();
    assert_eq!(marks["otlp"], format!("{}/v1/logs", collector.url()));
    assert_eq!(
        marks["sessions"][&session]["confirmed"]["seq"],
        events.last().unwrap()["seq"]
    );
    drop(daemon);
}

#[test]
fn a_collector_down_for_a_while_loses_nothing_across_a_daemon_restart() {
    let port = free_port();
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &format!("http://127.0.0.1:{port}"))
        .with_env("AEP_OTLP_FLUSH", "50ms")
        .with_env("AEP_OTLP_BATCH", "7")
        .with_env("AEP_OTLP_OUTBOX", "5");
    // The collector is down: hooks are logged, the exporter retries, the daemon stops.
    let daemon = sb.start();
    hook(&sb, "agent_start", 0);
    for n in 1..=20 {
        hook(&sb, "tool_call", n);
        hook(&sb, "tool_result", n);
    }
    let otlp = wait_health(&daemon.addr(), "the outage", |o| {
        o["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot reach the collector"))
    });
    assert_eq!(otlp["connected"], false);
    let otlp = wait_health(&daemon.addr(), "all 42 Events pending", |o| o["pending"] == 42);
    assert!(
        otlp["outbox"].as_u64().unwrap() <= 5,
        "memory is bounded by AEP_OTLP_OUTBOX: {otlp}"
    );
    let doctor = sb.run(&["doctor"], &[]);
    assert!(
        String::from_utf8_lossy(&doctor.stdout).contains("not exporting to"),
        "{}",
        String::from_utf8_lossy(&doctor.stdout)
    );
    let (status, _) = daemon.stop();
    assert!(status.success());
    let marks = std::fs::read_to_string(sb.log_dir.join("cline/.otlp.json")).unwrap();
    assert!(marks.contains(SESSION) && !marks.contains("confirmed"), "{marks}");
    // Restarted, still down for a while, more hooks; then the collector comes up.
    let daemon = sb.start();
    for n in 21..=30 {
        hook(&sb, "tool_call", n);
        hook(&sb, "tool_result", n);
    }
    // The scenario: the collector stays down a while longer, through the exporter's retries.
    std::thread::sleep(Duration::from_secs(2));
    let collector = Collector::start(port);
    let logged = sb.log(SESSION);
    assert!(logged.len() >= 42, "{}", logged.len());
    collector.wait("every logged Event", |c| c.ids().len() >= logged.len());
    let ids = collector.ids();
    let want: Vec<String> = logged.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids, want, "every Event, in log order, none twice");
    wait_health(&daemon.addr(), "everything confirmed", |o| {
        o["pending"] == 0 && o["connected"] == true
    });
    // What the collector confirmed is not sent again after another restart.
    let (status, _) = daemon.stop();
    assert!(status.success());
    let daemon = sb.start();
    hook(&sb, "agent_end", 31);
    let log: Vec<String> = sb
        .log(SESSION)
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert!(log.len() > want.len());
    collector.wait("the new Events", |c| c.ids().len() >= log.len());
    // Nothing left to send (a resend would go in log order, before the new ones).
    wait_health(&daemon.addr(), "nothing pending", |o| o["pending"] == 0);
    assert_eq!(collector.ids(), log, "only the new Events after the restart");
    drop(daemon);
}

#[test]
fn a_429_waits_for_its_retry_after_and_a_400_is_dropped_counted_and_not_resent() {
    let collector = Collector::start(0);
    collector.answer(Answer {
        status: 429,
        retry_after: Some("3"),
        body: b"slow down".to_vec(),
    });
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_FLUSH", "200ms");
    let daemon = sb.start();
    hook(&sb, "agent_start", 0);
    collector.wait("the retried batch", |c| c.records().len() >= 2);
    let attempts = collector.attempts();
    assert_eq!((attempts[0].status, attempts[1].status), (429, 200));
    let waited = attempts[1].at - attempts[0].at;
    assert!(
        waited >= Duration::from_millis(2800),
        "Retry-After: 3 was not honoured: {waited:?}"
    );
    assert_eq!(attempts[0].request, attempts[1].request, "the same batch again");
    // A 400: the collector would refuse it again; dropped, counted, the next batch goes.
    collector.answer(Answer {
        status: 400,
        retry_after: None,
        body: b"log record too odd".to_vec(),
    });
    let before = collector.attempts().len();
    hook(&sb, "tool_call", 1);
    let otlp = wait_health(&daemon.addr(), "the refusal", |o| o["dropped"]["refused_events"] == 1);
    assert!(
        otlp["last_error"]
            .as_str()
            .unwrap()
            .contains("HTTP 400 from the collector: log record too odd"),
        "{otlp}"
    );
    let doctor = sb.run(&["doctor"], &[]);
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("refused 1 Events for good"));
    hook(&sb, "tool_result", 1);
    collector.wait("the next batch", |c| c.attempts().len() >= before + 2);
    // Nothing left to send: a resend of the refused batch would be pending.
    wait_health(&daemon.addr(), "nothing pending", |o| o["pending"] == 0);
    let statuses: Vec<u16> = collector.attempts()[before..].iter().map(|a| a.status).collect();
    assert_eq!(statuses, [400, 200], "the refused batch is not sent again");
    let log = sb.log(SESSION);
    let types: Vec<String> = collector.records().iter().map(|(_, r)| r.event_name.clone()).collect();
    assert_eq!(
        types,
        [
            "dev.aep.session.started",
            "dev.aep.run.started",
            "dev.aep.tool.completed"
        ]
    );
    assert_eq!(log.len(), 4);
    wait_health(&daemon.addr(), "nothing pending", |o| o["pending"] == 0);
    // A partial success: counted, not retried (OTLP forbids it).
    let partial = ExportLogsServiceResponse {
        partial_success: Some(
            opentelemetry_proto::tonic::collector::logs::v1::ExportLogsPartialSuccess {
                rejected_log_records: 1,
                error_message: "one record too old".into(),
            },
        ),
    };
    collector.answer(Answer {
        status: 200,
        retry_after: None,
        body: partial.encode_to_vec(),
    });
    let before = collector.attempts().len();
    hook(&sb, "agent_end", 2);
    let otlp = wait_health(&daemon.addr(), "the partial success", |o| {
        o["dropped"]["rejected_by_collector"] == 1
    });
    // Nothing pending, so nothing to retry.
    assert_eq!(otlp["pending"], 0);
    assert_eq!(collector.attempts().len(), before + 1, "not retried");
    drop(daemon);
}

#[test]
fn the_filter_and_the_exporters_own_capture_ceiling_decide_what_a_backend_sees() {
    let collector = Collector::start(0);
    let sb = Sandbox::new()
        .with_env("AEP_CAPTURE", "full")
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_FLUSH", "20ms")
        .with_env("AEP_OTLP_FILTER", r#"{"type":"tool.*"}"#);
    let daemon = sb.start();
    hook(&sb, "agent_start", 0);
    hook(&sb, "tool_call", 1);
    hook(&sb, "tool_result", 1);
    let log = sb.log(SESSION);
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(requested["capture"], "full");
    assert!(
        requested["data"]["args"].is_object() || requested["data"]["args"].is_string(),
        "{requested}"
    );
    collector.wait("the tool Events", |c| c.records().len() >= 2);
    let otlp = wait_health(&daemon.addr(), "the filtered Events", |o| {
        o["filtered"] == 2 && o["pending"] == 0
    });
    assert_eq!(otlp["capture"], "metadata");
    let records: Vec<Value> = collector.records().iter().map(|(_, r)| plain_record(r)).collect();
    let names: Vec<&str> = records.iter().map(|r| r["event_name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["dev.aep.tool.requested", "dev.aep.tool.completed"],
        "session.* and run.* filtered out"
    );
    for record in &records {
        assert_eq!(
            record["attributes"]["aep.capture"], "metadata",
            "down-leveled (AEP-0005 §3.3)"
        );
        let body = record["body"].as_object().unwrap();
        assert!(
            !body.contains_key("args") && !body.contains_key("result"),
            "content left the machine: {record}"
        );
        assert!(body.contains_key("tool"));
    }
    assert!(records[0]["body"]["args_digest"].is_string(), "metadata survives");
    drop(daemon);
    // At `none`, only the envelope's attributes go: no body at all.
    let collector = Collector::start(0);
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_FLUSH", "20ms")
        .with_env("AEP_OTLP_CAPTURE", "none");
    let _daemon = sb.start();
    hook(&sb, "agent_start", 0);
    collector.wait("the Events", |c| c.records().len() >= 2);
    for (_, record) in collector.records() {
        assert!(record.body.is_none());
        assert_eq!(plain_record(&record)["attributes"]["aep.capture"], "none");
    }
}

#[test]
fn malformed_otlp_settings_stop_the_daemon_at_start_naming_the_setting() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("AEP_OTLP_ENDPOINT", "collector:4318")], "AEP_OTLP_ENDPOINT"),
        (&[("AEP_OTLP_ENDPOINT", "grpc://c:4317")], "AEP_OTLP_ENDPOINT"),
        (
            &[
                ("AEP_OTLP_ENDPOINT", "http://c"),
                ("AEP_OTLP_HEADERS", "authorization s3cret"),
            ],
            "AEP_OTLP_HEADERS",
        ),
        (
            &[("AEP_OTLP_ENDPOINT", "http://c"), ("AEP_OTLP_FILTER", "{\"data\":{}}")],
            "AEP_OTLP_FILTER",
        ),
        (
            &[("AEP_OTLP_ENDPOINT", "http://c"), ("AEP_OTLP_CAPTURE", "fulll")],
            "AEP_OTLP_CAPTURE",
        ),
        (
            &[("AEP_OTLP_ENDPOINT", "https://c"), ("AEP_OTLP_CA", "/nowhere.pem")],
            "AEP_OTLP_CA",
        ),
        (
            &[("AEP_OTLP_ENDPOINT", "http://c"), ("AEP_OTLP_BATCH", "0")],
            "AEP_OTLP_BATCH",
        ),
    ];
    for (env, says) in cases {
        let sb = Sandbox::new();
        let mut cmd = std::process::Command::new(support::daemon::BIN);
        cmd.arg("daemon")
            .env("HOME", sb.root.path())
            .env("AEP_LOG_DIR", &sb.log_dir)
            .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
            .env("AEP_LISTEN", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{env:?}: the daemon started instead of refusing");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{env:?} started");
        assert!(stderr.contains(says), "{env:?}: {stderr}");
        assert!(!stderr.contains("s3cret"), "{stderr}");
        assert!(
            sb.discovery().is_none(),
            "{env:?}: the daemon got as far as its discovery file"
        );
    }
}

/// A private CA and a server configuration for `localhost` it signed.
fn private_ca(dir: &std::path::Path) -> (std::path::PathBuf, Arc<rustls::ServerConfig>) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "aep test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, ca.pem()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (pem, Arc::new(config))
}

/// A collector behind TLS: each connection one request, answered 200 and closed. Returns the
/// event names received and the number of handshakes the client broke off.
fn tls_collector(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
) -> (Arc<Mutex<Vec<String>>>, Arc<Mutex<usize>>) {
    let (names, refused) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0)));
    let (n, r) = (names.clone(), refused.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut tls = rustls::StreamOwned::new(rustls::ServerConnection::new(config.clone()).unwrap(), stream);
            let mut raw = Vec::new();
            let mut buf = [0u8; 16384];
            let (head, length) = loop {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break (None, 0),
                    Ok(k) => raw.extend_from_slice(&buf[..k]),
                }
                if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    raw.drain(..end + 4);
                    break (Some(head), length);
                }
            };
            let Some(head) = head else {
                *r.lock().unwrap() += 1;
                continue;
            };
            while raw.len() < length {
                let k = tls.read(&mut buf).unwrap();
                raw.extend_from_slice(&buf[..k]);
            }
            assert!(
                head.starts_with("post /v1/logs ") && head.contains("content-encoding: gzip"),
                "{head}"
            );
            let mut plain = Vec::new();
            GzDecoder::new(&raw[..length]).read_to_end(&mut plain).unwrap();
            let request = ExportLogsServiceRequest::decode(&plain[..]).unwrap();
            for rl in request.resource_logs {
                for sl in rl.scope_logs {
                    n.lock()
                        .unwrap()
                        .extend(sl.log_records.into_iter().map(|r| r.event_name));
                }
            }
            let _ = std::io::Write::write_all(
                &mut tls,
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            tls.conn.send_close_notify();
            let _ = tls.conn.complete_io(&mut tls.sock);
        }
    });
    (names, refused)
}

#[test]
fn an_https_collector_is_reached_through_a_private_ca_and_a_bad_certificate_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, config) = private_ca(dir.path());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://localhost:{}", listener.local_addr().unwrap().port());
    let (names, refused) = tls_collector(listener, config);
    // Without the CA the system's roots do not vouch for it: said, with what to set.
    let sb = Sandbox::new()
        .with_env("AEP_OTLP_ENDPOINT", &url)
        .with_env("AEP_OTLP_FLUSH", "20ms");
    let daemon = sb.start();
    hook(&sb, "agent_start", 0);
    let otlp = wait_health(&daemon.addr(), "the refused certificate", |o| {
        o["last_error"].is_string()
    });
    let error = otlp["last_error"].as_str().unwrap();
    assert!(
        error.contains("TLS certificate of the collector at https://localhost") && error.contains("AEP_OTLP_CA"),
        "{error}"
    );
    assert!(names.lock().unwrap().is_empty() && *refused.lock().unwrap() > 0);
    drop(daemon);
    // With AEP_OTLP_CA: the same Events (kept meanwhile) go over TLS.
    let sb = sb.with_env("AEP_OTLP_CA", ca.to_str().unwrap());
    let daemon = sb.start();
    wait_until_seen("two Events over TLS", WAIT, || match names.lock().unwrap().len() {
        n if n >= 2 => Ok(()),
        n => Err(format!("{n} arrived")),
    });
    assert_eq!(
        *names.lock().unwrap(),
        ["dev.aep.session.started", "dev.aep.run.started"]
    );
    wait_health(&daemon.addr(), "connected", |o| {
        o["connected"] == true && o["pending"] == 0
    });
}

#[test]
fn the_official_python_bindings_read_the_records_alike() {
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
    let python = String::from_utf8(install.stdout).unwrap().trim().to_string();
    let collector = Collector::start(0);
    let sb = Sandbox::new()
        .with_env("AEP_CAPTURE", "full")
        .with_env("AEP_OTLP_CAPTURE", "full")
        .with_env("AEP_OTLP_ENDPOINT", &collector.url())
        .with_env("AEP_OTLP_FLUSH", "300ms");
    let _daemon = sb.start();
    one_run(&sb);
    let log = sb.log(SESSION);
    collector.wait("every Event", |c| c.records().len() >= log.len());
    let mut from_python = Vec::new();
    for attempt in collector.attempts() {
        let mut child = std::process::Command::new(&python)
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otlp_decode.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), &attempt.raw).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let decoded: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        from_python.extend(decoded);
    }
    let from_rust: Vec<Value> = collector
        .records()
        .iter()
        .map(|(resource, r)| json!({"resource": resource, "scope": "aep-cline", "record": plain_record(r)}))
        .collect();
    assert_eq!(from_python.len(), log.len());
    assert_eq!(
        from_python, from_rust,
        "the official Python bindings read the same records"
    );
    assert!(
        from_python
            .iter()
            .any(|r| r["record"]["body"]["args"].is_object() || r["record"]["body"]["args"].is_string()),
        "content at `full` made it into a body: {from_python:#?}"
    );
}

#[test]
fn the_help_lists_every_otlp_setting_and_never_a_header_value() {
    let out = Sandbox::new().run(&["daemon", "--help"], &[("AEP_OTLP_HEADERS", "authorization=s3cret")]);
    let help = String::from_utf8_lossy(&out.stdout);
    for variable in [
        "AEP_OTLP_ENDPOINT",
        "AEP_OTLP_HEADERS",
        "AEP_OTLP_CA",
        "AEP_OTLP_CAPTURE",
        "AEP_OTLP_FILTER",
        "AEP_OTLP_SERVICE_NAME",
        "AEP_OTLP_BATCH",
        "AEP_OTLP_FLUSH",
        "AEP_OTLP_OUTBOX",
        "AEP_OTLP_TIMEOUT",
        "AEP_OTLP_TRACES",
        "AEP_OTLP_METRICS",
        "AEP_OTLP_METRICS_INTERVAL",
    ] {
        assert!(
            help.contains(&format!("[env: {variable}")),
            "{variable} missing from --help"
        );
    }
    assert!(help.contains("OTLP export (logs, traces, metrics)"), "its own heading");
    assert!(!help.contains("s3cret"));
}
