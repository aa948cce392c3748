//! Bounded memory and connections through the real binary: the replay buffer's byte bound and
//! the per-Event limit under a flood of large Events, the connection cap with its share kept
//! for hooks, the header-read timeout and the request time limit.

use crate::support;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::daemon::{accepted, http, real_payload, try_http, Daemon, DaemonEnd, Sandbox};
use support::endpoint::{enc, event, ndjson, parse_sse, post, request, Ws};
use support::wait::wait_until_seen;

const MIB: usize = 1 << 20;
const SESSION: &str = "1796007203184_6l7jh";

fn rss_mib(daemon: &Daemon) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.child.id())).unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb / 1024
}

fn health(daemon: &Daemon) -> Value {
    let (status, body) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// One Event of about `size` bytes.
fn large(session: &str, seq: u64, size: usize) -> Value {
    event(
        "x.test.blob.sent",
        session,
        seq,
        Some(json!({"blob": "z".repeat(size)})),
    )
}

#[test]
fn a_flood_of_large_events_stays_within_the_byte_bound() {
    let sb = Sandbox::new().with_env("AEP_BUFFER_BYTES", &(16 * MIB).to_string());
    let daemon = sb.start();
    let addr = daemon.addr();
    let before = rss_mib(&daemon);
    for seq in 0..80 {
        let (status, body) = post(
            &addr,
            None,
            "application/json",
            &large("flood", seq, 3 * MIB).to_string(),
        );
        assert_eq!(status, 202, "{body}");
    }
    let held = health(&daemon)["endpoint"]["buffer_bytes"].as_u64().unwrap() as usize;
    assert!(
        held <= 16 * MIB && held > 8 * MIB,
        "the buffer fills to its bound: {held}"
    );
    let rss = rss_mib(&daemon);
    assert!(
        rss < before + 80,
        "240 MiB of Events posted, the daemon grew from {before} to {rss} MiB"
    );
    // The newest are held; a resume from an evicted position is told so.
    let from = enc(&json!([{"session": "flood", "epoch": 0, "seq": 0}]).to_string());
    let (status, _, body) = request(&addr, "GET", &format!("/stream?live=0&from={from}"), &[], b"");
    assert_eq!(status, 200);
    let messages = parse_sse(&body);
    assert!(
        messages[0].comments[0].starts_with("replay-exhausted flood 0:"),
        "{:?}",
        messages[0]
    );
    let seqs: Vec<u64> = messages
        .iter()
        .filter_map(|m| m.data.as_ref())
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.last(), Some(&79));
    assert!(seqs.len() < 10, "{seqs:?}");
}

#[test]
fn an_event_over_the_per_event_limit_is_refused_on_every_binding() {
    let sb = Sandbox::new().with_env("AEP_MAX_EVENT", &MIB.to_string());
    let daemon = sb.start();
    let addr = daemon.addr();
    let big = large("s", 1, MIB + 10);
    let batch = ndjson(&[large("s", 0, 100), big.clone()]);
    let (status, body) = post(&addr, None, "application/x-ndjson", &batch);
    assert_eq!(status, 413, "{body}");
    assert_eq!(
        (
            body["error"].as_str(),
            body["line"].as_u64(),
            body["max_bytes"].as_u64()
        ),
        (Some("event-too-large"), Some(1), Some(MIB as u64))
    );
    assert!(!body["detail"].as_str().unwrap().contains("zzzz"), "no payload echoed");
    let (mut ws, _) = Ws::hello(&addr, None, "emitter");
    ws.send(&big);
    let frame = ws.recv(Duration::from_secs(20)).unwrap();
    assert_eq!(
        (frame["type"].as_str(), frame["code"].as_str(), &frame["cause"]),
        (Some("error"), Some("payload-too-large"), &big["id"])
    );
    let (status, _) = post(&addr, None, "application/json", &large("s", 0, 100).to_string());
    assert_eq!(status, 202, "the batch was refused whole; the small one alone is taken");
    let (_, _, body) = request(&addr, "GET", "/stream?live=0&from=all", &[], b"");
    assert_eq!(parse_sse(&body).iter().filter(|m| m.data.is_some()).count(), 1);
}

