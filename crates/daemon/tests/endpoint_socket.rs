//! The embedded endpoint's WebSocket binding and control through the real binary: the live
//! checker's socket and control checks reproduced (hello-ws, subscribe-limits, ignore-unknown,
//! evict over WS, control-auth-gate, control-behalf-refusal, control-nack-unsupported,
//! control-dedupe), plus subscriptions, pings and the daemon's own Events on a subscriber.

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::daemon::{http, real_payload, Sandbox};
use support::endpoint::{command, enc, event, ndjson, parse_sse, post, request, Sse, Ws};
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(30);
const SESSION: &str = "1796007203184_6l7jh";

fn hello() -> Value {
    json!({"type": "hello", "versions": ["0.1"], "role": "consumer"})
}

#[test]
fn hello_comes_first_and_picks_one_version() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    let mut ws = Ws::connect(&addr, None).unwrap();
    ws.send(&event("session.started", "s", 0, None));
    let frames = ws.recv_until(WAIT, |_| false);
    assert_eq!(frames[0]["code"], "hello-required", "{frames:?}");
    assert!(ws.closed);
    let mut ws = Ws::connect(&addr, None).unwrap();
    ws.send(&json!({"type": "hello", "versions": ["9.9"], "role": "consumer"}));
    let frames = ws.recv_until(WAIT, |_| false);
    assert_eq!(
        (frames[0]["code"].as_str(), &frames[0]["versions"]),
        (Some("version-unsupported"), &json!(["0.1"]))
    );
    assert!(ws.closed);
    let mut ws = Ws::connect(&addr, None).unwrap();
    ws.send(&hello());
    let reply = ws.recv(WAIT).unwrap();
    assert_eq!(
        (reply["type"].as_str(), &reply["versions"]),
        (Some("hello"), &json!(["0.1"]))
    );
    assert_eq!(reply["identity"]["agent"], "cline");
    assert_eq!(reply["capabilities"]["control"]["accepts"], json!([]));
    // Binary frames are refused (AEP-0003 §3.5.2).
    ws.send_raw(Message::binary(vec![1u8, 2, 3]));
    let frames = ws.recv_until(WAIT, |_| false);
    assert_eq!(frames[0]["code"], "binary-unsupported");
    assert!(ws.closed);
}

