//! The relay binding through the real binary, against a stub relay written here (the frames
//! of AEP-0003 §3.5/§4, nothing more) and against a second daemon acting as the relay side.

use crate::support;

use crate::support::free_port;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::daemon::{http, real_payload, Sandbox};
use support::endpoint::{command, Ws};
use support::wait::wait_until_seen;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

const SESSION: &str = "1796007203184_6l7jh";
const WAIT: Duration = Duration::from_secs(15);

/// The relay side of one connection from the daemon (plain, or over TLS).
struct Peer<S: Read + Write = TcpStream> {
    socket: WebSocket<S>,
    authorization: Option<String>,
}

type TlsStream = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

impl Peer {
    fn accept(listener: &TcpListener) -> Peer {
        listener.set_nonblocking(false).unwrap();
        let (stream, _) = listener.accept().expect("the daemon connects");
        stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        Peer::handshake(stream)
    }
}

impl Peer<TlsStream> {
    /// A relay behind TLS; `None` when the daemon gave up during the TLS handshake.
    fn accept_tls(listener: &TcpListener, config: &Arc<rustls::ServerConfig>) -> Option<Peer<TlsStream>> {
        let (stream, _) = listener.accept().expect("the daemon connects");
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut tls = rustls::StreamOwned::new(rustls::ServerConnection::new(config.clone()).unwrap(), stream);
        while tls.conn.is_handshaking() {
            if tls.conn.complete_io(&mut tls.sock).is_err() {
                return None;
            }
        }
        tls.sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        Some(Peer::handshake(tls))
    }
}

