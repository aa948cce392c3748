//! The daemon's house: one daemon per state folder, the start order, a clean stop, sessions
//! that leave memory and come back from their logs, and no position handed out twice however
//! writers, the spool drain and the registry's sweep race. The real binary over real sockets
//! and files; the registry race also in process, where it can be pushed hardest.

use crate::support;

use aep_cline::firing::Firing;
use aep_cline::lane::spool::{self, Spooled};
use aep_cline::lane::{Bus, Journal, Lifetime, Sessions};
use aep_cline::DELIVERY_HEADER;
use aep_core::redact::{RedactOptions, Redactor};
use aep_core::{Capture, CapturePolicy};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::daemon::{http, project, real_payload, try_http, Sandbox};
use support::wait::wait_until_seen;

/// A real Cline 3.0.65 hook payload, moved to `session`.
fn payload(dir: &str, hook: &str, session: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&real_payload(dir, hook)).unwrap();
    v["sessionContext"]["rootSessionId"] = Value::from(session);
    serde_json::to_vec(&v).unwrap()
}

/// A firing as the shim spools it, fired now.
fn spooled(delivery: &str, body: &[u8]) -> Spooled {
    Spooled {
        firing: Firing {
            delivery: Some(delivery.to_string()),
            fired: Some(aep_cline::firing::now_ns()),
            ..Firing::default()
        },
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// The hooks of one short run, in firing order.
fn run_hooks(session: &str) -> Vec<Vec<u8>> {
    vec![
        payload("hooks-local", "agent_start", session),
        payload("hooks-local", "tool_call", session),
        payload("hooks-local", "tool_result", session),
        payload("hooks-local", "agent_end", session),
        payload("hooks-cancel", "session_shutdown", session),
    ]
}

/// The status of one `POST /hook`; 0 when no daemon listens any more.
fn post_hook(addr: &str, token: &str, body: &[u8], delivery: &str) -> u16 {
    let bearer = format!("Bearer {token}");
    let headers = [("Authorization", bearer.as_str()), (DELIVERY_HEADER, delivery)];
    try_http(addr, "POST", "/hook", &headers, body).map_or(0, |(status, _)| status)
}

fn healthz(addr: &str) -> Value {
    serde_json::from_str(&http(addr, "GET", "/healthz", &[], b"").1).unwrap()
}

/// For a wait: whether `/healthz` counts `n` sessions in memory, else what it counts.
fn sessions_are(addr: &str, n: u64) -> Result<(), String> {
    match &healthz(addr)["sessions"] {
        now if *now == n => Ok(()),
        now => Err(format!("/healthz counts {now} sessions")),
    }
}

/// Asserts a log's positions never repeat and leave no gap: 0, 1, 2, ... in file order.
fn assert_unique_positions(events: &[Value]) {
    let mut seen = HashSet::new();
    for (i, e) in events.iter().enumerate() {
        let p = (e["epoch"].as_u64().unwrap_or(0), e["seq"].as_u64().unwrap());
        assert!(seen.insert(p), "position {p:?} handed out twice: {e}");
        assert_eq!(p, (0, i as u64), "positions in file order: {e}");
    }
}

/// The hook deliveries a log records (a hook that maps to no Event, such as a second
/// terminal, leaves none).
fn deliveries(events: &[Value]) -> HashSet<&str> {
    events.iter().filter_map(|e| e["clinehook"].as_str()).collect()
}

#[test]
fn a_second_daemon_refuses_at_once_names_the_first_and_changes_nothing() {
    let sb = Sandbox::new();
    let first = sb.start();
    let discovery = std::fs::read(sb.state_dir.join("daemon.json")).unwrap();
    // The first daemon is hung, so a spooled hook waits for whoever drains it.
    first.signal("-STOP");
    let session = "second-daemon";
    spool::write(
        &sb.state_dir,
        &spooled("d-spooled", &payload("hooks-local", "agent_start", session)),
    )
    .unwrap();

    let started = Instant::now();
    let second = sb.run(&["daemon"], &[("AEP_LISTEN", "127.0.0.1:0")]);
    assert!(!second.status.success());
    assert!(started.elapsed() < Duration::from_secs(10), "refused at once");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!("pid {}", first.child.id())) && err.contains(&first.url),
        "the refusal names the running daemon: {err}"
    );
    assert_eq!(sb.spooled(), 1, "the second daemon did not drain the spool");
    assert!(sb.log(session).is_empty(), "nor touch a log");
    assert_eq!(
        std::fs::read(sb.state_dir.join("daemon.json")).unwrap(),
        discovery,
        "nor the discovery file"
    );

    first.signal("-CONT");
    let events = sb.wait_for_events(session, 2);
    assert_eq!(support::daemon::types(&events), ["session.started", "run.started"]);
    let (status, _) = first.stop();
    assert!(status.success());
    assert!(
        !sb.state_dir.join("daemon.json").exists(),
        "the first removes its own file"
    );
    sb.start().stop(); // and the lock went with it
}

