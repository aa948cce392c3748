//! The JetStream sink and `tail --nats` through the real binary against a real `nats-server`
//! (Debian's package; `.ci/run` installs it) with JetStream on file storage, each test its own
//! server on a free loopback port and a temporary store: publish, the message form (subject,
//! `Nats-Msg-Id`, the CloudEvent), a server killed and restarted mid-run, a daemon restarted
//! while the server is away, dedupe of a redelivery, a dead server at start, token
//! authentication, malformed settings, and the round trip back through `tail --nats`.

use crate::support;

use async_nats::jetstream;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::daemon::{http, real_payload, Daemon, Sandbox};
pub use support::nats_server::{free_port, runtime, Server};
use support::wait::{wait_until_seen, wait_until_seen_every};

pub const SESSION: &str = "1796007203184_6l7jh";
pub const WAIT: Duration = Duration::from_secs(40);

/// One message of the stream.
#[derive(Debug)]
struct Stored {
    subject: String,
    msg_id: String,
    ce: Map<String, Value>,
}

/// Every message of stream `AEP`, read back with the official client (`nats://TOKEN@host`
/// for a token server).
fn stored(url: &str) -> Vec<Stored> {
    runtime().block_on(async {
        let connected = match url.strip_prefix("nats://").and_then(|rest| rest.split_once('@')) {
            Some((token, host)) => {
                async_nats::ConnectOptions::with_token(token.to_string())
                    .connect(format!("nats://{host}"))
                    .await
            }
            None => async_nats::connect(url).await,
        };
        let Ok(client) = connected else {
            return Vec::new();
        };
        let js = jetstream::new(client);
        let Ok(mut stream) = js.get_stream("AEP").await else {
            return Vec::new();
        };
        let last = stream.info().await.unwrap().state.last_sequence;
        let mut out = Vec::new();
        for seq in 1..=last {
            let Ok(m) = stream.get_raw_message(seq).await else {
                continue;
            };
            let msg_id = m
                .headers
                .get("Nats-Msg-Id")
                .map(|v| v.as_str().to_string())
                .unwrap_or_default();
            out.push(Stored {
                subject: m.subject.to_string(),
                msg_id,
                ce: serde_json::from_slice(&m.payload).unwrap(),
            });
        }
        out
    })
}

/// Polls the stream until it holds a message for every id in `want`.
/// Each look connects and reads the whole stream: every 200 ms.
fn wait_stream(url: &str, want: &HashSet<String>, within: Duration) -> Vec<Stored> {
    let what = format!("the stream to hold {} Events", want.len());
    wait_until_seen_every(&what, within, Duration::from_millis(200), || {
        let have = stored(url);
        let ids: HashSet<String> = have.iter().map(|m| m.ce["id"].as_str().unwrap().to_string()).collect();
        if ids.is_superset(want) {
            return Ok(have);
        }
        let missing: Vec<&String> = want.difference(&ids).collect();
        Err(format!("the stream lacks {} Events: {missing:?}", missing.len()))
    })
}

fn ids(events: &[Value]) -> HashSet<String> {
    events.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect()
}

fn canonical(v: &Value) -> String {
    aep_core::digest::canonical_json(v)
}

/// What [`nats_box`]'s daemon calls its host: its subjects' host token.
const HOST: &str = "ci.runner";

fn nats_box(server: &Server) -> Sandbox {
    Sandbox::new()
        .with_env("AEP_NATS_URL", &server.url())
        .with_env("AEP_HOST", HOST)
        .with_env("RUST_LOG", "warn")
}

