//! History survives a restart: the embedded endpoint serves a replay from the session logs
//! when the position is older than what memory holds, or the session is no longer in memory
//! at all, then joins the live feed with no gap and no duplicate (AEP-0003 §3.3, §5).

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::daemon::{http, real_payload, Daemon, Sandbox};
use support::endpoint::{enc, parse_sse, request, Sse, Ws};
use support::wait::{wait_until, wait_until_seen};

const SESSION: &str = "1796007203184_6l7jh";
const WAIT: Duration = Duration::from_secs(30);

fn hook(sb: &Sandbox, name: &str) {
    sb.hook_recorded(&real_payload("hooks-local", name));
}

/// A vendor hook for `session` straight to the daemon's door: one logged Event, fast.
fn vendor_hook(daemon: &Daemon, session: &str, n: usize) {
    post_hook(&daemon.addr(), &daemon.token, session, n);
}

fn post_hook(addr: &str, token: &str, session: &str, n: usize) {
    let body =
        json!({"hookName": "some_future_hook", "taskId": "t", "sessionContext": {"rootSessionId": session}, "n": n});
    let auth = format!("Bearer {token}");
    let (status, text) = http(
        addr,
        "POST",
        "/hook",
        &[("Authorization", &auth)],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
}

/// `GET /stream?live=0&...`: the replayed Events and the comment lines.
fn replay(daemon: &Daemon, query: &str, headers: &[(&str, &str)]) -> (Vec<Value>, Vec<String>) {
    let (status, _, body) = request(&daemon.addr(), "GET", &format!("/stream?live=0&{query}"), headers, b"");
    assert_eq!(status, 200, "{body}");
    let messages = parse_sse(&body);
    let comments = messages.iter().flat_map(|m| m.comments.clone()).collect();
    let events = messages.into_iter().filter_map(|m| m.data).collect();
    (events, comments)
}

fn ids(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["id"].as_str().unwrap()).collect()
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[test]
fn after_a_restart_every_logged_event_is_replayed_in_order() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    for name in ["agent_start", "tool_call", "tool_result"] {
        hook(&sb, name);
    }
    for i in 0..5 {
        vendor_hook(&daemon, "other", i);
    }
    let (_, stderr) = daemon.stop();
    assert!(!stderr.contains("ERROR"), "{stderr}");
    let (first, other) = (sb.log(SESSION), sb.log("other"));
    assert!(first.len() >= 4 && other.len() >= 5);

    let daemon = sb.start();
    let (events, comments) = replay(&daemon, "from=all", &[]);
    assert!(
        !comments.iter().any(|c| c.starts_with("replay-exhausted")),
        "{comments:?}"
    );
    assert_eq!(comments.last().map(String::as_str), Some("replay-complete"));
    let of = |s: &str| -> Vec<Value> { events.iter().filter(|e| e["session"] == s).cloned().collect() };
    assert_eq!(of(SESSION), first, "every logged Event, in order, byte for byte");
    assert_eq!(of("other"), other);
    assert_eq!(events.len(), first.len() + other.len());

    // A position, Last-Event-ID, and a capture ceiling: the log serves them as memory would.
    let from = enc(&json!([{"session": SESSION, "epoch": 0, "seq": 1}]).to_string());
    let (events, _) = replay(&daemon, &format!("from={from}"), &[]);
    assert_eq!(ids(&events), ids(&first[2..]));
    let (status, _, body) = request(
        &daemon.addr(),
        "GET",
        "/stream?live=0",
        &[("Last-Event-ID", &format!("{SESSION}:0:2"))],
        b"",
    );
    assert_eq!(status, 200);
    let got: Vec<Value> = parse_sse(&body).into_iter().filter_map(|m| m.data).collect();
    assert_eq!(ids(&got), ids(&first[3..]));
    let (events, _) = replay(&daemon, "from=all&capture=none", &[]);
    assert!(events.iter().all(|e| e.get("data").is_none()), "down-leveled to none");
    assert_eq!(events.len(), first.len() + other.len());

    // The WebSocket replays the same, then follows live with nothing twice and nothing missing.
    let (mut ws, _) = Ws::hello(&daemon.addr(), None, "consumer");
    ws.send(&json!({"type": "subscribe", "id": "h", "from": "all", "filter": {"session": SESSION}}));
    let frames = ws.recv_until(WAIT, |f| f["seq"].as_u64() == Some(first.len() as u64 - 1));
    let replayed: Vec<Value> = frames.into_iter().filter(|f| f.get("aep").is_some()).collect();
    assert_eq!(replayed, first);
    hook(&sb, "agent_end");
    let log = sb.log(SESSION);
    let live = ws.recv_until(WAIT, |f| f.get("aep").is_some());
    assert_eq!(
        live.last().unwrap(),
        log.last().unwrap(),
        "the next live Event follows at once"
    );
    // Nothing twice: the next Event on the socket is the one a later hook makes.
    vendor_hook(&daemon, SESSION, 0);
    let later = sb.log(SESSION);
    let next: Vec<Value> = ws
        .recv_until(WAIT, |f| f.get("aep").is_some())
        .into_iter()
        .filter(|f| f.get("aep").is_some())
        .collect();
    assert_eq!(
        next,
        later[log.len()..],
        "the later hook's Event, and nothing before it"
    );
}

