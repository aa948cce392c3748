//! The pure AEP Event → OTLP LogRecord mapping (AEP-0005 §3.2–§3.4): an Event in, a record
//! out; no I/O, no clock. The exporter's capture ceiling (§3.3) is applied before this, by
//! [`aep_core::gate::downlevel`].
//!
//! | AEP | LogRecord |
//! |---|---|
//! | `time` | `time_unix_nano` (RFC 3339 → epoch nanos) |
//! | `type` | `event_name` = `"dev.aep." + type` |
//! | `severity` | `severity_text` + `severity_number` (§3.4) |
//! | `traceparent` | `trace_id`, `span_id`, `flags` (W3C fields; absent when malformed) |
//! | `agent` | resource `service.name` (by [`resource`]) + `aep.agent_id` |
//! | `session`/`run`/`step` | `aep.session_id`, `aep.run_id`, `aep.step` |
//! | `id`/`seq`/`epoch`/`cause`/`capture` | `aep.event_id`, `aep.sequence`, `aep.epoch`, `aep.causation_id`, `aep.capture` (default `metadata`) |
//! | `subject`/`source` | `aep.subject`, `aep.source` |
//! | `data` members `gen_ai.*` | top-level attributes, verbatim |
//! | the rest of `data` | `body`, an AnyValue map (none when nothing is left) |
//!
//! Extension attributes (`clinehook`, `clineagent`) have no row in §3.2 and are not exported.

use aep_core::Severity;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, ArrayValue, KeyValue, KeyValueList};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::{Map, Value};

/// The reverse-DNS root shared with the CloudEvents bridge (AEP-0005 §1 B3).
pub const ROOT: &str = "dev.aep.";

/// `severity_text` and `severity_number` (AEP-0005 §3.4).
pub fn severity(s: Severity) -> (&'static str, i32) {
    match s {
        Severity::Debug => ("DEBUG", 5),
        Severity::Info => ("INFO", 9),
        Severity::Notice => ("INFO2", 10),
        Severity::Warning => ("WARN", 13),
        Severity::Error => ("ERROR", 17),
        Severity::Critical => ("FATAL", 21),
    }
}

/// One Event (already down-leveled to the exporter's ceiling) as a LogRecord.
pub fn log_record(event: &Value) -> LogRecord {
    let str_of = |k: &str| event.get(k).and_then(Value::as_str);
    let mut record = LogRecord {
        time_unix_nano: str_of("time").and_then(epoch_nanos).unwrap_or(0),
        event_name: format!("{ROOT}{}", str_of("type").unwrap_or_default()),
        ..Default::default()
    };
    let level: Severity = str_of("severity").and_then(|s| s.parse().ok()).unwrap_or_default();
    let (text, number) = severity(level);
    record.severity_text = text.to_string();
    record.severity_number = number;
    if let Some((trace, span, flags)) = str_of("traceparent").and_then(traceparent) {
        record.trace_id = trace;
        record.span_id = span;
        record.flags = flags;
    }
    // In the order of §3.2's table; strings only where AEP has strings, numbers for positions.
    let mut attributes = Vec::new();
    let capture = Value::from(str_of("capture").unwrap_or("metadata"));
    let text = |member: &str| event.get(member).filter(|v| v.is_string());
    let number = |member: &str| event.get(member).filter(|v| v.is_number());
    for (key, value) in [
        ("aep.agent_id", text("agent")),
        ("aep.event_id", text("id")),
        ("aep.capture", Some(&capture)),
        ("aep.source", text("source")),
        ("aep.session_id", text("session")),
        ("aep.run_id", text("run")),
        ("aep.step", text("step")),
        ("aep.sequence", number("seq")),
        ("aep.epoch", number("epoch")),
        ("aep.causation_id", text("cause")),
        ("aep.subject", text("subject")),
    ] {
        if let Some(value) = value {
            attributes.push(kv(key, any(value)));
        }
    }
    let mut body = Map::new();
    if let Some(Value::Object(data)) = event.get("data") {
        for (key, value) in data {
            if key.starts_with("gen_ai.") {
                attributes.push(kv(key, any(value)));
            } else {
                body.insert(key.clone(), value.clone());
            }
        }
    }
    record.attributes = attributes;
    if !body.is_empty() {
        record.body = Some(any(&Value::Object(body)));
    }
    record
}