impl<S: Read + Write> Peer<S> {
    // The handshake callback's error type is tungstenite's, not ours to shrink.
    #[allow(clippy::result_large_err)]
    fn handshake(stream: S) -> Peer<S> {
        let mut authorization = None;
        let socket = tungstenite::accept_hdr(stream, |req: &Request, resp: Response| {
            authorization = req
                .headers()
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string());
            Ok(resp)
        })
        .map_err(|e| e.to_string())
        .expect("WebSocket handshake");
        Peer { socket, authorization }
    }

    fn send(&mut self, frame: &Value) {
        self.socket.send(Message::text(frame.to_string())).unwrap();
    }

    /// The next JSON frame within `timeout`; `None` on timeout or close.
    fn recv(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.socket.read() {
                Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// Events (frames with `aep`) until `done` holds for the list; our pings are answered.
    fn events_until(&mut self, timeout: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        let mut events = Vec::new();
        while !done(&events) {
            let Some(frame) = self.recv(deadline.saturating_duration_since(Instant::now())) else {
                break;
            };
            if frame["type"] == "ping" {
                self.send(&json!({"type": "pong", "t": frame["t"]}));
            } else if frame.get("aep").is_some() {
                events.push(frame);
            }
        }
        events
    }
}

fn hook(sb: &Sandbox, name: &str) {
    sb.hook_recorded(&real_payload("hooks-local", name));
}

#[test]
fn the_binding_says_hello_waits_for_the_relay_answers_and_takes_commands() {
    let stub = TcpListener::bind("127.0.0.1:0").unwrap();
    // A user and password in the URL are never shown nor stored.
    let url = format!("ws://relay-user:s3cret-pass@{}/socket", stub.local_addr().unwrap());
    let sb = Sandbox::new()
        .with_env("AEP_RELAY_URL", &url)
        .with_env("AEP_TOKEN", "relay-token")
        .with_env("AEP_PING_MS", "300");
    let daemon = sb.start();
    let mut relay = Peer::accept(&stub);
    assert_eq!(relay.authorization.as_deref(), Some("Bearer relay-token"));
    let hello = relay.recv(WAIT).expect("hello first");
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["versions"], json!(["0.1"]));
    assert_eq!(hello["role"], "emitter");
    assert_eq!(hello["identity"]["agent"], "cline");
    assert!(hello["identity"]["instance"].as_str().is_some_and(|i| !i.is_empty()));
    assert_eq!(hello["capabilities"]["capture"], json!(["metadata"]));
    assert_eq!(
        hello["capabilities"]["control"],
        json!({"accepts": [], "ack_window_ms": 10000})
    );
    // Events wait in the outbox until the relay's hello.
    hook(&sb, "agent_start");
    assert!(
        relay.recv(Duration::from_millis(600)).is_none(),
        "nothing before our hello"
    );
    relay.send(&json!({"type": "hello", "versions": ["0.1"], "role": "both", "identity": {"agent": "stub"}}));
    let got = relay.events_until(WAIT, |e| e.len() >= 2);
    assert_eq!(got, sb.log(SESSION), "in order, byte for byte what was logged");
    // Pings answered; unknown frames and error frames do not disturb it.
    relay.send(&json!({"type": "zigzag"}));
    relay.send(&json!({"type": "error", "code": "no-route", "detail": "stub says so", "cause": "x"}));
    relay.send(&json!({"type": "ping", "t": 7}));
    let pong = std::iter::from_fn(|| relay.recv(WAIT))
        .find(|f| f["type"] == "pong")
        .unwrap();
    assert_eq!(pong["t"], 7);
    let ping = std::iter::from_fn(|| relay.recv(WAIT))
        .find(|f| f["type"] == "ping")
        .expect("the binding pings");
    relay.send(&json!({"type": "pong", "t": ping["t"]}));
    // A command from the relay reaches the intake; its ack comes back as an Event.
    let cmd = command("control.pause", SESSION, json!({}));
    relay.send(&cmd);
    let ack = relay.events_until(WAIT, |e| !e.is_empty()).pop().unwrap();
    assert_eq!(
        (ack["type"].as_str(), &ack["cause"]),
        (Some("control.rejected"), &cmd["id"])
    );
    assert_eq!(ack["data"]["reason"], "unsupported");
    // The sender lost that ack and redelivers: the recorded ack goes to the relay again,
    // byte for byte, though its position was sent already (AEP-0004 §3, AEP-0003 §5).
    relay.send(&cmd);
    let again = relay.events_until(WAIT, |e| !e.is_empty()).pop();
    assert_eq!(again.as_ref(), Some(&ack), "the re-ack traverses the binding");
    // The relay goes away; a hook fires meanwhile; the binding comes back and resends.
    drop(relay);
    hook(&sb, "tool_call");
    let mut relay = Peer::accept(&stub);
    assert_eq!(
        relay.recv(WAIT).unwrap()["type"],
        "hello",
        "hello again on every connection"
    );
    relay.send(&json!({"type": "hello", "versions": ["0.1"], "role": "both"}));
    let log = sb.log(SESSION);
    let last = log.last().unwrap()["id"].clone();
    let resent = relay.events_until(WAIT, |e| e.iter().any(|x| x["id"] == last));
    assert!(resent.iter().any(|e| e["type"] == "tool.requested"), "{resent:?}");
    let (_, health) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["relay"]["connected"], true);
    // Every Event written counts (the first connection's, the resend, the re-ack), and
    // /metrics says the same; never the relay's URL or its credentials.
    let sent = health["relay"]["sent"].as_u64().unwrap();
    assert!(sent >= (got.len() + resent.len() + 2) as u64, "{health}");
    let (_, metrics) = http(&daemon.addr(), "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains(&format!("aep_cline_sink_sent_events_total{{sink=\"relay\"}} {sent}")),
        "{metrics}"
    );
    assert!(
        metrics.contains("aep_cline_sink_connected{sink=\"relay\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("ws://") && !metrics.contains("s3cret"), "{metrics}");
    assert_eq!(
        health["relay"]["url"],
        format!("ws://{}/socket", stub.local_addr().unwrap())
    );
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("stub says so"), "relay error frames are logged");
    assert!(!stderr.contains("relay-token"), "the token is never logged");
    assert!(!stderr.contains("s3cret-pass"), "{stderr}");
    let marks = std::fs::read_to_string(sb.log_dir.join("cline/.relay.json")).expect("the relay's marks");
    assert!(
        marks.contains("/socket") && !marks.contains("s3cret-pass") && !marks.contains("relay-user"),
        "{marks}"
    );
}