#[test]
fn a_quiet_session_the_registry_let_go_resumes_from_its_log() {
    let sb = Sandbox::new()
        .with_env("AEP_SESSION_GRACE", "100ms")
        .with_env("AEP_SESSION_IDLE", "300ms");
    let daemon = sb.start();
    for name in ["agent_start", "tool_call", "tool_result"] {
        hook(&sb, name);
    }
    let log = sb.log(SESSION);
    // The registry lets the idle session go, and the endpoint forgets it with it.
    wait_until("the session to leave memory", WAIT, || {
        let (_, health) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
        (serde_json::from_str::<Value>(&health).unwrap()["sessions"] == 0).then_some(())
    });
    let (mut ws, _) = Ws::hello(&daemon.addr(), None, "consumer");
    ws.send(&json!({"type": "subscribe", "id": "q", "from": [{"session": SESSION, "epoch": 0, "seq": 0}]}));
    let frames = ws.recv_until(WAIT, |f| f["id"] == log.last().unwrap()["id"]);
    assert!(!frames.iter().any(|f| f["type"] == "replay-exhausted"), "{frames:?}");
    let events: Vec<Value> = frames.into_iter().filter(|f| f.get("aep").is_some()).collect();
    assert_eq!(events, log[1..]);
    // The session speaks again: the live Event follows the replay without a repeat.
    hook(&sb, "agent_end");
    let next = ws.recv_until(WAIT, |f| f.get("aep").is_some()).pop().unwrap();
    assert_eq!(&next, sb.log(SESSION).last().unwrap());
    assert_eq!(next["seq"].as_u64(), Some(log.len() as u64));
}

#[test]
fn replay_exhausted_only_when_the_log_no_longer_has_the_position() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    for i in 0..8 {
        vendor_hook(&daemon, SESSION, i);
    }
    drop(daemon);
    // session.started and 8 vendor Events; someone cut the head off the log (seq 0 to 4).
    let path = aep_cline::lane::Journal::new(&sb.log_dir).path(SESSION);
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: String = text.lines().skip(5).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, kept).unwrap();
    let daemon = sb.start();
    let from = |seq: u64| enc(&json!([{"session": SESSION, "epoch": 0, "seq": seq}]).to_string());
    let (events, comments) = replay(&daemon, &format!("from={}", from(1)), &[]);
    assert_eq!(comments[0], format!("replay-exhausted {SESSION} 0:5"), "{comments:?}");
    assert_eq!(seqs(&events), [5, 6, 7, 8]);
    let (events, comments) = replay(&daemon, &format!("from={}", from(5)), &[]);
    assert!(
        !comments.iter().any(|c| c.starts_with("replay-exhausted")),
        "{comments:?}"
    );
    assert_eq!(seqs(&events), [6, 7, 8]);
    let (events, comments) = replay(&daemon, "from=all", &[]);
    assert!(
        !comments.iter().any(|c| c.starts_with("replay-exhausted")),
        "replay-all names no position"
    );
    assert_eq!(seqs(&events), [5, 6, 7, 8]);
    // A session with no log at all is simply absent.
    let (events, comments) = replay(
        &daemon,
        &format!("from={}", enc(&json!([{"session": "nobody", "seq": 3}]).to_string())),
        &[],
    );
    assert!(events.is_empty() && comments == ["replay-complete"], "{comments:?}");
}