#[test]
fn refused_subscriptions_are_in_band_and_the_connection_goes_on() {
    let sb = Sandbox::new().with_env("AEP_MAX_FROM", "8");
    let daemon = sb.start();
    let (mut ws, _) = Ws::hello(&daemon.addr(), None, "consumer");
    let codes = ["invalid-filter", "unknown-dialect", "unauthorized", "limit-exceeded"];
    let big: Vec<Value> = (0..1024)
        .map(|i| json!({"session": format!("s{i}"), "epoch": 0, "seq": 0}))
        .collect();
    for (label, sub) in [
        (
            "cap",
            json!({"type": "subscribe", "id": "cap", "filter": {"type": ["agent.*"]}, "from": big}),
        ),
        (
            "mal",
            json!({"type": "subscribe", "id": "mal", "filter": {}, "from": {}}),
        ),
        ("key", json!({"type": "subscribe", "id": "key", "filter": {"seq": 3}})),
        ("cap2", json!({"type": "subscribe", "id": "cap2", "capture": "loud"})),
    ] {
        ws.send(&sub);
        let reply = ws.recv_until(WAIT, |f| f["id"] == label).pop().unwrap();
        assert_eq!(reply["type"], "error", "{label}: {reply}");
        assert!(codes.contains(&reply["code"].as_str().unwrap()), "{reply}");
        assert!(reply["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    // ignore-unknown (live.js): an unknown frame, then a subscribe on the same connection.
    ws.send(&json!({"type": "zigzag", "note": "unknown"}));
    ws.send(&json!({"no": "type"}));
    ws.send(&json!({"type": "subscribe", "id": "follow", "filter": {"type": ["agent.*"]}}));
    let reply = ws.recv_until(WAIT, |f| f["id"] == "follow").pop().unwrap();
    assert_eq!(reply["type"], "subscribed");
    ws.send(&json!({"type": "ping", "t": 42}));
    let pong = ws.recv_until(WAIT, |f| f["type"] == "pong").pop().unwrap();
    assert_eq!(pong["t"], 42);
    assert!(!ws.closed);
    // A hello with an unknown capability key is answered normally.
    let mut other = Ws::connect(&daemon.addr(), None).unwrap();
    other.send(
        &json!({"type": "hello", "versions": ["0.1"], "role": "consumer", "capabilities": {"futurecap": {"on": true}}}),
    );
    assert_eq!(other.recv(WAIT).unwrap()["type"], "hello");
}

#[test]
fn many_subscriptions_share_a_connection_and_unsubscribe_stops_one() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    let (mut ws, _) = Ws::hello(&addr, None, "consumer");
    ws.send(&json!({"type": "subscribe", "id": "a", "filter": {"session": "sa"}}));
    ws.send(&json!({"type": "subscribe", "id": "b", "filter": {"session": "sb"}, "capture": "none"}));
    ws.recv_until(WAIT, |f| f["id"] == "b");
    let (a0, b0) = (
        event("session.started", "sa", 0, None),
        event("session.started", "sb", 0, Some(json!({"client": {"name": "x"}}))),
    );
    assert_eq!(
        post(&addr, None, "application/x-ndjson", &ndjson(&[a0.clone(), b0.clone()])).0,
        202
    );
    let got = ws.recv_until(WAIT, |f| f["session"] == "sb");
    assert_eq!(got[0], a0);
    assert_eq!(got[1]["capture"], "none");
    assert!(got[1].get("data").is_none(), "capture none keeps the envelope only");
    ws.send(&json!({"type": "unsubscribe", "id": "a"}));
    assert_eq!(
        ws.recv_until(WAIT, |f| f["type"] == "unsubscribed").pop().unwrap()["id"],
        "a"
    );
    let (a1, b1) = (
        event("session.ended", "sa", 1, None),
        event("session.ended", "sb", 1, None),
    );
    assert_eq!(
        post(&addr, None, "application/x-ndjson", &ndjson(&[a1, b1.clone()])).0,
        202
    );
    let got = ws.recv_until(WAIT, |f| f["session"] == "sb");
    assert_eq!(got.len(), 1, "nothing more for the unsubscribed one: {got:?}");
    assert_eq!(got[0]["id"], b1["id"]);
}

#[test]
fn an_emitter_sends_events_on_the_socket_and_eviction_is_marked_there_too() {
    let sb = Sandbox::new().with_env("AEP_BUFFER", "4");
    let daemon = sb.start();
    let addr = daemon.addr();
    let (mut emitter, _) = Ws::hello(&addr, None, "emitter");
    let flood: Vec<Value> = (0..6)
        .map(|seq| event("progress.status", "ws-evict", seq, None))
        .collect();
    for e in &flood {
        emitter.send(e);
    }
    let mut invalid = event("progress.status", "ws-evict", 9, None);
    invalid["aep"] = json!("0.2");
    emitter.send(&invalid);
    let refusal = emitter.recv_until(WAIT, |f| f["type"] == "error").pop().unwrap();
    assert_eq!(
        (refusal["code"].as_str(), &refusal["cause"]),
        (Some("invalid-event"), &invalid["id"])
    );
    let (mut ws, _) = Ws::hello(&addr, None, "consumer");
    ws.send(
        &json!({"type": "subscribe", "id": "ev", "filter": {"session": "ws-evict"},
                    "from": [{"session": "ws-evict", "epoch": 0, "seq": 0}]}),
    );
    let frames = ws.recv_until(WAIT, |f| f["seq"] == 5);
    assert_eq!(frames[0]["type"], "subscribed");
    assert_eq!(
        frames[1],
        json!({"type": "replay-exhausted", "sub": "ev", "session": "ws-evict", "earliest": {"epoch": 0, "seq": 2}})
    );
    let replayed: Vec<u64> = frames[2..].iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(replayed, [2, 3, 4, 5]);
}

#[test]
fn the_daemons_own_hook_events_reach_subscribers() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    let filter = enc(&json!({"session": SESSION, "type": ["run.*", "tool.*"]}).to_string());
    let sse = Sse::open(&addr, &format!("/stream?filter={filter}"), &[]);
    let (mut ws, _) = Ws::hello(&addr, None, "consumer");
    ws.send(&json!({"type": "subscribe", "id": "all", "filter": {}}));
    ws.recv_until(WAIT, |f| f["type"] == "subscribed");
    for hook in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        assert!(sb.hook(&real_payload("hooks-local", hook)).status.success());
    }
    let log = sb.log(SESSION);
    let got = sse.events(WAIT, |e| e.len() >= 4);
    let types: Vec<&str> = got.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["run.started", "tool.requested", "tool.completed", "run.finished"]
    );
    let frames = ws.recv_until(WAIT, |f| f["type"] == "run.finished");
    assert_eq!(frames, log, "every logged Event, in order, byte for byte the log's");
    let (_, _, body) = request(
        &addr,
        "GET",
        &format!(
            "/stream?live=0&filter={}",
            enc(&json!({"session": SESSION}).to_string())
        ),
        &[],
        b"",
    );
    let held: Vec<Value> = parse_sse(&body).into_iter().filter_map(|m| m.data).collect();
    assert_eq!(held, log, "and the replay buffer holds them");
}

