//! The embedded endpoint's HTTP bindings through the real binary: each check of the public
//! live checker (`conformance/live.js`) that runs over HTTP and SSE, reproduced (discovery,
//! version-gate, reject-invalid, ingest-fanout, resume, capture-downlevel, replay-all, evict),
//! plus every refusal the collector owes (AEP-0003 §3.2, §3.3, §5, §8).

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::daemon::Sandbox;
use support::endpoint::{enc, event, ndjson, parse_sse, post, request, Sse};

const WAIT: Duration = Duration::from_secs(30);

fn ids(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["id"].as_str().unwrap()).collect()
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[test]
fn discovery_is_served_at_events_and_well_known() {
    let sb = Sandbox::new().with_env("AEP_BUFFER", "77");
    let daemon = sb.start();
    for path in ["/events", "/.well-known/aep"] {
        let (status, head, body) = request(&daemon.addr(), "GET", path, &[], b"");
        assert_eq!(status, 200, "{path}");
        assert!(head.to_ascii_lowercase().contains("content-type: application/json"));
        let doc: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["aep"], json!(["0.1"]));
        assert_eq!(doc["role"], "collector");
        assert_eq!(
            doc["endpoints"],
            json!({"events": "/events", "stream": "/stream", "socket": "/socket"})
        );
        let caps = &doc["capabilities"];
        assert_eq!(caps["filters"], json!(["attr-match"]));
        assert_eq!(caps["replay"], json!({"buffer": 77, "all": true}));
        assert_eq!(caps["control"], json!({"accepts": [], "ack_window_ms": 10000}));
    }
}

#[test]
fn with_a_token_every_endpoint_route_wants_it_but_hooks_keep_their_own() {
    let sb = Sandbox::new().with_env("AEP_TOKEN", "s3cret");
    let daemon = sb.start();
    let addr = daemon.addr();
    for (method, path) in [
        ("GET", "/events"),
        ("GET", "/.well-known/aep"),
        ("GET", "/stream?live=0"),
    ] {
        let (status, _, body) = request(&addr, method, path, &[], b"");
        assert_eq!(status, 401, "{path}: {body}");
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"], "unauthorized");
        let (status, _, _) = request(&addr, method, path, &[("Authorization", "Bearer wrong")], b"");
        assert_eq!(status, 401);
    }
    let (status, _) = post(
        &addr,
        None,
        "application/json",
        &event("session.started", "t", 0, None).to_string(),
    );
    assert_eq!(status, 401);
    let (status, _, _) = request(&addr, "GET", "/events", &[("Authorization", "Bearer s3cret")], b"");
    assert_eq!(status, 200);
    let (status, _, _) = request(&addr, "GET", "/stream?live=0&access_token=s3cret", &[], b"");
    assert_eq!(status, 200, "the query token works where headers cannot be set");
    // The hook door still wants the discovery-file token, not AEP_TOKEN.
    let (status, _, _) = request(&addr, "POST", "/hook", &[("Authorization", "Bearer s3cret")], b"{}");
    assert_eq!(status, 401);
    let (status, _, _) = request(&addr, "GET", "/healthz", &[], b"");
    assert_eq!(status, 200, "/healthz stays open");
}

#[test]
fn version_gate_media_type_size_and_invalid_events_are_refused_with_reasons() {
    let sb = Sandbox::new()
        .with_env("AEP_MAX_BODY", "4096")
        .with_env("AEP_MAX_BATCH", "3");
    let daemon = sb.start();
    let addr = daemon.addr();
    let ok = event("session.started", "g", 0, Some(json!({"client": {"name": "t"}}))).to_string();
    // version-gate (live.js): 426 + versions.
    for version in ["9.9", ""] {
        let mut headers = vec![("Content-Type", "application/json")];
        if !version.is_empty() {
            headers.push(("AEP-Version", version));
        }
        let (status, _, body) = request(&addr, "POST", "/events", &headers, ok.as_bytes());
        assert_eq!(status, 426, "AEP-Version {version:?}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["versions"],
            json!(["0.1"])
        );
    }
    let (status, body) = post(&addr, None, "text/plain", &ok);
    assert_eq!((status, body["error"].as_str()), (415, Some("unsupported-media-type")));
    // reject-invalid (live.js): no id.
    let mut no_id = event("session.started", "g", 0, None);
    no_id.as_object_mut().unwrap().remove("id");
    let (status, body) = post(&addr, None, "application/json", &no_id.to_string());
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid-event")));
    assert!(body["detail"].as_str().unwrap().contains("id"), "{body}");
    let (status, body) = post(&addr, None, "application/json", "{not json");
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid-json")));
    // A batch with a bad line is refused whole, naming the line.
    let bad = format!("{ok}\n{}\n", json!({"aep": "0.2"}));
    let (status, body) = post(&addr, None, "application/x-ndjson", &bad);
    assert_eq!((status, body["line"].as_u64()), (400, Some(1)));
    let (_, _, held) = request(&addr, "GET", "/stream?live=0&from=all", &[], b"");
    assert!(
        !held.contains("data:"),
        "nothing of a refused batch is admitted: {held}"
    );
    // 413: the body and the batch.
    let big = event(
        "session.started",
        "g",
        0,
        Some(json!({"client": {"name": "x".repeat(5000)}})),
    );
    let (status, body) = post(&addr, None, "application/json", &big.to_string());
    assert_eq!((status, body["error"].as_str()), (413, Some("payload-too-large")));
    let four: Vec<Value> = (0..4)
        .map(|i| event("session.started", &format!("b{i}"), 0, None))
        .collect();
    let (status, body) = post(&addr, None, "application/x-ndjson", &ndjson(&four));
    assert_eq!((status, body["error"].as_str()), (413, Some("too-many-events")));
    // A command is not taken over HTTP (AEP-0004 §4.1).
    let cmd = support::endpoint::command("control.pause", "g", json!({}));
    let (status, body) = post(&addr, None, "application/json", &cmd.to_string());
    assert_eq!((status, body["error"].as_str()), (403, Some("control-needs-socket")));
    let (status, body) = post(&addr, None, "application/json", &ok);
    assert_eq!((status, body["accepted"].as_u64()), (202, Some(1)));
}