#[test]
fn a_replay_joins_live_hooks_firing_meanwhile_without_a_gap_or_a_repeat() {
    let sb = Sandbox::new().with_env("AEP_BUFFER", "50");
    let daemon = sb.start();
    for i in 0..400 {
        vendor_hook(&daemon, SESSION, i);
    }
    drop(daemon);
    // After a restart the buffer holds only the newest 50 of what follows: the rest of the
    // replay must come from the log, while hooks keep firing.
    let daemon = sb.start();
    let addr = daemon.addr();
    let token = daemon.token.clone();
    let writer = std::thread::spawn(move || {
        for i in 400..700 {
            post_hook(&addr, &token, SESSION, i);
        }
    });
    // Subscribed while hooks keep firing: once the writer's first one is in.
    sb.wait_log(SESSION, "the writer's first hook", WAIT, |e| e.len() > 401);
    let sse = Sse::open(&daemon.addr(), "/stream?from=all", &[]);
    let (mut ws, _) = Ws::hello(&daemon.addr(), None, "consumer");
    ws.send(&json!({"type": "subscribe", "id": "j", "from": [{"session": SESSION, "epoch": 0, "seq": 99}]}));
    writer.join().unwrap();
    let log = sb.log(SESSION);
    assert_eq!(log.len(), 701, "session.started, then one Event per hook");
    let last = log.last().unwrap()["id"].clone();
    let over_sse = sse.events(WAIT, |e| e.last().is_some_and(|x| x["id"] == last));
    assert_eq!(
        seqs(&over_sse),
        (0..701).collect::<Vec<_>>(),
        "SSE: every position once, in order"
    );
    let over_ws: Vec<Value> = ws
        .recv_until(WAIT, |f| f["id"] == last)
        .into_iter()
        .filter(|f| f.get("aep").is_some())
        .collect();
    assert_eq!(
        seqs(&over_ws),
        (100..701).collect::<Vec<_>>(),
        "WebSocket: after 99, once each"
    );
}

#[test]
fn log_retention_removes_only_ended_sessions_logs_older_than_the_period() {
    let sb = Sandbox::new();
    let dir = sb.log_dir.join("cline");
    std::fs::create_dir_all(&dir).unwrap();
    let line = |s: &str, ty: &str, seq: u64| format!("{}\n", json!({"type": ty, "session": s, "seq": seq}));
    for (name, ends, age) in [
        ("old-ended", true, "40 days ago"),
        ("new-ended", true, "10 days ago"),
        ("old-open", false, "40 days ago"),
    ] {
        let path = dir.join(format!("{name}.jsonl"));
        let mut text = line(name, "session.started", 0);
        if ends {
            text.push_str(&line(name, "session.ended", 1));
        }
        std::fs::write(&path, text).unwrap();
        let touched = std::process::Command::new("touch")
            .args(["-d", age])
            .arg(&path)
            .status()
            .unwrap();
        assert!(touched.success());
    }
    let daemon = Sandbox {
        env: vec![("AEP_LOG_RETAIN".into(), "30d".into())],
        ..sb
    };
    let running = daemon.start();
    wait_until("old-ended.jsonl removed (checked at start)", WAIT, || {
        (!dir.join("old-ended.jsonl").exists()).then_some(())
    });
    assert!(dir.join("new-ended.jsonl").exists(), "younger than the period");
    assert!(
        dir.join("old-open.jsonl").exists(),
        "never ended: not the retention's to remove"
    );
    // No evidence of life for 40 days: the reconciler ends it (README "When does a session end").
    let ended = sb_log_wait(&dir.join("old-open.jsonl"));
    assert_eq!(ended["data"]["reason"], "timeout");
    let (events, _) = replay(&running, "from=all", &[]);
    let sessions: Vec<&str> = events.iter().map(|e| e["session"].as_str().unwrap()).collect();
    assert_eq!(
        sessions,
        ["new-ended", "new-ended", "old-open", "old-open"],
        "the least recently written first (the reconciler just wrote old-open); the old ended one is gone"
    );
    // The removed session speaks again (Cline resumes old tasks): it goes on past its old
    // positions, where every consumer still takes its Events for new ones (AEP-0001 §7).
    vendor_hook(&running, "old-ended", 0);
    let resumed = daemon.log("old-ended");
    assert_eq!(
        seqs(&resumed),
        (2..2 + resumed.len() as u64).collect::<Vec<_>>(),
        "after the removed log's last position (0, 1)"
    );
    let log = dir.join("old-ended.jsonl");
    let checked = daemon.run(&["validate", log.to_str().unwrap()], &[]);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stdout));
    let (_, stderr) = running.stop();
    assert!(stderr.contains("removed the logs"), "{stderr}");
    let bad = daemon.run(&["daemon"], &[("AEP_LOG_RETAIN", "a month")]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("AEP_LOG_RETAIN"), "{stderr}");
}