#[test]
fn a_second_daemon_on_the_same_log_folder_refuses_and_changes_nothing() {
    let sb = Sandbox::new();
    let first = sb.start();
    let session = "shared-logs";
    let hooks = run_hooks(session);
    // Recorded live or, on a loaded machine, through the spool: either way, in the log.
    assert!(sb.hook(&hooks[0]).status.success());
    let before = sb.wait_log(session, "the first hook's events", Duration::from_secs(20), |e| {
        !e.is_empty()
    });
    // Its own state folder, the same logs: two sequencers would hand out positions twice.
    let other = sb.root.path().join("other-state");
    let mut second = std::process::Command::new(support::daemon::BIN)
        .arg("daemon")
        .env("HOME", sb.root.path())
        .env("AEP_LOG_DIR", &sb.log_dir)
        .env("AEP_CLINE_STATE_DIR", &other)
        .env("AEP_LISTEN", "127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while second.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = second.kill();
            let _ = second.wait();
            panic!("the second daemon did not refuse within 30 s: it runs on the same logs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = second.wait_with_output().unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("log folder (AEP_LOG_DIR)")
            && err.contains(&format!("pid {}", first.child.id()))
            && err.contains(&first.url),
        "the refusal names the running daemon: {err}"
    );
    assert!(!other.join("daemon.json").exists(), "it never said it was ready");
    assert_eq!(sb.log(session), before, "nor touched a log");
    assert!(first.stop().0.success());
}

#[test]
fn sigterm_finishes_in_flight_hooks_and_exits_0_without_its_discovery_file() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let (addr, token) = (daemon.addr(), daemon.token.clone());
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, token) = (addr.clone(), token.clone());
            std::thread::spawn(move || {
                let mut ok = 0;
                for (i, hook) in run_hooks(&format!("stop-{w}")).into_iter().enumerate() {
                    if post_hook(&addr, &token, &hook, &format!("d-{w}-{i}")) == 200 {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    // Stopped once the writers are under way.
    sb.wait_log(
        "stop-0",
        "the first writer's first hook",
        Duration::from_secs(20),
        |e| !e.is_empty(),
    );
    let (status, stderr) = daemon.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
    assert!(!sb.state_dir.join("daemon.json").exists());
    for (w, writer) in writers.into_iter().enumerate() {
        let answered = writer.join().unwrap();
        let logged = sb.log(&format!("stop-{w}"));
        // Every hook that was answered 200 is in the log whole; the rest were refused, never torn.
        assert!(
            logged.len() >= answered,
            "writer {w}: {answered} answered, {} logged",
            logged.len()
        );
        assert_unique_positions(&logged);
    }
}

#[test]
fn a_daemon_that_logs_more_than_a_pipe_holds_keeps_answering() {
    // The sandbox takes the daemon's stderr whole: with a pipe nobody read, the daemon blocked on
    // its next log line once 64 KiB had piled up, and every later request hung.
    let sb = Sandbox::new();
    let daemon = sb.start();
    for i in 0..1000 {
        let status = post_hook(
            &daemon.addr(),
            &daemon.token,
            b"{\"not\": \"a hook\"}",
            &format!("bad-{i}"),
        );
        assert!((400..500).contains(&status), "bad hook {i}: HTTP {status}");
    }
    let said = daemon.wait_stderr_count("hook refused", 1000, Duration::from_secs(30));
    assert!(said.iter().map(String::len).sum::<usize>() > 64 * 1024);
    assert_eq!(healthz(&daemon.addr())["ok"], true);
    let (status, stderr) = daemon.stop();
    assert!(status.success() && stderr.contains("stopped"), "{stderr}");
}

/// A price that would make a cost infinite or negative (#30) stops the daemon at start, naming
/// the file, the entry and its line, and what a price may be; it never starts to price runs
/// with it (an infinite cost once lost the run's terminal Event).
#[test]
fn a_prices_file_with_a_huge_negative_or_nan_price_is_refused_at_start_naming_the_entry() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.root.path()).unwrap();
    let file = sb.root.path().join("prices.json");
    for (price, why) in [
        (r#""1e308""#, "above the bound"),
        ("-0.000003", "negative"),
        (r#""NaN""#, "not a finite number"),
    ] {
        let json = format!(
            "{{\"data\": [\n  {{\"id\": \"acme/fine\", \"pricing\": {{\"prompt\": \"0.000001\", \"completion\": \"0.000002\"}}}},\n  \
             {{\"id\": \"acme/fake-model\",\n   \"pricing\": {{\"prompt\": {price}, \"completion\": \"0.000002\"}}}}\n]}}\n"
        );
        std::fs::write(&file, json).unwrap();
        let out = sb.run(
            &["daemon"],
            &[
                ("AEP_CLINE_PRICES", file.to_str().unwrap()),
                ("AEP_LISTEN", "127.0.0.1:0"),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{price}: {err}");
        assert!(
            err.contains(&format!("cannot use the prices file {}", file.display()))
                && err.contains(r#"entry 1 of `data` (model "acme/fake-model", line 3) has pricing.prompt"#)
                && err.contains(why)
                && err.contains("fix or remove that entry"),
            "{price}: {err}"
        );
        assert!(!sb.state_dir.join("daemon.json").exists(), "it never said it was ready");
    }
}

#[test]
fn an_unusable_log_folder_or_a_category_typo_is_refused_at_start() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.root.path()).unwrap();
    let file = sb.root.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = sb.run(&["daemon"], &[("AEP_LOG_DIR", file.to_str().unwrap())]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("AEP_LOG_DIR"), "{err}");
    assert!(!sb.state_dir.join("daemon.json").exists(), "it never said it was ready");

    // An address this machine does not have (TEST-NET-1): the error is said, not guessed at.
    let out = sb.run(&["daemon"], &[("AEP_LISTEN", "192.0.2.1:9"), ("AEP_TOKEN", "t")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AEP_LISTEN") && err.contains("192.0.2.1:9") && !err.contains("another daemon"),
        "{err}"
    );

    let out = sb.run(&["daemon"], &[("AEP_CAPTURE", "metadata,tools=redacted")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AEP_CAPTURE") && err.contains("did you mean tool"),
        "{err}"
    );

    // A notification target that is none of the three forms, its credentials never echoed.
    let out = sb.run(&["daemon"], &[("AEP_CLINE_NOTIFY", "desktop,slack://u:s3cret@team")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AEP_CLINE_NOTIFY") && err.contains("ntfy+https://HOST/TOPIC") && !err.contains("s3cret"),
        "{err}"
    );
}

#[test]
fn the_help_lists_every_setting_with_its_variable() {
    let out = Sandbox::new().run(&["daemon", "--help"], &[]);
    let help = String::from_utf8_lossy(&out.stdout);
    for variable in [
        "AEP_LISTEN",
        "AEP_LOG_DIR",
        "AEP_CLINE_STATE_DIR",
        "AEP_CAPTURE",
        "AEP_REDACT_PII",
        "AEP_REDACT_SECRET_ENV",
        "AEP_CLINE_MAX_BODY",
        "AEP_HOST",
        "AEP_SESSION_GRACE",
        "AEP_SESSION_IDLE",
        "AEP_CLINE_NOTIFY",
        "AEP_CLINE_NOTIFY_ON",
        "AEP_CLINE_PUBLIC_URL",
        "AEP_ENDPOINT",
        "AEP_TOKEN",
        "AEP_BUFFER",
        "AEP_MAX_SESSIONS",
        "AEP_MAX_BODY",
        "AEP_MAX_BATCH",
        "AEP_MAX_FROM",
        "AEP_PING_MS",
        "AEP_RELAY_URL",
        "AEP_RELAY_TOKEN",
        "AEP_RELAY_OUTBOX",
        "AEP_CLINE_HUB",
        "AEP_CLINE_HUB_CONTROL",
        "AEP_CLINE_HUB_DISCOVERY",
        "AEP_CLINE_HUB_URL",
        "AEP_CLINE_HUB_TOKEN",
        "AEP_CLINE_HUB_ACK_GUARD_MS",
        "AEP_CLINE_SPOOL_MAX",
    ] {
        assert!(
            help.contains(&format!("[env: {variable}")),
            "{variable} missing from --help"
        );
    }
    let secret = Sandbox::new().run(&["daemon", "--help"], &[("AEP_TOKEN", "do-not-print-me")]);
    assert!(!String::from_utf8_lossy(&secret.stdout).contains("do-not-print-me"));
}

#[test]
fn ended_and_idle_sessions_leave_memory_and_come_back_from_their_logs() {
    let sb = Sandbox::new()
        .with_env("AEP_SESSION_GRACE", "100ms")
        .with_env("AEP_SESSION_IDLE", "3s");
    let daemon = sb.start();
    let (addr, token) = (daemon.addr(), daemon.token.clone());
    for (i, hook) in run_hooks("ended").iter().enumerate() {
        assert_eq!(post_hook(&addr, &token, hook, &format!("e-{i}")), 200);
    }
    assert_eq!(
        post_hook(&addr, &token, &payload("hooks-local", "agent_start", "idle"), "i-0"),
        200
    );
    assert_eq!(healthz(&addr)["sessions"], 2);
    // Every count /healthz gives on the way to none, in order.
    let mut counts = Vec::new();
    wait_until_seen("both sessions to leave memory", Duration::from_secs(30), || {
        let n = healthz(&addr)["sessions"].as_u64().unwrap();
        if counts.last() != Some(&n) {
            counts.push(n);
        }
        if n == 0 {
            Ok(())
        } else {
            Err(format!("counts so far {counts:?}"))
        }
    });
    assert_eq!(counts, [2, 1, 0], "the ended session leaves first, then the idle one");

    // The idle session speaks again: reloaded from its log, same run, next position.
    assert_eq!(
        post_hook(&addr, &token, &payload("hooks-local", "tool_call", "idle"), "i-1"),
        200
    );
    let events = sb.log("idle");
    assert_eq!(
        support::daemon::types(&events),
        ["session.started", "run.started", "tool.requested"]
    );
    assert_eq!(events[2]["seq"], 2);
    assert_eq!(events[2]["run"], events[1]["run"]);
    // A redelivery of a hook from before it left is still recognized.
    assert_eq!(
        post_hook(&addr, &token, &payload("hooks-local", "agent_start", "idle"), "i-0"),
        200
    );
    assert_eq!(sb.log("idle").len(), 3);
    drop(daemon);
}

#[test]
fn writers_racing_a_session_end_and_the_spool_drain_never_share_a_position() {
    let sb = Sandbox::new().with_env("AEP_SESSION_GRACE", "1ms");
    let daemon = sb.start();
    let (addr, token) = (daemon.addr(), daemon.token.clone());
    let session = "race";
    let hooks = Arc::new(run_hooks(session));
    // With a 1 ms grace every hook reloads the session from its log: a second of racing
    // writers is hundreds of ends, drains and reloads.
    let until = Instant::now() + Duration::from_secs(1);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (addr, token, hooks, state_dir) = (addr.clone(), token.clone(), hooks.clone(), sb.state_dir.clone());
            std::thread::spawn(move || {
                let mut sent = 0usize;
                while Instant::now() < until {
                    let hook = &hooks[sent % hooks.len()];
                    let delivery = format!("w{w}-{sent}");
                    if w == 0 {
                        // One writer goes through the spool: the drain races the live hooks. At
                        // a shim's pace at most (a spooled firing every few ms, far above what
                        // Cline's blocking hooks can make): unpaced, it piles thousands of files
                        // that every live hook of the session must wait behind.
                        spool::write(&state_dir, &spooled(&delivery, hook)).unwrap();
                        std::thread::sleep(Duration::from_millis(5));
                    } else {
                        let asked = Instant::now();
                        let status = post_hook(&addr, &token, hook, &delivery);
                        // 0 is no answer at all: say how long it was waited for, and whether
                        // the daemon still takes connections, so a failure says which it was.
                        assert_eq!(
                            status,
                            200,
                            "{delivery}: no 200 after {:?}; the port {}",
                            asked.elapsed(),
                            if std::net::TcpStream::connect(&addr).is_ok() {
                                "still accepts"
                            } else {
                                "refuses"
                            }
                        );
                        // Seven writers of one session at a time is already far past Cline, whose
                        // hooks of a session come one after the other.
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    sent += 1;
                }
                sent
            })
        })
        .collect();
    let joined: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
    if joined.iter().any(Result::is_err) {
        // A writer got no answer: what the daemon said meanwhile is the clue.
        panic!("a writer failed (above); the daemon's log:\n{}", daemon.stderr());
    }
    let sent: usize = joined.into_iter().map(Result::unwrap).sum();
    sb.wait_spool_empty(Duration::from_secs(30));
    let events = sb.log(session);
    assert_unique_positions(&events);
    assert!(deliveries(&events).len() <= sent && deliveries(&events).len() > sent / 5);
    let out = sb.run(
        &[
            "validate",
            sb.log_dir
                .join("cline")
                .join(format!("{session}.jsonl"))
                .to_str()
                .unwrap(),
        ],
        &[],
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!report.contains("seq"), "no ordering violation: {report}");
    drop(daemon);
}

#[test]
fn the_registry_never_hands_out_a_position_twice_while_it_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Arc::new(
        Sessions::new(
            Journal::new(dir.path()),
            "host".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        )
        .with_lifetime(Lifetime {
            grace: Duration::ZERO,
            idle: Duration::ZERO,
            ..Lifetime::default()
        }),
    );
    let session = "swept";
    let hooks = Arc::new(run_hooks(session));
    let until = Instant::now() + Duration::from_secs(2);
    let sweeper = {
        let sessions = sessions.clone();
        std::thread::spawn(move || {
            let mut closed = 0;
            while Instant::now() < until {
                closed += sessions.sweep(Instant::now());
            }
            closed
        })
    };
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (sessions, hooks) = (sessions.clone(), hooks.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while Instant::now() < until {
                    sessions
                        .ingest_hook(&hooks[n % hooks.len()], &Firing::delivery(&format!("w{w}-{n}")))
                        .unwrap();
                    n += 1;
                    if n % 16 == 0 {
                        // A breath now and then, so the sweep finds the slot free mid-race.
                        std::thread::sleep(Duration::from_micros(300));
                    }
                }
                n
            })
        })
        .collect();
    let sent: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(sweeper.join().unwrap() > 0, "the session left memory during the race");
    let text = std::fs::read_to_string(Journal::new(dir.path()).path(session)).unwrap();
    let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_unique_positions(&events);
    assert!(deliveries(&events).len() <= sent && deliveries(&events).len() > sent / 5);
    sessions.sweep(Instant::now());
    assert_eq!(sessions.live_count(), 0, "nothing left in memory once idle");
}

// ---- When does a session end: the reconciler (see README "When does a session end") ----

/// A stand-in for the Cline process that runs a session's hooks: the daemon watches it by pid
/// and start time, as it watches the real one.
pub(crate) struct Cline(std::process::Child);

impl Cline {
    pub(crate) fn start() -> Self {
        Cline(std::process::Command::new("sleep").arg("600").spawn().unwrap())
    }

    /// The parent header the shim sends for it.
    fn header(&self) -> String {
        let pid = self.0.id();
        aep_cline::firing::parent_header(pid, aep_cline::lane::parent::start_time(pid))
    }

    pub(crate) fn exit(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Cline {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `POST /hook` as the shim sends it from `cline`'s hook, naming Cline's data folder `data`.
pub(crate) fn post_from(
    addr: &str,
    token: &str,
    body: &[u8],
    delivery: &str,
    cline: &Cline,
    data: Option<&std::path::Path>,
) -> u16 {
    let bearer = format!("Bearer {token}");
    let parent = cline.header();
    let data = data.map(|d| d.display().to_string()).unwrap_or_default();
    let mut headers = vec![
        ("Authorization", bearer.as_str()),
        (DELIVERY_HEADER, delivery),
        (aep_cline::firing::PARENT_HEADER, parent.as_str()),
    ];
    if !data.is_empty() {
        headers.push((aep_cline::firing::CLINE_DATA_HEADER, data.as_str()));
    }
    try_http(addr, "POST", "/hook", &headers, body).map_or(0, |(status, _)| status)
}

/// A run cut short mid-tool: its start and the tool call, from `cline`.
fn feed_open_run(addr: &str, token: &str, session: &str, cline: &Cline, data: Option<&std::path::Path>) {
    for hook in ["agent_start", "tool_call"] {
        let body = payload("hooks-local", hook, session);
        assert_eq!(
            post_from(addr, token, &body, &format!("{session}-{hook}"), cline, data),
            200
        );
    }
}

#[test]
fn sessions_whose_cline_exits_while_the_daemon_is_down_end_at_the_restart_at_their_last_hook() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut cline = Cline::start();
    // Five sessions fed just before a SIGTERM restart.
    let sessions: Vec<String> = (0..5).map(|i| format!("down-{i}")).collect();
    for s in &sessions {
        feed_open_run(&daemon.addr(), &daemon.token, s, &cline, None);
    }
    let (status, _) = daemon.stop();
    assert!(status.success());
    for s in &sessions {
        assert_eq!(project(&sb.log(s)), (false, 1), "open when the daemon stopped");
    }
    cline.exit();
    let _daemon = sb.start();
    for s in &sessions {
        support::daemon::assert_ended_late(&sb, s, "process_gone");
    }
}

#[test]
fn a_session_whose_cline_exits_after_a_daemon_restart_ends_when_it_exits() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut cline = Cline::start();
    let session = "restarted";
    feed_open_run(&daemon.addr(), &daemon.token, session, &cline, None);
    drop(daemon.stop());
    let daemon = sb.start();
    // The reconciler's first pass judged it alive (its Cline runs) and keeps watching it.
    wait_until_seen("the open session to be taken up", Duration::from_secs(15), || {
        sessions_are(&daemon.addr(), 1)
    });
    assert_eq!(project(&sb.log(session)), (false, 1), "alive: left open");
    cline.exit();
    support::daemon::assert_ended_late(&sb, session, "process_gone");
}

/// Faults together: 24 sessions of three Clines fed by racing writers, the daemon stopped
/// (SIGTERM) while one Cline dies, restarted, killed -9 while a second dies, restarted, then the
/// third Cline dies. Every session ends exactly once, at its last hook, found by its process;
/// none ends while its Cline lives, and none is ended again by a later start.
#[test]
fn every_session_ends_once_through_sigterm_kill_9_and_clines_dying_between() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut clines = [Cline::start(), Cline::start(), Cline::start()];
    let sessions: Vec<(usize, String)> = (0..24).map(|i| (i % 3, format!("fault-{i}"))).collect();
    let of_cline = |c: usize| sessions.iter().filter(move |(o, _)| *o == c).map(|(_, s)| s.as_str());
    std::thread::scope(|scope| {
        for chunk in sessions.chunks(6) {
            let (addr, token, clines) = (daemon.addr(), daemon.token.clone(), &clines);
            scope.spawn(move || {
                for (c, session) in chunk {
                    feed_open_run(&addr, &token, session, &clines[*c], None);
                }
            });
        }
    });
    let (status, _) = daemon.stop();
    assert!(status.success());
    clines[0].exit();
    let daemon = sb.start();
    for session in of_cline(0) {
        support::daemon::assert_ended_late(&sb, session, "process_gone");
    }
    drop(daemon); // SIGKILL
    clines[1].exit();
    let daemon = sb.start();
    for session in of_cline(1) {
        support::daemon::assert_ended_late(&sb, session, "process_gone");
    }
    for session in of_cline(2) {
        assert_eq!(project(&sb.log(session)), (false, 1), "{session}: its Cline lives");
    }
    drop(daemon.stop());
    clines[2].exit();
    let _daemon = sb.start();
    for session in of_cline(2) {
        support::daemon::assert_ended_late(&sb, session, "process_gone");
    }
    for (_, session) in &sessions {
        let ended = support::daemon::of(&sb.log(session), "session.ended").len();
        assert_eq!(ended, 1, "{session} ended once");
    }
}

/// Cline 3.x fires `agent_end` and `session_shutdown` from hook processes that outlive it: a
/// run that finished as Cline exited is not taken for one cut short by the process check, which
/// waits for the session to settle (`reconcile::HOOKS_SETTLE`, 3 s) after its last hook.
#[test]
fn end_hooks_that_land_after_cline_exited_still_say_how_the_run_ended() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut cline = Cline::start();
    let session = "ends-after-exit";
    let hooks = run_hooks(session);
    for (i, hook) in hooks[..3].iter().enumerate() {
        assert_eq!(
            post_from(&daemon.addr(), &daemon.token, hook, &format!("x-{i}"), &cline, None),
            200
        );
    }
    cline.exit();
    // More than one reconciler pass (every second) sees the process gone meanwhile.
    std::thread::sleep(Duration::from_millis(1_200));
    for (i, hook) in hooks[3..].iter().enumerate() {
        assert_eq!(
            post_from(&daemon.addr(), &daemon.token, hook, &format!("y-{i}"), &cline, None),
            200
        );
    }
    let events = sb.wait_log(session, "session.ended", Duration::from_secs(15), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_eq!(
        support::daemon::types(&events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "run.finished",
            "session.ended"
        ],
        "the run finished, as its own hooks say"
    );
    assert_eq!(events[5]["data"]["reason"], "normal");
    assert!(
        events[5]["data"]["detected"].is_null(),
        "its own hook ended it: {}",
        events[5]
    );
    assert_eq!(project(&events), (true, 0));
}

#[test]
fn a_session_that_left_memory_idle_still_ends_when_its_cline_exits() {
    let sb = Sandbox::new().with_env("AEP_SESSION_IDLE", "300ms");
    let daemon = sb.start();
    let mut cline = Cline::start();
    let session = "idle-then-gone";
    feed_open_run(&daemon.addr(), &daemon.token, session, &cline, None);
    wait_until_seen("the idle session to leave memory", Duration::from_secs(15), || {
        sessions_are(&daemon.addr(), 0)
    });
    cline.exit();
    support::daemon::assert_ended_late(&sb, session, "process_gone");
}

/// Writes Cline's store record of `session` under the data folder `data`, as 3.0.65 does.
fn store_record(data: &std::path::Path, session: &str, status: &str, ended_at: &str) {
    let folder = data.join("sessions").join(session);
    std::fs::create_dir_all(&folder).unwrap();
    let record = serde_json::json!({"session_id": session, "status": status, "ended_at": ended_at, "exit_code": 0});
    std::fs::write(folder.join(format!("{session}.json")), record.to_string()).unwrap();
}

#[test]
fn a_hub_run_session_that_left_memory_idle_still_ends_as_clines_store_says() {
    let sb = Sandbox::new().with_env("AEP_SESSION_IDLE", "300ms");
    let data = sb.root.path().join("cline-data");
    let daemon = sb.start();
    // Cline's hub ran its hooks and outlives the session: its process says nothing of the end.
    let mut hub = Cline::start();
    let session = "hub-run-idle";
    store_record(&data, session, "running", "");
    feed_open_run(&daemon.addr(), &daemon.token, session, &hub, Some(&data));
    wait_until_seen("the idle session to leave memory", Duration::from_secs(15), || {
        sessions_are(&daemon.addr(), 0)
    });
    assert_eq!(project(&sb.log(session)), (false, 1), "open when it left memory");
    store_record(&data, session, "completed", "2026-11-30T02:53:40.5Z");
    let events = sb.wait_log(session, "session.ended", Duration::from_secs(30), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_eq!(support::daemon::types(&events)[3..], ["run.finished", "session.ended"]);
    assert!(events[3..].iter().all(|e| e["time"] == "2026-11-30T02:53:40.500Z"));
    assert_eq!(events[4]["data"]["detected"]["by"], "cline_store");
    assert_eq!(project(&events), (true, 0));
    assert_eq!(sb.sessions_json()[session]["state"], "ended");
    assert!(hub.0.try_wait().unwrap().is_none(), "the hub still runs");
}

#[test]
fn clines_own_store_says_how_and_when_a_session_ended() {
    let sb = Sandbox::new();
    let data = sb.root.path().join("cline-data");
    let store = |session: &str, status: &str, ended_at: &str| store_record(&data, session, status, ended_at);
    let daemon = sb.start();
    // Cline's hub lives on (its runs completed while no hub connection was watched).
    let hub = Cline::start();
    store("done", "running", "");
    feed_open_run(&daemon.addr(), &daemon.token, "done", &hub, Some(&data));
    feed_open_run(&daemon.addr(), &daemon.token, "broke", &hub, Some(&data));
    store("done", "completed", "2026-11-30T02:53:40.5Z");
    store("broke", "failed", "2026-11-30T02:53:41.000Z");
    let done = sb.wait_log("done", "session.ended", Duration::from_secs(20), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_eq!(
        support::daemon::types(&done)[3..],
        ["run.finished", "session.ended"],
        "the run completed, as Cline's store says"
    );
    assert!(done[3..].iter().all(|e| e["time"] == "2026-11-30T02:53:40.500Z"));
    assert_eq!(done[4]["data"]["reason"], "normal");
    assert_eq!(done[4]["data"]["detected"]["by"], "cline_store");
    support::daemon::assert_valid_stream(&done);
    let broke = sb.wait_log("broke", "session.ended", Duration::from_secs(20), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_eq!(support::daemon::types(&broke)[3..], ["run.failed", "session.ended"]);
    assert_eq!(broke[3]["data"]["reason"], "failed");
    assert_eq!(broke[3]["data"]["error"]["type"], "cline_status_failed");
    assert_eq!(broke[4]["data"]["reason"], "error");
    assert!(broke[3..].iter().all(|e| e["time"] == "2026-11-30T02:53:41.000Z"));
    support::daemon::assert_valid_stream(&broke);
    let listed = sb.sessions_json();
    assert_eq!(
        (listed["done"]["state"].as_str(), listed["broke"]["failures"].as_u64()),
        (Some("ended"), Some(1))
    );
}

#[test]
fn a_session_with_no_evidence_of_life_for_a_day_ends_as_timed_out_at_its_last_hook() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let session = "forgotten";
    for (i, hook) in ["agent_start", "tool_call"].iter().enumerate() {
        let body = payload("hooks-local", hook, session);
        assert_eq!(post_hook(&daemon.addr(), &daemon.token, &body, &format!("f-{i}")), 200);
    }
    drop(daemon.stop());
    let log = sb.log_dir.join("cline").join(format!("{session}.jsonl"));
    let ok = std::process::Command::new("touch")
        .args(["-d", "25 hours ago"])
        .arg(&log)
        .status()
        .unwrap();
    assert!(ok.success());
    let _daemon = sb.start();
    let events = sb.wait_log(session, "session.ended", Duration::from_secs(15), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_eq!(events[4]["data"]["reason"], "timeout");
    assert_eq!(events[4]["data"]["detected"]["by"], "stale");
    assert_eq!(events[4]["time"], events[2]["time"]);
    assert_eq!(project(&events), (true, 0));
}

#[test]
fn a_person_ends_a_stuck_session_and_commands_on_it_are_then_refused_in_words() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let cline = Cline::start();
    let session = "stuck";
    feed_open_run(&daemon.addr(), &daemon.token, session, &cline, None);
    let out = sb.run(&["end", session, "--reason", "its terminal was closed"], &[]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}{:?}",
        String::from_utf8_lossy(&out.stderr),
        sb.log(session)
    );
    assert!(said.contains("accepted: end session stuck"), "{said}");
    let events = sb.log(session);
    assert_eq!(
        support::daemon::types(&events)[3..],
        ["control.accepted", "run.cancelled", "session.ended"],
        "the answer before its effects"
    );
    let command = events[3]["cause"].as_str().unwrap();
    assert_eq!(events[4]["data"]["by"], "control");
    assert!(
        events[4..].iter().all(|e| e["cause"] == command),
        "caused by the command"
    );
    assert_eq!(events[5]["data"]["detected"]["by"], "person");
    support::daemon::assert_valid_stream(&events);
    let before = sb.sessions_json()[session].clone();
    assert_eq!(before["state"], "ended");

    // Ending it again, or cancelling its run, is refused and says why; it does not move it.
    let again = sb.run(&["end", session], &[]);
    assert_eq!(again.status.code(), Some(1));
    let why = String::from_utf8_lossy(&again.stderr);
    assert!(why.contains("has ended already"), "{why}");
    let cancel = sb.run(&["cancel", session], &[]);
    assert_eq!(
        cancel.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&cancel.stderr)
    );
    let after = sb.sessions_json()[session].clone();
    assert_eq!(after["last"], before["last"], "a refused command is no sign of life");
    assert_eq!(
        support::daemon::types(&sb.log(session)).last(),
        Some(&"control.rejected")
    );
}

/// `AEP_CLINE_NOTIFY=desktop`: a session's end goes to `notify-send` (here a script on the
/// daemon's PATH that writes down its arguments); without one on the PATH the daemon says so
/// once at start and goes on.
#[test]
fn desktop_notifications_run_notify_send_or_say_once_that_there_is_none() {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let said = bin.path().join("said.txt");
    let script = bin.path().join("notify-send");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}.tmp && mv {0}.tmp {0}\n",
            said.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let sb = Sandbox::new()
        .with_env("AEP_CLINE_NOTIFY", "desktop")
        .with_env("AEP_CLINE_NOTIFY_ON", "ended")
        .with_env("PATH", &path);
    let daemon = sb.start();
    for (i, hook) in run_hooks("desk-1").into_iter().enumerate() {
        assert_eq!(post_hook(&daemon.addr(), &daemon.token, &hook, &format!("d-{i}")), 200);
    }
    wait_until_seen("notify-send to run", Duration::from_secs(30), || {
        if said.exists() {
            Ok(())
        } else {
            Err(format!("/healthz: {}", healthz(&daemon.addr())))
        }
    });
    let args = std::fs::read_to_string(&said).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        args[..3],
        ["--app-name=aep-cline", "--", "Cline: a Cline session ended"],
        "{args:?}"
    );
    assert!(args[3].contains("session desk-1"), "{args:?}");
    // /metrics counts it, summed over the targets (a target's URL may hold a secret).
    support::wait::wait_until_seen("the notification counted in /metrics", Duration::from_secs(20), || {
        let (_, metrics) = http(&daemon.addr(), "GET", "/metrics", &[], b"");
        if metrics.contains("aep_cline_notifications_total{outcome=\"sent\"} 1\n") {
            Ok(())
        } else {
            Err(metrics)
        }
    });
    let (_, stderr) = daemon.stop();
    assert!(!stderr.contains("no notify-send"), "{stderr}");

    let empty = tempfile::tempdir().unwrap();
    let sb = Sandbox::new()
        .with_env("AEP_CLINE_NOTIFY", "desktop")
        .with_env("PATH", empty.path().to_str().unwrap());
    let (_, stderr) = sb.start().stop();
    assert_eq!(stderr.matches("no notify-send").count(), 1, "{stderr}");
}