/// The resource of the emitting agent: `service.name` (the Event's `agent`, or the operator's
/// override) and `host.name`.
pub fn resource(service_name: &str, host: &str) -> Resource {
    Resource {
        attributes: vec![
            kv("service.name", any(&Value::from(service_name))),
            kv("host.name", any(&Value::from(host))),
        ],
        ..Default::default()
    }
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(value),
        ..Default::default()
    }
}

/// A JSON value as an OTLP AnyValue: integers stay integers (a `u64` beyond `i64` becomes a
/// double), objects become maps in member order, `null` the empty value.
pub fn any(value: &Value) -> AnyValue {
    use any_value::Value as V;
    let v = match value {
        Value::Null => None,
        Value::Bool(b) => Some(V::BoolValue(*b)),
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => V::IntValue(i),
            None => V::DoubleValue(n.as_f64().unwrap_or_default()),
        }),
        Value::String(s) => Some(V::StringValue(s.clone())),
        Value::Array(items) => Some(V::ArrayValue(ArrayValue {
            values: items.iter().map(any).collect(),
        })),
        Value::Object(members) => Some(V::KvlistValue(KeyValueList {
            values: members.iter().map(|(k, v)| kv(k, any(v))).collect(),
        })),
    };
    AnyValue { value: v }
}

/// RFC 3339 (`2026-07-03T10:15:04.221Z`, or with an offset) → nanoseconds since the epoch
/// (`aep_core::time`: a date that does not exist, `2026-02-31`, is no time).
pub fn epoch_nanos(time: &str) -> Option<u64> {
    u64::try_from(aep_core::time::parse(time, false)?.as_nanosecond()).ok()
}