/// An SSE subscriber kept open on its own connection.
fn open_stream(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(format!("GET /stream HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "an observer slot");
    s
}

/// Whether the daemon closed `s` (EOF or reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// A connection that holds a reserved slot with a request under way (a hook whose body is still
/// coming), once the daemon has read its head. A silent connection's slot is freed as the
/// daemon closes it, not before: one made just then may find none and be closed, and is made
/// again.
fn hook_slot_busy(addr: &str, auth: &str) -> TcpStream {
    for _ in 0..10 {
        let mut s = TcpStream::connect(addr).unwrap();
        let head =
            format!("POST /hook HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {auth}\r\nContent-Length: 100\r\n\r\n{{");
        s.write_all(head.as_bytes()).unwrap();
        let held = wait_until_seen(
            "the daemon to read the hook's head, or close it",
            Duration::from_secs(20),
            || match DaemonEnd::of(&s) {
                Some(end) if end.held() && end.unread == 0 => Ok(true),
                Some(end) if end.state != 1 => Ok(false),
                end => Err(format!("its end: {end:?}")),
            },
        );
        if held {
            return s;
        }
    }
    panic!("no reserved slot came free for a busy hook in 10 tries");
}

#[test]
fn observers_at_the_cap_never_starve_hooks_and_the_cap_is_reported() {
    let sb = Sandbox::new()
        .with_env("AEP_MAX_CONNECTIONS", "12")
        .with_env("AEP_HOOK_CONNECTIONS", "4")
        .with_env("AEP_HEADER_TIMEOUT", "2s");
    let daemon = sb.start();
    let addr = daemon.addr();
    let listeners = daemon.sockets();
    // Waits until the daemon holds `n` connections: one a client closed is given back a moment
    // later, and the next step must not find its slot still taken.
    let holding = |n: usize| {
        wait_until_seen(
            &format!("the daemon to hold {n} connections"),
            Duration::from_secs(20),
            || match daemon.sockets() - listeners {
                held if held == n => Ok(()),
                held => Err(format!("it holds {held}")),
            },
        )
    };
    let streams: Vec<TcpStream> = (0..8).map(|_| open_stream(&addr)).collect();
    // The observers' share is taken: another observer gets a hook slot, which serves hooks only.
    let (status, _, body) = request(&addr, "GET", "/events", &[], b"");
    assert_eq!(status, 503, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"], "busy");
    // A hook still goes straight in: not spooled, logged at once.
    let out = sb.hook(&real_payload("hooks-local", "agent_start"));
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert_eq!(sb.spooled(), 0, "the hook was taken, not spooled");
    assert_eq!(sb.log(SESSION).len(), 2);
    // Silent sockets on every hook slot cannot keep a hook out: the oldest is closed for it.
    // Each is closed after a second of silence anyway: on a loaded machine the test may look
    // only after that, and then opens them again.
    holding(8);
    let mut silent = (0..10)
        .find_map(|_| {
            let silent: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(&addr).unwrap()).collect();
            if silent.iter().all(|s| accepted(s, Duration::from_secs(20))) {
                return Some(silent);
            }
            drop(silent);
            holding(8);
            None
        })
        .expect("four silent connections held at once in 10 tries");
    let out = sb.hook(&real_payload("hooks-local", "tool_call"));
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert_eq!((sb.spooled(), sb.log(SESSION).len()), (0, 3), "taken at once");
    assert!(
        closed_within(&mut silent[0], Duration::from_secs(20)),
        "the oldest silent one made room"
    );
    // Hook slots busy with requests (a body still coming) are not taken from anyone: a new
    // connection is closed at once, and the daemon says why.
    for s in &mut silent[1..] {
        assert!(
            closed_within(s, Duration::from_secs(20)),
            "a silent one on a hook slot is closed after its head timeout (1 s)"
        );
    }
    let auth = format!("Bearer {}", daemon.token);
    let busy: Vec<TcpStream> = (0..4).map(|_| hook_slot_busy(&addr, &auth)).collect();
    let mut over = TcpStream::connect(&addr).unwrap();
    assert!(closed_within(&mut over, Duration::from_secs(20)), "refused at the cap");
    drop(busy);
    // An observer slot's silent connection is closed after the header timeout (2 s).
    drop(streams);
    wait_until_seen(
        "every earlier connection closed",
        Duration::from_secs(20),
        || match try_http(&addr, "GET", "/healthz", &[], b"") {
            Some((200, body)) if serde_json::from_str::<Value>(&body).unwrap()["connections"]["open"] == 1 => Ok(()),
            answer => Err(format!("/healthz: {answer:?}")),
        },
    );
    let mut half = TcpStream::connect(&addr).unwrap();
    half.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t = Instant::now();
    assert!(closed_within(&mut half, Duration::from_secs(20)));
    assert!(t.elapsed() >= Duration::from_millis(1500), "{:?}", t.elapsed());
    let connections = &health(&daemon)["connections"];
    assert_eq!(
        (connections["max"].as_u64(), connections["hooks_reserved"].as_u64()),
        (Some(12), Some(4))
    );
    assert!(connections["refused"].as_u64().unwrap() >= 1, "{connections}");
    assert!(
        connections["silent_closed_for_hooks"].as_u64().unwrap() >= 1,
        "{connections}"
    );
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("connection cap reached"), "{stderr}");
}

#[test]
fn a_request_body_sent_too_slowly_gets_408() {
    let sb = Sandbox::new().with_env("AEP_HEADER_TIMEOUT", "1s");
    let daemon = sb.start();
    let mut s = TcpStream::connect(daemon.addr()).unwrap();
    let head = format!(
        "POST /events HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAEP-Version: 0.1\r\nContent-Length: 100\r\n\r\n{{",
        daemon.addr()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let t = Instant::now();
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    // Three header timeouts from its head, not one (a lower bound: load only lengthens it).
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
}