/// A vendor hook: one Event each (its body differs, so its delivery id too).
pub fn vendor_hook(daemon: &Daemon, session: &str, n: usize) {
    let body =
        json!({"hookName": "some_future_hook", "taskId": "t", "sessionContext": {"rootSessionId": session}, "n": n});
    let auth = format!("Bearer {}", daemon.token);
    let (status, text) = http(
        &daemon.addr(),
        "POST",
        "/hook",
        &[("Authorization", &auth)],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
}

pub fn health(daemon: &Daemon) -> Value {
    let (status, body) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    assert_eq!(status, 200);
    serde_json::from_str(&body).unwrap()
}

fn wait_health(daemon: &Daemon, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until_seen(what, WAIT, || {
        let h = health(daemon);
        if done(&h["nats"]) {
            Ok(h)
        } else {
            Err(format!("/healthz nats: {}", h["nats"]))
        }
    })
}

#[test]
fn every_event_lands_once_as_its_cloudevent_through_a_server_kill_and_a_daemon_restart() {
    let mut server = Server::start(&[]);
    // A small outbox: what the outages leave out of it comes back from the logs.
    let sandbox = nats_box(&server).with_env("AEP_NATS_OUTBOX", "8");
    let daemon = sandbox.start();
    assert!(sandbox
        .hook(&real_payload("hooks-local", "agent_start"))
        .status
        .success());
    for n in 0..20 {
        vendor_hook(&daemon, SESSION, n);
    }
    let log = sandbox.log(SESSION);
    let stream = wait_stream(&server.url(), &ids(&log), WAIT);
    assert_eq!(stream.len(), log.len(), "each Event once");
    for (message, event) in stream.iter().zip(&log) {
        // Under its own host (escaped like every token), so permissions can confine it.
        assert_eq!(message.subject, format!("aep.ci%2Erunner.cline.{SESSION}"));
        assert!(event["source"].as_str().unwrap().starts_with(&format!("aep://{HOST}/")));
        assert_eq!(
            message.msg_id,
            format!(
                "{} {}",
                event["source"].as_str().unwrap(),
                event["id"].as_str().unwrap()
            )
        );
        aep_core::cloudevents::check(&message.ce).unwrap();
        assert_eq!(
            message.ce["type"],
            format!("dev.aep.{}", event["type"].as_str().unwrap())
        );
        let back = aep_core::cloudevents::inverse(&message.ce).unwrap();
        assert_eq!(
            canonical(&Value::Object(back.event)),
            canonical(event),
            "lossless, in log order"
        );
    }

    // The server dies (no clean shutdown); hooks go on being answered meanwhile.
    server.kill();
    for n in 20..50 {
        vendor_hook(&daemon, SESSION, n);
    }
    wait_health(&daemon, "the sink notices the server is gone", |n| {
        n["connected"] == false
    });
    server.restart();
    let log = sandbox.log(SESSION);
    let stream = wait_stream(&server.url(), &ids(&log), WAIT);
    assert_eq!(
        ids(&stream.iter().map(|m| Value::Object(m.ce.clone())).collect::<Vec<_>>()).len(),
        stream.len(),
        "no Event twice in the stream"
    );
    assert!(
        wait_health(&daemon, "resent from the logs", |n| n["from_log"].as_u64() > Some(0))["nats"]["resends"].as_u64()
            > Some(0)
    );

    // The server goes away again, and the daemon is restarted before it is back: the marks
    // (.nats.json) say what it lacked.
    server.kill();
    for n in 50..60 {
        vendor_hook(&daemon, SESSION, n);
    }
    let (status, _) = daemon.stop();
    assert!(status.success());
    assert!(sandbox.log_dir.join("cline/.nats.json").exists());
    server.restart();
    let daemon = sandbox.start();
    vendor_hook(&daemon, SESSION, 60);
    let log = sandbox.log(SESSION);
    let stream = wait_stream(&server.url(), &ids(&log), WAIT);
    let stored_ids: Vec<String> = stream
        .iter()
        .map(|m| m.ce["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        stored_ids.len(),
        log.len(),
        "nothing lost, nothing twice: {} stored, {} logged",
        stored_ids.len(),
        log.len()
    );
    // Per session the stream keeps the log's order.
    let seqs: Vec<u64> = stream.iter().map(|m| m.ce["aepsequence"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[test]
fn a_redelivery_is_dropped_by_the_servers_dedupe() {
    let server = Server::start(&[]);
    let sandbox = nats_box(&server);
    let daemon = sandbox.start();
    for n in 0..10 {
        vendor_hook(&daemon, SESSION, n);
    }
    let log = sandbox.log(SESSION);
    wait_stream(&server.url(), &ids(&log), WAIT);
    wait_health(&daemon, "everything confirmed", |n| n["pending"] == 0);
    daemon.stop();
    // As if no ack had been recorded: the restarted daemon publishes the whole log again.
    let marks = sandbox.log_dir.join("cline/.nats.json");
    let mut recorded: Value = serde_json::from_slice(&std::fs::read(&marks).unwrap()).unwrap();
    for mark in recorded["sessions"].as_object_mut().unwrap().values_mut() {
        mark.as_object_mut().unwrap().remove("confirmed");
    }
    std::fs::write(&marks, recorded.to_string()).unwrap();
    let daemon = sandbox.start();
    let h = wait_health(&daemon, "the redelivery is acked as duplicates", |n| {
        n["duplicates"].as_u64() == Some(log.len() as u64)
    });
    assert_eq!(h["nats"]["resends"].as_u64(), Some(log.len() as u64));
    assert_eq!(
        stored(&server.url()).len(),
        log.len(),
        "the stream holds each Event once"
    );
}

#[test]
fn a_dead_server_at_start_leaves_the_hooks_served_and_the_sink_catches_up() {
    let port = free_port();
    let sandbox = Sandbox::new()
        .with_env("AEP_NATS_URL", &format!("nats://127.0.0.1:{port}"))
        .with_env("RUST_LOG", "warn");
    let daemon = sandbox.start();
    for n in 0..5 {
        vendor_hook(&daemon, SESSION, n);
    }
    let h = wait_health(&daemon, "the sink says why it cannot publish", |n| {
        !n["last_error"].is_null()
    });
    assert_eq!(h["nats"]["connected"], false);
    assert!(
        h["nats"]["last_error"].as_str().unwrap().contains("cannot connect"),
        "{}",
        h["nats"]
    );
    let doctor = sandbox.run(&["doctor"], &[]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("jetstream") && said.contains("not publishing"), "{said}");
    let dir = tempfile::tempdir().unwrap();
    let _server = Server::spawn(port, dir.path().join("js"), Vec::new());
    wait_stream(&format!("nats://127.0.0.1:{port}"), &ids(&sandbox.log(SESSION)), WAIT);
}

#[test]
fn a_token_server_takes_the_right_token_and_the_wrong_one_is_said() {
    let server = Server::start(&["--auth", "s3cret-token"]);
    let url = format!("nats://s3cret-token@127.0.0.1:{}", server.port);
    let wrong = Sandbox::new()
        .with_env("AEP_NATS_URL", &server.url())
        .with_env("AEP_NATS_TOKEN", "wrong")
        .with_env("RUST_LOG", "warn");
    let daemon = wrong.start();
    vendor_hook(&daemon, SESSION, 0);
    let h = wait_health(&daemon, "the refusal is said", |n| !n["last_error"].is_null());
    let error = h["nats"]["last_error"].as_str().unwrap().to_lowercase();
    assert!(error.contains("authoriz"), "{error}");
    assert!(
        !h.to_string().contains("wrong") || !error.contains("wrong"),
        "no token in /healthz"
    );
    drop(daemon);
    let right = Sandbox::new()
        .with_env("AEP_NATS_URL", &server.url())
        .with_env("AEP_NATS_TOKEN", "s3cret-token")
        .with_env("RUST_LOG", "warn");
    let daemon = right.start();
    vendor_hook(&daemon, SESSION, 1);
    let log = right.log(SESSION);
    wait_stream(&url, &ids(&log), WAIT);
    assert!(!health(&daemon).to_string().contains("s3cret"), "no token in /healthz");
}

#[test]
fn malformed_nats_settings_stop_the_daemon_at_start() {
    for (name, value, needle) in [
        ("AEP_NATS_URL", "http://127.0.0.1:4222", "AEP_NATS_URL"),
        ("AEP_NATS_STREAM", "a.b", "AEP_NATS_STREAM"),
        ("AEP_NATS_CREDS", "/nowhere/x.creds", "AEP_NATS_CREDS"),
        ("AEP_NATS_OUTBOX", "0", "nats-outbox"),
    ] {
        let sandbox = Sandbox::new();
        let mut env = vec![("AEP_LISTEN", "127.0.0.1:0"), (name, value)];
        if name != "AEP_NATS_URL" {
            env.push(("AEP_NATS_URL", "nats://127.0.0.1:4222"));
        }
        let out = sandbox.run(&["daemon"], &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}={value}: the daemon started");
        assert!(stderr.contains(needle), "{name}={value}: {stderr}");
        assert!(sandbox.discovery().is_none(), "{name}={value}: nothing served");
    }
}

/// `aep-cline tail` with `args`, its stdout lines until `n` came (or `WAIT` passed).
fn tail(sandbox: &Sandbox, args: &[&str], n: usize) -> Vec<String> {
    tail_then(sandbox, args, n, None::<fn()>)
}

/// [`tail`]; with `then`, that runs once the tail says it follows the stream (its consumer is
/// made: what is published from then on reaches it).
fn tail_then(sandbox: &Sandbox, args: &[&str], n: usize, then: Option<impl FnOnce()>) -> Vec<String> {
    let mut child = Command::new(support::daemon::BIN)
        .arg("tail")
        .args(args)
        .env("HOME", sandbox.root.path())
        .env("AEP_CLINE_STATE_DIR", &sandbox.state_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    // Read to its end, so a chatty tail never blocks on a full pipe.
    let (said_tx, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said_tx.send(line);
        }
    });
    if let Some(then) = then {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        while !seen.iter().any(|l: &String| l.contains("aep-cline tail: following")) {
            match said.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    panic!("waited {WAIT:?} for the tail to follow the stream; it said {seen:?}");
                }
            }
        }
        then();
    }
    let deadline = Instant::now() + WAIT;
    let mut lines = Vec::new();
    while lines.len() < n {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    // A little longer: nothing more may come.
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
        lines.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn tail_nats_turns_the_stream_back_into_the_logged_events() {
    let server = Server::start(&[]);
    let sandbox = nats_box(&server);
    let daemon = sandbox.start();
    // A session id with every character a subject token cannot hold.
    let odd = "odd.session *>\tid";
    for n in 0..5 {
        vendor_hook(&daemon, SESSION, n);
        vendor_hook(&daemon, odd, n);
    }
    let (plain, other) = (sandbox.log(SESSION), sandbox.log(odd));
    let all: Vec<Value> = plain.iter().chain(&other).cloned().collect();
    let stream = wait_stream(&server.url(), &ids(&all), WAIT);
    assert!(
        stream
            .iter()
            .any(|m| m.subject == "aep.ci%2Erunner.cline.odd%2Esession%20%2A%3E%09id"),
        "escaped subject"
    );
    let url = server.url();
    let parsed = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| canonical(&serde_json::from_str::<Value>(l).unwrap()))
            .collect()
    };
    let want = |events: &[Value]| -> Vec<String> { events.iter().map(canonical).collect() };

    let every = tail(&sandbox, &["--nats", &url, "--replay", "--json"], all.len());
    let mut got = parsed(&every);
    let mut expected = want(&all);
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "every Event back, bit for bit modulo member order");

    let one = tail(
        &sandbox,
        &["--nats", &url, "--replay", "--json", "--session", odd],
        other.len(),
    );
    assert_eq!(parsed(&one), want(&other), "one session, in order");

    let from = tail(
        &sandbox,
        &["--nats", &url, "--since-seq", "3", "--json"],
        stream.len() - 2,
    );
    assert_eq!(from.len(), stream.len() - 2, "from stream sequence 3 on");

    let started = tail(
        &sandbox,
        &[
            "--nats",
            &url,
            "--since",
            "1h",
            "--json",
            "--filter",
            r#"{"type":"session.started"}"#,
        ],
        2,
    );
    assert_eq!(parsed(&started).len(), 2, "{started:?}");

    let readable = tail(
        &sandbox,
        &["--nats", &url, "--replay", "--session", SESSION],
        plain.len(),
    );
    assert_eq!(readable.len(), plain.len());
    assert!(
        readable[0].contains("session.started") && readable[0].contains(&format!("{SESSION}:0")),
        "{}",
        readable[0]
    );

    // New Events only, by default: the follower sees what comes after it started.
    let follower = tail_then(
        &sandbox,
        &["--nats", &url, "--json"],
        1,
        Some(|| vendor_hook(&daemon, SESSION, 99)),
    );
    assert_eq!(follower.len(), 1, "{follower:?}");
    let last = sandbox.log(SESSION).pop().unwrap();
    assert_eq!(parsed(&follower), vec![canonical(&last)]);

    let bad = sandbox.run(&["tail", "--nats", "http://x", "--replay"], &[]);
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--nats"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let bad = sandbox.run(&["tail", "--since-seq", "3"], &[]);
    assert!(!bad.status.success(), "--since-seq wants --nats");
    // The daemon's AEP_NATS_STREAM in the environment does not turn a plain tail into a NATS one.
    drop(daemon);
    let plain = sandbox.run(&["tail"], &[("AEP_NATS_STREAM", "OTHER")]);
    let said = String::from_utf8_lossy(&plain.stderr);
    assert!(
        !said.contains("nats") && (said.contains("nothing answers") || said.contains("no running daemon")),
        "{said}"
    );
}

/// Before any Event is published, a daemon whose machine record reaches the server says it is
/// connected (#32: `/healthz` said `nats.connected: false` while heartbeats were being written);
/// once the server is gone, it says it is not.
#[test]
fn the_sink_is_connected_as_soon_as_the_machine_record_reaches_the_server() {
    let mut server = Server::start(&[]);
    let sandbox = nats_box(&server);
    let daemon = sandbox.start();
    let h = wait_health(&daemon, "the machine record written", |n| {
        n["heartbeat"]["writes"].as_u64().unwrap_or(0) > 0
    });
    assert_eq!(h["nats"]["connected"], true, "{}", h["nats"]);
    assert_eq!(h["nats"]["confirmed"], 0, "no Event was published: {}", h["nats"]);
    server.kill();
    vendor_hook(&daemon, SESSION, 1);
    wait_health(&daemon, "the sink notices the server is gone", |n| {
        n["connected"] == false
    });
}