#[test]
fn control_never_flows_on_an_unauthenticated_socket() {
    // control-auth-gate (live.js): no AEP_TOKEN, so no command is taken.
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    assert!(sb.hook(&real_payload("hooks-local", "agent_start")).status.success());
    let sse = Sse::open(
        &addr,
        &format!("/stream?filter={}", enc(&json!({"session": SESSION}).to_string())),
        &[],
    );
    let (mut sender, _) = Ws::hello(&addr, None, "consumer");
    let cmd = command(
        "control.attention.respond",
        SESSION,
        json!({"answer": {"option": "probe"}}),
    );
    sender.send(&cmd);
    let refusal = sender.recv_until(WAIT, |f| f["type"] == "error").pop().unwrap();
    assert_eq!(
        (refusal["code"].as_str(), &refusal["cause"]),
        (Some("unauthorized"), &cmd["id"])
    );
    // No ack, no command: what the session's stream carries next is a later hook's Event.
    assert!(sb.hook(&real_payload("hooks-local", "tool_call")).status.success());
    let last = sb.log(SESSION).pop().unwrap();
    let got = sse.events(WAIT, |e| e.last() == Some(&last));
    assert_eq!(got.last(), Some(&last), "the later hook's Event arrived");
    assert!(
        got.iter().all(|e| !e["type"].as_str().unwrap().starts_with("control.")),
        "no ack, no command: {got:?}"
    );
    assert!(sb
        .log(SESSION)
        .iter()
        .all(|e| !e["type"].as_str().unwrap().starts_with("control.")));
}

#[test]
fn authenticated_commands_reach_the_intake_once_and_foreign_sessions_get_no_route() {
    let sb = Sandbox::new().with_env("AEP_TOKEN", "t0k");
    let daemon = sb.start();
    let addr = daemon.addr();
    let token = Some("t0k");
    // control-behalf-refusal (live.js): a POSTed session has history but no route.
    let seeded = [
        event("session.started", "live-behalf", 0, None),
        event("run.started", "live-behalf", 1, Some(json!({"trigger": "user"}))),
    ];
    for e in &seeded {
        assert_eq!(post(&addr, token, "application/json", &e.to_string()).0, 202);
    }
    let (mut sender, _) = Ws::hello(&addr, token, "consumer");
    let cmd = command("control.pause", "live-behalf", json!({}));
    sender.send(&cmd);
    let refusal = sender.recv_until(WAIT, |f| f["type"] == "error").pop().unwrap();
    assert_eq!(
        (refusal["code"].as_str(), &refusal["cause"]),
        (Some("no-route"), &cmd["id"])
    );
    let from = enc(&json!([{"session": "live-behalf", "epoch": 0, "seq": 0}]).to_string());
    let auth = [("Authorization", "Bearer t0k")];
    let (_, _, body) = request(&addr, "GET", &format!("/stream?live=0&from={from}"), &auth, b"");
    let replay: Vec<Value> = parse_sse(&body).into_iter().filter_map(|m| m.data).collect();
    assert_eq!(
        replay,
        [seeded[1].clone()],
        "the refusal never enters the session's history"
    );

    // control-nack-unsupported and control-dedupe (live.js) on a session this daemon emits.
    let hook_auth = format!("Bearer {}", daemon.token);
    let (status, _) = http(
        &addr,
        "POST",
        "/hook",
        &[("Authorization", &hook_auth)],
        &real_payload("hooks-local", "agent_start"),
    );
    assert_eq!(status, 200);
    let filter = enc(&json!({"session": SESSION, "type": "control.*"}).to_string());
    let sse = Sse::open(&addr, &format!("/stream?filter={filter}"), &auth);
    let pause = command("control.pause", SESSION, json!({}));
    sender.send(&pause);
    // The retry comes once the first is decided (its ack logged).
    sb.wait_log(SESSION, "the first pause's ack", WAIT, |e| {
        e.iter().any(|e| e["cause"] == pause["id"])
    });
    sender.send(&pause);
    let acks = sse.events(WAIT, |e| e.iter().filter(|a| a["cause"] == pause["id"]).count() >= 3);
    let acks: Vec<&Value> = acks.iter().filter(|a| a["cause"] == pause["id"]).collect();
    let commands: Vec<&Value> = acks.iter().copied().filter(|a| a["type"] == "control.pause").collect();
    let nacks: Vec<&Value> = acks
        .iter()
        .copied()
        .filter(|a| a["type"] == "control.rejected")
        .collect();
    assert!(commands.is_empty(), "a command's cause is not its own id");
    assert_eq!(nacks.len(), 2, "the retry re-emits the recorded ack: {acks:?}");
    assert_eq!(nacks[0], nacks[1], "byte-identically: one decision");
    assert_eq!(nacks[0]["data"]["reason"], "unsupported");
    let logged: Vec<Value> = sb
        .log(SESSION)
        .into_iter()
        .filter(|e| e["cause"] == pause["id"])
        .collect();
    assert_eq!(logged.len(), 1, "one ack in the session's log");
    // No error for the retry: the next error the sender gets is the one a later refusal makes.
    let later = command("control.pause", "live-behalf", json!({}));
    sender.send(&later);
    let error = sender.recv_until(WAIT, |f| f["type"] == "error").pop().unwrap();
    assert_eq!(error["cause"], later["id"], "{error}");
}