/// `00-<trace 32 hex>-<span 16 hex>-<flags 2 hex>` → the W3C fields; `None` when malformed or
/// all-zero (invalid per W3C Trace Context, so the record is not put on a trace).
pub fn traceparent(tp: &str) -> Option<(Vec<u8>, Vec<u8>, u32)> {
    let mut parts = tp.split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let lower_hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !lower_hex(version, 2) || !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
        return None;
    }
    let (trace, span) = (hex::decode(trace).ok()?, hex::decode(span).ok()?);
    if trace.iter().all(|b| *b == 0) || span.iter().all(|b| *b == 0) {
        return None;
    }
    Some((trace, span, u32::from_str_radix(flags, 16).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::gate::downlevel;
    use aep_core::Capture;
    use serde_json::json;

    /// A LogRecord in the fixture's JSON form (`conformance/fixtures/otlp/otlp-expected.json`).
    fn as_fixture(record: &LogRecord, service: &str) -> Value {
        fn plain(v: &AnyValue) -> Value {
            use any_value::Value as V;
            match &v.value {
                None => Value::Null,
                Some(V::BoolValue(b)) => json!(b),
                Some(V::IntValue(i)) => json!(i),
                Some(V::DoubleValue(d)) => json!(d),
                Some(V::StringValue(s)) => json!(s),
                Some(V::ArrayValue(a)) => Value::Array(a.values.iter().map(plain).collect()),
                Some(V::KvlistValue(kv)) => Value::Object(
                    kv.values
                        .iter()
                        .map(|kv| (kv.key.clone(), kv.value.as_ref().map(plain).unwrap_or(Value::Null)))
                        .collect(),
                ),
                Some(other) => panic!("unexpected {other:?}"),
            }
        }
        let mut out = json!({
            "time_unix_nano": record.time_unix_nano,
            "event_name": record.event_name,
            "severity_text": record.severity_text,
            "severity_number": record.severity_number,
            "resource": {"service.name": service},
            "attributes": Value::Object(record.attributes.iter()
                .map(|kv| (kv.key.clone(), plain(kv.value.as_ref().unwrap()))).collect()),
        });
        if !record.trace_id.is_empty() {
            out["trace_id"] = json!(hex::encode(&record.trace_id));
            out["span_id"] = json!(hex::encode(&record.span_id));
            out["flags"] = json!(record.flags);
        }
        if let Some(body) = &record.body {
            out["body"] = plain(body);
        }
        out
    }

    fn golden() -> Vec<Value> {
        include_str!("../../../../../conformance/fixtures/golden/golden.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn export(event: &Value, ceiling: Capture) -> LogRecord {
        log_record(&downlevel(event, ceiling))
    }

    #[test]
    fn the_pinned_projections_match_at_and_below_the_ceiling() {
        let pins: Value = serde_json::from_str(include_str!(
            "../../../../../conformance/fixtures/otlp/otlp-expected.json"
        ))
        .unwrap();
        let golden = golden();
        for i in ["3", "13", "24"] {
            let event = &golden[i.parse::<usize>().unwrap()];
            let got = as_fixture(&export(event, Capture::Metadata), event["agent"].as_str().unwrap());
            assert_eq!(got, pins[i], "golden[{i}]");
        }
    }

    #[test]
    fn an_event_above_the_ceiling_is_down_leveled_with_the_schemas_annotations() {
        // golden[15]: tool.failed at `redacted`. The pin's runner drops the whole payload
        // ("conservative down-level without annotations (exporter uses them)") and keeps
        // `aep.capture: redacted`; the exporter down-levels per AEP-0001 §8.2 as §3.3 says:
        // the redacted-gated `error.message` goes, the metadata survives, and `capture`
        // says what is left.
        let event = &golden()[15];
        let got = as_fixture(&export(event, Capture::Metadata), "claude-code");
        let pins: Value = serde_json::from_str(include_str!(
            "../../../../../conformance/fixtures/otlp/otlp-expected.json"
        ))
        .unwrap();
        let mut expected = pins["15"].clone();
        expected["attributes"]["aep.capture"] = json!("metadata");
        expected["body"] =
            json!({"tool": {"name": "Write", "call_id": "t_93"}, "error": {"type": "io_error"}, "duration_ms": 310});
        assert_eq!(got, expected);
        assert!(!format!("{:?}", export(event, Capture::Metadata)).contains("ENOSPC"));
        // At `none` only the envelope-derived attributes go (§3.3): no body at all.
        let none = export(event, Capture::None);
        assert!(none.body.is_none());
        assert_eq!(as_fixture(&none, "x")["attributes"]["aep.capture"], "none");
        // At the Event's own level it goes whole.
        let full = as_fixture(&export(event, Capture::Redacted), "x");
        assert_eq!(full["body"]["error"]["message"], event["data"]["error"]["message"]);
    }

    #[test]
    fn time_is_epoch_nanos_exactly() {
        assert_eq!(epoch_nanos("2026-07-03T10:15:04.221Z"), Some(1_783_073_704_221_000_000));
        assert_eq!(epoch_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            epoch_nanos("2026-07-03T10:15:13.310Z"),
            Some(1_783_073_713_310_000_000),
            "no float rounding"
        );
        assert_eq!(
            epoch_nanos("2026-07-03T12:15:04.221+02:00"),
            epoch_nanos("2026-07-03T10:15:04.221Z")
        );
        assert_eq!(
            epoch_nanos("2000-02-29T23:59:59.123456789Z"),
            Some(951_868_799_123_456_789)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-31T00:00:00Z",
            "2026-07-03T10:15:04",
            "2026-07-03T10:15:04.x1Z",
        ] {
            assert_eq!(epoch_nanos(bad), None, "{bad}");
        }
        let record = log_record(&json!({"type": "run.started", "time": "not a time"}));
        assert_eq!(
            record.time_unix_nano, 0,
            "unknown time: left unset rather than invented"
        );
    }

    #[test]
    fn type_becomes_the_event_name_under_the_shared_root() {
        assert_eq!(
            log_record(&json!({"type": "tool.completed"})).event_name,
            "dev.aep.tool.completed"
        );
        assert_eq!(
            log_record(&json!({"type": "x.cline.prompt.submitted"})).event_name,
            "dev.aep.x.cline.prompt.submitted"
        );
    }

    #[test]
    fn severity_follows_the_table_and_defaults_to_info() {
        let table: Value = serde_json::from_str(include_str!(
            "../../../../../conformance/schemas/registry/severity.json"
        ))
        .unwrap();
        for level in Severity::ALL {
            let (text, number) = severity(level);
            let pinned = &table["otlp"][level.as_str()];
            assert_eq!(
                (json!(text), json!(number)),
                (pinned["severity_text"].clone(), pinned["severity_number"].clone())
            );
            let record = log_record(&json!({"type": "a.b", "severity": level.as_str()}));
            assert_eq!((record.severity_text.as_str(), record.severity_number), (text, number));
        }
        let record = log_record(&json!({"type": "a.b"}));
        assert_eq!((record.severity_text.as_str(), record.severity_number), ("INFO", 9));
    }

    #[test]
    fn traceparent_lands_the_record_on_its_trace_and_a_bad_one_is_ignored() {
        let record = log_record(
            &json!({"type": "a.b", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
        );
        assert_eq!(hex::encode(&record.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex::encode(&record.span_id), "00f067aa0ba902b7");
        assert_eq!(record.flags, 1);
        for bad in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            let record = log_record(&json!({"type": "a.b", "traceparent": bad}));
            assert!(
                record.trace_id.is_empty() && record.span_id.is_empty() && record.flags == 0,
                "{bad}"
            );
        }
        let future = traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more");
        assert!(future.is_some(), "a later version may carry more fields");
    }

    #[test]
    fn envelope_attributes_are_prefixed_and_absent_ones_are_not_invented() {
        let event = json!({
            "aep": "0.1", "id": "E1", "type": "run.started", "time": "2026-07-03T10:15:04.221Z",
            "source": "aep://h/agent/cline/session/s", "agent": "cline", "session": "s", "run": "r",
            "step": "3", "seq": 7, "epoch": 1, "cause": "C", "subject": "Bash", "capture": "redacted",
            "clinehook": "abc", "data": {"trigger": "user"}
        });
        let got = as_fixture(&log_record(&event), "cline");
        assert_eq!(
            got["attributes"],
            json!({
                "aep.agent_id": "cline", "aep.event_id": "E1", "aep.capture": "redacted",
                "aep.source": "aep://h/agent/cline/session/s", "aep.session_id": "s", "aep.run_id": "r",
                "aep.step": "3", "aep.sequence": 7, "aep.epoch": 1, "aep.causation_id": "C", "aep.subject": "Bash"
            }),
            "extension attributes have no row in §3.2"
        );
        let bare = as_fixture(
            &log_record(&json!({"type": "agent.presence", "id": "E2", "agent": "a", "source": "s"})),
            "a",
        );
        assert_eq!(
            bare["attributes"],
            json!({"aep.agent_id": "a", "aep.event_id": "E2", "aep.capture": "metadata", "aep.source": "s"})
        );
    }

    #[test]
    fn gen_ai_members_are_hoisted_verbatim_and_the_rest_is_the_body() {
        let event = json!({"type": "run.finished", "data": {
            "gen_ai.usage.input_tokens": 142, "gen_ai.request.model": "m", "cost": 0.25,
            "nested": {"gen_ai.not.hoisted": 1, "list": [1, "a", true, null]}
        }});
        let got = as_fixture(&log_record(&event), "a");
        assert_eq!(got["attributes"]["gen_ai.usage.input_tokens"], 142);
        assert_eq!(got["attributes"]["gen_ai.request.model"], "m");
        assert_eq!(
            got["body"],
            json!({"cost": 0.25, "nested": {"gen_ai.not.hoisted": 1, "list": [1, "a", true, null]}})
        );
        let only_gen_ai = log_record(&json!({"type": "a.b", "data": {"gen_ai.usage.output_tokens": 1}}));
        assert!(only_gen_ai.body.is_none(), "nothing left: no body");
        let huge = any(&json!(u64::MAX));
        assert!(matches!(huge.value, Some(any_value::Value::DoubleValue(_))));
    }

    #[test]
    fn the_resource_names_the_agent_and_the_host() {
        let r = resource("cline", "laptop-7");
        let keys: Vec<(&str, Value)> = r
            .attributes
            .iter()
            .map(|kv| {
                (
                    kv.key.as_str(),
                    as_fixture(
                        &LogRecord {
                            attributes: vec![kv.clone()],
                            ..Default::default()
                        },
                        "",
                    )["attributes"][&kv.key]
                        .clone(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [("service.name", json!("cline")), ("host.name", json!("laptop-7"))]
        );
    }
}