#[test]
fn an_ndjson_batch_fans_out_to_a_filtered_subscriber_and_resumes_exactly() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    // ingest-fanout (live.js)
    let session = "live-fanout";
    let mut evs = vec![
        event(
            "session.started",
            session,
            0,
            Some(json!({"client": {"name": "aep-test"}})),
        ),
        event(
            "tool.completed",
            session,
            1,
            Some(json!({"tool": {"name": "demo"}, "status": "success"})),
        ),
        event("session.ended", session, 2, Some(json!({"reason": "normal"}))),
    ];
    evs[1]["cause"] = evs[0]["id"].clone();
    let filter = enc(&json!({"session": session}).to_string());
    let sse = Sse::open(&addr, &format!("/stream?filter={filter}"), &[]);
    assert_eq!(sse.status, 200);
    let other = event("session.started", "someone-else", 0, None);
    let (status, _) = post(
        &addr,
        None,
        "application/x-ndjson",
        &ndjson(&[other, evs[0].clone(), evs[1].clone(), evs[2].clone()]),
    );
    assert_eq!(status, 202);
    let (messages, _) = sse.collect(WAIT, |e| e.len() >= 3);
    let got: Vec<Value> = messages.iter().filter_map(|m| m.data.clone()).collect();
    assert_eq!(ids(&got), ids(&evs), "only the filtered session, in order");
    assert_eq!(messages[0].event.as_deref(), Some("session.started"));
    assert_eq!(messages[2].id.as_deref(), Some("live-fanout:0:2"));
    assert_eq!(
        messages[1].raw.as_deref(),
        Some(evs[1].to_string().as_str()),
        "bytes preserved"
    );
    // resume (live.js): from seq 0 replays exactly 1 and 2, then nothing more.
    let from = enc(&json!([{"session": session, "epoch": 0, "seq": 0}]).to_string());
    let resumed = Sse::open(&addr, &format!("/stream?filter={filter}&from={from}"), &[]);
    let got = resumed.events(WAIT, |e| e.len() >= 2);
    assert_eq!(seqs(&got), [1, 2]);
    // Last-Event-ID resumes its session the same way.
    let by_id = Sse::open(&addr, "/stream", &[("Last-Event-ID", "live-fanout:0:1")]);
    let got = by_id.events(WAIT, |e| !e.is_empty());
    assert_eq!(ids(&got), [evs[2]["id"].as_str().unwrap()]);
    // A redelivery is held once but still forwarded live (AEP-0003 §5).
    let sse = Sse::open(&addr, &format!("/stream?filter={filter}"), &[]);
    let (status, body) = post(&addr, None, "application/json", &evs[1].to_string());
    assert_eq!((status, body["duplicates"].as_u64()), (202, Some(1)));
    assert_eq!(sse.events(WAIT, |e| !e.is_empty()).len(), 1);
    // Nothing more on the resumed streams: what each carries next is that live redelivery.
    for stream in [&resumed, &by_id] {
        let next = stream.events(WAIT, |e| !e.is_empty());
        assert_eq!(ids(&next), [evs[1]["id"].as_str().unwrap()]);
    }
    let (_, _, replay) = request(&addr, "GET", &format!("/stream?live=0&filter={filter}"), &[], b"");
    let held: Vec<Value> = parse_sse(&replay).into_iter().filter_map(|m| m.data).collect();
    assert_eq!(
        seqs(&held),
        [0, 1, 2],
        "live=0 with a session filter replays that session once"
    );
    assert!(replay.ends_with(": replay-complete\n\n"));
}