/// Waits for a log to end with `session.ended` and returns that Event.
fn sb_log_wait(path: &std::path::Path) -> Value {
    wait_until_seen(&format!("{} to end", path.display()), WAIT, || {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        match text.lines().last().and_then(|l| serde_json::from_str::<Value>(l).ok()) {
            Some(last) if last["type"] == "session.ended" => Ok(last),
            _ => Err(format!("it holds: {text}")),
        }
    })
}

/// A real hook of the session fired again later (`cline --id` resumes a session: its hooks are
/// new firings, with their own times, so the delivery id differs).
fn hook_later(sb: &Sandbox, name: &str, timestamp: &str) {
    let mut payload: Value = serde_json::from_slice(&real_payload("hooks-local", name)).unwrap();
    payload["timestamp"] = json!(timestamp);
    sb.hook_recorded(&serde_json::to_vec(&payload).unwrap());
}

/// A session that ended (here by a person's `aep-cline end`; the reconciler's end of a session
/// whose client left writes the same `session.ended`) and that Cline takes up again later
/// (`cline --id`) goes on in the same log, past the old positions: a new run after the end,
/// positions that only grow, no id twice, the session shown running and commandable again; its
/// next end closes the run, and the session, ended once, never ends twice (AEP-0002 §2).
#[test]
fn a_session_cline_takes_up_again_after_its_end_goes_on_past_the_old_positions() {
    let sb = Sandbox::new();
    let _daemon = sb.start();
    for name in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        hook(&sb, name);
    }
    let out = sb.run(&["end", SESSION], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ended = sb.log(SESSION);
    assert_eq!(ended.last().unwrap()["type"], "session.ended", "{ended:?}");
    assert_eq!(sb.sessions_json()[SESSION]["state"], "ended");
    let last = ended.last().unwrap()["seq"].as_u64().unwrap();

    hook_later(&sb, "agent_start", "2026-11-30T03:10:00.000Z");
    let log = sb.log(SESSION);
    let after = &log[ended.len()..];
    assert_eq!(after[0]["type"], "run.started", "{after:?}");
    assert!(after.iter().all(|e| e["seq"].as_u64() > Some(last)), "{after:?}");
    assert_eq!(sb.sessions_json()[SESSION]["state"], "running");
    // Open again, it takes commands again: ending it closes the resumed run.
    let out = sb.run(&["end", SESSION], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = sb.log(SESSION);
    let closed: Vec<&Value> = log[ended.len()..]
        .iter()
        .filter(|e| e["type"] == "run.cancelled")
        .collect();
    assert_eq!(closed.len(), 1, "{log:?}");
    let ends = log.iter().filter(|e| e["type"] == "session.ended").count();
    assert_eq!(ends, 1, "ended once, ever: {log:?}");
    assert_eq!(sb.sessions_json()[SESSION]["state"], "ended");
    let seqs: Vec<u64> = log.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "positions only grow: {seqs:?}");
    let ids: std::collections::BTreeSet<&str> = log.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids.len(), log.len(), "no id twice");
    support::daemon::assert_valid_stream(&log);
}