#[test]
fn the_policy_files_budget_tables_set_the_budgets_and_a_bad_one_keeps_the_last_good() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    let write = |text: &str| {
        // A new file renamed over the old: a new inode, so the next poll reads it.
        let next = dir.path().join("policy.toml.next");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, &policy).unwrap();
    };
    write("[[budget]]\nworkspace = \"**/billing-*\"\nrun = 0.5\n");
    let sb = Sandbox::new()
        .with_env("AEP_CLINE_POLICY", policy.to_str().unwrap())
        .with_env("AEP_CLINE_BUDGET", "run=2,day=50");
    let daemon = sb.start();
    let overrides = |h: &Value| h["budget"]["overrides"].as_array().map_or(0, Vec::len);
    // Set from the file read at start, by a task of its own: awaited, not assumed done by the
    // first request (a poll reads only a changed file, so nothing else can set it).
    support::wait::wait_until_seen("the file's budget set at start", Duration::from_secs(20), || {
        let health = healthz(&daemon.addr());
        match overrides(&health) {
            1 => Ok(()),
            _ => Err(format!("budget: {}", health["budget"])),
        }
    });
    // Two tables now: read at the next poll.
    write("[[budget]]\nworkspace = \"**/billing-*\"\nrun = 0.5\n\n[[budget]]\nworkspace = \"/srv/**\"\nday = 5\n");
    wait_until_seen(
        "the rewritten file's budgets to be used",
        Duration::from_secs(20),
        || {
            let health = healthz(&daemon.addr());
            match overrides(&health) {
                2 => Ok(()),
                _ => Err(format!("budget: {}", health["budget"])),
            }
        },
    );
    // A bad table makes the file bad: the last good budgets stay, and the policy says why.
    write("[[budget]]\nworkspace = \"**/billing-*\"\nrun = -1\n");
    let health = wait_until_seen("the bad file to be reported", Duration::from_secs(20), || {
        let health = healthz(&daemon.addr());
        if health["policy"]["last_error"].is_string() {
            Ok(health)
        } else {
            Err(format!("policy: {}", health["policy"]))
        }
    });
    assert!(
        health["policy"]["last_error"]
            .as_str()
            .unwrap()
            .contains("[[budget]] #1"),
        "{}",
        health["policy"]
    );
    assert_eq!(overrides(&health), 2, "the last good budgets stay");
    drop(daemon);
}

/// The daemon's log is plain text when it is not a terminal (a file, the journal, a pipe):
/// no colour codes for a person to read past (#32).
#[test]
fn the_daemon_log_has_no_colour_codes_when_it_is_not_a_terminal() {
    let sb = Sandbox::new().with_env("RUST_LOG", "info");
    let daemon = sb.start();
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("aep-cline daemon ready"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour codes in a piped log: {stderr:?}");
}