#[test]
fn a_capture_ceiling_down_levels_what_it_delivers() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    let session = "live-capture";
    let mut ev = event(
        "run.started",
        session,
        0,
        Some(json!({"trigger": "user", "prompt": "CANARY do not deliver"})),
    );
    ev["capture"] = json!("redacted");
    ev["run"] = json!("r1");
    let filter = enc(&json!({"session": session}).to_string());
    let low = Sse::open(&addr, &format!("/stream?filter={filter}&capture=metadata"), &[]);
    let high = Sse::open(&addr, &format!("/stream?filter={filter}&capture=full"), &[]);
    assert_eq!(post(&addr, None, "application/json", &ev.to_string()).0, 202);
    let got = low.events(WAIT, |e| !e.is_empty());
    assert!(!got[0].to_string().contains("CANARY"));
    assert_eq!(got[0]["capture"], "metadata");
    assert_eq!(got[0]["data"], json!({"trigger": "user"}));
    let got = high.events(WAIT, |e| !e.is_empty());
    assert_eq!(got[0], ev, "a higher ceiling never up-levels nor changes anything");
    let (status, _, body) = request(&addr, "GET", "/stream?capture=loud", &[], b"");
    assert_eq!(
        (status, serde_json::from_str::<Value>(&body).unwrap()["error"].as_str()),
        (400, Some("invalid-filter"))
    );
    let bad = enc(&json!({"seq": 1}).to_string());
    let (status, _, _) = request(&addr, "GET", &format!("/stream?filter={bad}"), &[], b"");
    assert_eq!(status, 400, "an illegal filter key is refused, never match-all");
}

#[test]
fn replay_all_returns_every_held_session_without_markers() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    let evs = [
        event("session.started", "ra1", 0, None),
        event("tool.completed", "ra1", 1, Some(json!({"tool": {"name": "demo"}}))),
        event("session.started", "ra2", 0, None),
    ];
    assert_eq!(post(&addr, None, "application/x-ndjson", &ndjson(&evs)).0, 202);
    let (status, _, body) = request(&addr, "GET", "/stream?live=0&from=all", &[], b"");
    assert_eq!(status, 200);
    let got: Vec<Value> = parse_sse(&body).into_iter().filter_map(|m| m.data).collect();
    let of = |s: &str| seqs(&got.iter().filter(|e| e["session"] == s).cloned().collect::<Vec<_>>());
    assert_eq!((of("ra1"), of("ra2")), (vec![0, 1], vec![0]));
    assert!(!body.contains("replay-exhausted"));
}

#[test]
fn an_evicted_resume_position_is_marked_before_what_is_held() {
    let sb = Sandbox::new().with_env("AEP_BUFFER", "16");
    let daemon = sb.start();
    let addr = daemon.addr();
    let session = "live-evict";
    let flood: Vec<Value> = (0..24)
        .map(|seq| {
            let mut e = event("progress.status", session, seq, None);
            e["epoch"] = json!(1);
            e
        })
        .collect();
    assert_eq!(post(&addr, None, "application/x-ndjson", &ndjson(&flood)).0, 202);
    let from = enc(&json!([{"session": session, "epoch": 1, "seq": 0}]).to_string());
    let (status, _, body) = request(&addr, "GET", &format!("/stream?live=0&from={from}"), &[], b"");
    assert_eq!(status, 200);
    let messages = parse_sse(&body);
    assert_eq!(messages[0].comments, ["replay-exhausted live-evict 1:8"]);
    assert!(messages[0].data.is_none(), "the marker comes before any data");
    let raws: Vec<String> = messages.iter().filter_map(|m| m.raw.clone()).collect();
    let posted: Vec<String> = flood[8..].iter().map(|e| e.to_string()).collect();
    assert_eq!(raws, posted, "8..23, byte-identical");
    // Nothing evicted after the position: no marker.
    let from = enc(&json!([{"session": session, "epoch": 1, "seq": 20}]).to_string());
    let (_, _, body) = request(&addr, "GET", &format!("/stream?live=0&from={from}"), &[], b"");
    assert!(!body.contains("replay-exhausted"));
    assert_eq!(parse_sse(&body).iter().filter(|m| m.data.is_some()).count(), 3);
    let bad = enc("{}");
    let (status, _, _) = request(&addr, "GET", &format!("/stream?from={bad}"), &[], b"");
    assert_eq!(status, 400, "a malformed from is refused");
}