#[test]
fn a_full_outbox_drops_debug_and_info_first_counts_them_and_the_log_fills_the_gap() {
    let stub = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/socket", stub.local_addr().unwrap());
    let sb = Sandbox::new()
        .with_env("AEP_RELAY_URL", &url)
        .with_env("AEP_RELAY_OUTBOX", "2");
    let daemon = sb.start();
    let mut relay = Peer::accept(&stub);
    assert_eq!(relay.recv(WAIT).unwrap()["type"], "hello");
    for name in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        hook(&sb, name);
    }
    let (_, health) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["relay"]["outbox"], 2);
    assert_eq!(health["relay"]["dropped"]["debug_info"], 3, "{health}");
    relay.send(&json!({"type": "hello", "versions": ["0.1"], "role": "both"}));
    let log = sb.log(SESSION);
    let got = relay.events_until(WAIT, |e| e.len() >= log.len());
    let ids: HashSet<&Value> = got.iter().map(|e| &e["id"]).collect();
    assert!(
        log.iter().all(|e| ids.contains(&e["id"])),
        "every logged Event still reached the relay"
    );
}

/// A consumer of daemon B that reconnects after B restarts, resuming after what it saw.
struct Follower {
    addr: String,
    seen: Vec<Value>,
}

impl Follower {
    fn follow(&mut self, until: impl Fn(&[Value]) -> bool, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !until(&self.seen) && Instant::now() < deadline {
            let Ok(mut ws) = Ws::connect(&self.addr, Some("shared")) else {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            };
            ws.send(&json!({"type": "hello", "versions": ["0.1"], "role": "consumer"}));
            let mut last: BTreeMap<String, u64> = BTreeMap::new();
            for e in &self.seen {
                let seq = e["seq"].as_u64().unwrap();
                let s = last.entry(e["session"].as_str().unwrap().to_string()).or_insert(seq);
                *s = (*s).max(seq);
            }
            let from: Vec<Value> = last
                .iter()
                .map(|(s, q)| json!({"session": s, "epoch": 0, "seq": q}))
                .collect();
            let mut sub = json!({"type": "subscribe", "id": "f", "filter": {"agent": "cline"}});
            sub["from"] = if from.is_empty() { json!("all") } else { json!(from) };
            ws.send(&sub);
            while !ws.closed && !until(&self.seen) && Instant::now() < deadline {
                if let Some(frame) = ws.recv(Duration::from_millis(500)) {
                    if frame.get("aep").is_some() {
                        self.seen.push(frame);
                    }
                }
            }
        }
    }
}

#[test]
fn a_relay_down_for_thirty_seconds_loses_nothing() {
    // Daemon B is the relay side: its endpoint collects what daemon A's binding sends.
    let port = free_port();
    let b_addr = format!("127.0.0.1:{port}");
    let b_box = Sandbox::new()
        .with_env("AEP_TOKEN", "shared")
        .with_env("AEP_LISTEN", &b_addr);
    let b = b_box.start();
    let a_box = Sandbox::new()
        .with_env("AEP_RELAY_URL", &format!("ws://{b_addr}/socket"))
        .with_env("AEP_TOKEN", "shared")
        .with_env("AEP_PING_MS", "500")
        // Far fewer than the outage's Events: what the outbox drops comes back from the log.
        .with_env("AEP_RELAY_OUTBOX", "8");
    let a = a_box.start();
    let a_auth = format!("Bearer {}", a.token);
    let vendor_hook = |i: usize| {
        let body = json!({"hookName": "some_future_hook", "taskId": "t", "sessionContext": {"rootSessionId": SESSION}, "n": i});
        let (status, text) = http(
            &a.addr(),
            "POST",
            "/hook",
            &[("Authorization", &a_auth)],
            body.to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{text}");
    };
    let mut follower = Follower {
        addr: b_addr.clone(),
        seen: Vec::new(),
    };
    hook(&a_box, "agent_start");
    for i in 0..20 {
        vendor_hook(i);
    }
    let logged = a_box.log(SESSION).len();
    follower.follow(|seen| seen.len() >= logged, WAIT);
    assert_eq!(follower.seen.len(), logged, "phase one arrived live");

    b.signal("-KILL");
    drop(b);
    let down = Instant::now();
    let mut i = 20;
    while down.elapsed() < Duration::from_secs(30) {
        vendor_hook(i);
        i += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    hook(&a_box, "tool_call");
    let b = b_box.start();
    let log = a_box.log(SESSION);
    let want: HashSet<String> = log.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    let have =
        |seen: &[Value]| -> HashSet<String> { seen.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect() };
    follower.follow(|seen| have(seen).is_superset(&want), Duration::from_secs(40));
    let got = have(&follower.seen);
    let missing: Vec<&String> = want.difference(&got).collect();
    assert!(
        missing.is_empty(),
        "{} of {} Events never arrived: {missing:?}",
        missing.len(),
        want.len()
    );
    assert!(got.is_subset(&want), "nothing arrived that A did not log");
    assert!(follower.seen.iter().all(|e| e["agent"] == "cline"));
    let (_, health) = http(&a.addr(), "GET", "/healthz", &[], b"");
    let health: Value = serde_json::from_str(&health).unwrap();
    assert!(
        health["relay"]["dropped"]["debug_info"].as_u64().unwrap() > 100,
        "{health}"
    );
    drop(b);
}

#[test]
fn what_the_relay_lacked_when_the_daemon_stopped_is_resent_after_a_restart() {
    let port = free_port();
    let url = format!("ws://127.0.0.1:{port}/socket");
    let sb = Sandbox::new()
        .with_env("AEP_RELAY_URL", &url)
        .with_env("AEP_PING_MS", "300");
    // The relay is down: hooks are logged, the binding holds them, the daemon stops.
    let daemon = sb.start();
    for name in ["agent_start", "tool_call", "tool_result"] {
        hook(&sb, name);
    }
    let (status, _) = daemon.stop();
    assert!(status.success());
    let logged = sb.log(SESSION);
    assert_eq!(logged.len(), 4);
    let marks = std::fs::read_to_string(sb.log_dir.join("cline/.relay.json")).unwrap();
    assert!(
        marks.contains(SESSION) && marks.contains(&format!("127.0.0.1:{port}")),
        "{marks}"
    );
    // Restarted, the relay now up: everything of the last run arrives, then the new hook.
    let daemon = sb.start();
    let stub = TcpListener::bind(format!("127.0.0.1:{port}")).unwrap();
    let mut relay = Peer::accept(&stub);
    assert_eq!(relay.recv(WAIT).unwrap()["type"], "hello");
    relay.send(&json!({"type": "hello", "versions": ["0.1"], "role": "both"}));
    let got = relay.events_until(WAIT, |e| e.len() >= logged.len());
    assert_eq!(got, logged, "every Event the relay lacked, in order, byte for byte");
    hook(&sb, "agent_end");
    let next = relay.events_until(WAIT, |e| !e.is_empty());
    assert_eq!(next.last(), sb.log(SESSION).last());
    // Once the relay confirms everything (a pong), a restart resends nothing more.
    let log = sb.log(SESSION);
    wait_until_seen("the relay's confirmation of the last Event", WAIT, || {
        let marks: Value =
            serde_json::from_str(&std::fs::read_to_string(sb.log_dir.join("cline/.relay.json")).unwrap()).unwrap();
        if marks["sessions"][SESSION]["confirmed"]["seq"] == log.last().unwrap()["seq"] {
            return Ok(());
        }
        // The relay is served meanwhile (pings answered) for 200 ms before the next look.
        relay.events_until(Duration::from_millis(200), |_| false);
        Err(format!("never confirmed: {marks}"))
    });
    drop(relay);
    let (status, _) = daemon.stop();
    assert!(status.success());
    let _daemon = sb.start();
    let mut relay = Peer::accept(&stub);
    assert_eq!(relay.recv(WAIT).unwrap()["type"], "hello");
    relay.send(&json!({"type": "hello", "versions": ["0.1"], "role": "both"}));
    assert!(
        relay.events_until(Duration::from_secs(2), |e| !e.is_empty()).is_empty(),
        "nothing to resend"
    );
}

#[test]
fn a_relay_url_without_a_path_is_refused_with_what_to_write() {
    let sb = Sandbox::new();
    let out = sb.run(&["daemon"], &[("AEP_RELAY_URL", "ws://127.0.0.1:8787")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("ws://127.0.0.1:8787/socket"), "{stderr}");
}

/// A private CA and a certificate it signed for `localhost` and 127.0.0.1.
fn private_ca(dir: &std::path::Path) -> (std::path::PathBuf, Arc<rustls::ServerConfig>) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "aep test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, ca.pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
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

#[test]
fn a_wss_relay_is_reached_through_a_private_ca_and_a_bad_certificate_names_the_host() {
    let sb = Sandbox::new();
    let (ca, server) = private_ca(sb.root.path());
    let stub = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("wss://localhost:{}/socket", stub.local_addr().unwrap().port());
    // Without the CA the system's roots do not vouch for the relay: a clear error, no hello.
    let daemon = Sandbox {
        env: vec![
            ("AEP_RELAY_URL".into(), url.clone()),
            ("AEP_RELAY_TOKEN".into(), "tls-relay-token".into()),
        ],
        ..Sandbox::new()
    };
    let running = daemon.start();
    assert!(
        Peer::accept_tls(&stub, &server).is_none(),
        "the daemon refused the certificate"
    );
    // `/healthz` and `doctor` say the real cause, not the token.
    let why = wait_until_seen("the relay error in /healthz", WAIT, || {
        let (_, health) = http(&running.addr(), "GET", "/healthz", &[], b"");
        let health: Value = serde_json::from_str(&health).unwrap();
        match health["relay"]["last_error"].as_str() {
            Some(why) => Ok(why.to_string()),
            None => Err(format!("no relay error in /healthz: {health}")),
        }
    });
    assert!(why.contains("TLS certificate of the relay at localhost"), "{why}");
    let doctor = String::from_utf8_lossy(&daemon.run(&["doctor"], &[]).stdout).into_owned();
    assert!(
        doctor.contains("TLS certificate of the relay at localhost") && !doctor.contains("is its token"),
        "{doctor}"
    );
    let (_, stderr) = running.stop();
    assert!(
        stderr.contains("TLS certificate of the relay at localhost") && stderr.contains("AEP_RELAY_CA"),
        "{stderr}"
    );
    // With AEP_RELAY_CA it connects over TLS and emits.
    let sb = sb
        .with_env("AEP_RELAY_URL", &url)
        .with_env("AEP_RELAY_CA", ca.to_str().unwrap())
        .with_env("AEP_RELAY_TOKEN", "tls-relay-token");
    let _daemon = sb.start();
    let mut relay = Peer::accept_tls(&stub, &server).expect("a TLS connection");
    assert_eq!(relay.authorization.as_deref(), Some("Bearer tls-relay-token"));
    assert_eq!(relay.recv(WAIT).unwrap()["type"], "hello");
    relay.send(&json!({"type": "hello", "versions": ["0.1"], "role": "both"}));
    hook(&sb, "agent_start");
    let got = relay.events_until(WAIT, |e| e.len() >= 2);
    assert_eq!(got, sb.log(SESSION));
    // A CA file that is not PEM is refused at start, naming the setting.
    std::fs::write(&ca, "not a certificate").unwrap();
    let out = sb.run(
        &["daemon"],
        &[("AEP_RELAY_URL", &url), ("AEP_RELAY_CA", ca.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("AEP_RELAY_CA"), "{stderr}");
}
