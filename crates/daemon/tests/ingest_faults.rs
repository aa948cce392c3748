//! The log tells the true story through faults (issue: hooks in firing order, nothing half
//! written, nothing lost, nothing poisoned): a hung daemon, a restart, an impostor on the port,
//! a full disk, bad spool files, oversized bodies, one firing delivered by several hook files.
//! The real binary (daemon and shim) over real sockets and files.

use crate::support;

use aep_cline::firing::Firing;
use aep_cline::lane::spool::{self, Spooled};
use serde_json::Value;
use std::time::Duration;
use support::daemon::{real_payload, types, Sandbox};

const SESSION: &str = "1796007203184_6l7jh";

/// A real payload moved to `session`, with its own `timestamp`.
fn payload(dir: &str, hook: &str, session: &str, timestamp: Option<&str>) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&real_payload(dir, hook)).unwrap();
    v["sessionContext"]["rootSessionId"] = Value::from(session);
    match timestamp {
        Some(t) => v["timestamp"] = Value::from(t),
        None => {
            v.as_object_mut().unwrap().remove("timestamp");
        }
    }
    serde_json::to_vec(&v).unwrap()
}

/// Waits (up to 20 s) until `done` holds, naming `what` when it never does.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    support::wait::wait_until(what, Duration::from_secs(20), || done().then_some(()));
}

#[test]
fn a_spooled_hook_is_never_overtaken_by_a_live_one() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    sb.hook(&real_payload("hooks-local", "agent_start"));
    daemon.signal("-STOP");
    let out = sb.hook(&real_payload("hooks-local", "agent_end"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("spooled"));
    daemon.signal("-CONT");
    // At once, before the drain's next tick: the live hook must not go first.
    sb.hook(&payload(
        "hooks-cancel",
        "session_shutdown",
        SESSION,
        Some("2026-11-30T02:53:30.000Z"),
    ));
    let events = sb.wait_for_events(SESSION, 4);
    assert_eq!(
        types(&events),
        ["session.started", "run.started", "run.finished", "session.ended"],
        "the real agent_end closes the run, not a synthetic cancel"
    );
    wait_until("an empty spool", || sb.spooled() == 0);
    support::daemon::assert_valid_stream(&sb.log(SESSION));
    drop(daemon);
}

#[test]
fn event_times_are_firing_times_not_ingest_times() {
    let sb = Sandbox::new();
    // No daemon: everything is spooled, and ingested later.
    sb.hook(&payload(
        "hooks-local",
        "agent_start",
        "timed",
        Some("2026-11-30T02:53:23.341Z"),
    ));
    let before = aep_cline::firing::now_ns();
    sb.hook(&payload("hooks-local", "tool_call", "timed", None));
    let after = aep_cline::firing::now_ns();
    assert_eq!(sb.spooled(), 2);
    // The scenario: ingested over a second after the firing, so the two times differ.
    std::thread::sleep(Duration::from_millis(1100));
    let daemon = sb.start();
    let events = sb.wait_for_events("timed", 3);
    assert_eq!(events[0]["time"], "2026-11-30T02:53:23.341Z");
    assert_eq!(events[1]["time"], "2026-11-30T02:53:23.341Z");
    let t = aep_core::time::parse(events[2]["time"].as_str().unwrap(), false).unwrap();
    let ns = t.as_nanosecond() as u64;
    assert!(
        ns >= before / 1_000_000 * 1_000_000 && ns <= after,
        "without a payload timestamp, the shim's clock at the firing"
    );
    drop(daemon);
}

#[test]
fn a_restart_keeps_the_token_so_shims_never_fail_authentication() {
    let sb = Sandbox::new();
    let first = sb.start();
    let token = first.token.clone();
    first.stop();
    let second = sb.start();
    assert_eq!(second.token, token, "the token lives in the state folder");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(sb.state_dir.join("token")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    drop(second);
}

#[test]
fn an_impostor_on_the_port_gets_no_hook_and_the_shim_spools() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let discovery = sb.discovery().unwrap();
    daemon.signal("-KILL");
    drop(daemon);
    // Another program takes the port and answers 200 to anything.
    let impostor = tiny_http::Server::http(discovery["url"].as_str().unwrap().trim_start_matches("http://")).unwrap();
    let out = sb.hook(&real_payload("hooks-local", "agent_start"));
    // The shim talks to the daemon's own socket only: the port's new owner hears nothing.
    let heard = impostor.try_recv().unwrap();
    assert!(heard.is_none(), "the impostor received a request");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the daemon cannot be reached") && err.contains("spooled"),
        "{err}"
    );
    assert_eq!(sb.spooled(), 1, "the hook waits for the real daemon");
    let daemon = sb.start();
    assert_eq!(
        types(&sb.wait_for_events(SESSION, 2)),
        ["session.started", "run.started"]
    );
    drop(daemon);
}

#[test]
fn one_bad_spool_file_is_quarantined_and_the_rest_goes_on() {
    let sb = Sandbox::new().with_env("AEP_CLINE_MAX_BODY", "100000");
    let spooled = |delivery: &str, body: Vec<u8>| Spooled {
        firing: Firing {
            delivery: Some(delivery.into()),
            fired: Some(aep_cline::firing::now_ns()),
            ..Firing::default()
        },
        body: String::from_utf8(body).unwrap(),
    };
    let long_session = "x".repeat(300);
    let emoji_session = "😀".repeat(30);
    spool::write(
        &sb.state_dir,
        &spooled("a", payload("hooks-local", "agent_start", &long_session, None)),
    )
    .unwrap();
    let garbage = spool::dir(&sb.state_dir).join("00000000000000000001-0000000001-bad.json");
    std::fs::write(&garbage, b"{not json").unwrap();
    let huge = format!(
        "{{\"hookName\":\"agent_start\",\"taskId\":\"t\",\"pad\":\"{}\"}}",
        "p".repeat(200_000)
    );
    spool::write(&sb.state_dir, &spooled("b", huge.into_bytes())).unwrap();
    spool::write(&sb.state_dir, &spooled("c", b"[1,2]".to_vec())).unwrap();
    spool::write(
        &sb.state_dir,
        &spooled("d", payload("hooks-local", "agent_start", &emoji_session, None)),
    )
    .unwrap();
    let daemon = sb.start();
    assert_eq!(sb.spooled(), 0, "drained at start, nothing blocked");
    assert_eq!(types(&sb.log(&long_session)), ["session.started", "run.started"]);
    assert_eq!(types(&sb.log(&emoji_session)), ["session.started", "run.started"]);
    assert_eq!(
        sb.log(&long_session)[0]["session"],
        long_session.as_str(),
        "the log names its session"
    );
    let quarantine = spool::quarantine_dir(&sb.state_dir);
    let reasons: Vec<String> = std::fs::read_dir(&quarantine)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "reason"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("not JSON")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("AEP_CLINE_MAX_BODY")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("not a JSON object")), "{reasons:?}");
    drop(daemon);
}

#[test]
fn an_oversized_body_is_refused_413_and_the_shim_says_so() {
    let sb = Sandbox::new().with_env("AEP_CLINE_MAX_BODY", "1048576");
    let daemon = sb.start();
    let mut v: Value = serde_json::from_slice(&real_payload("hooks-local", "tool_result")).unwrap();
    // Twice the limit: over it for certain, and small enough that a debug shim on a loaded
    // machine still reads and hashes it within its 200 ms budget (8 MiB needed about 0.5 s).
    v["tool_result"]["output"] = Value::from("o".repeat(2 * 1024 * 1024));
    let out = sb.hook(&serde_json::to_vec(&v).unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("over the daemon's limit"), "{err}");
    assert_eq!(sb.spooled(), 0, "a body refused for good is not spooled");
    assert!(sb.log(SESSION).is_empty());
    drop(daemon);
}

#[test]
fn a_full_disk_never_leaves_half_a_hook_and_the_retry_records_it_whole() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    for hook in ["agent_start", "tool_call"] {
        sb.hook(&real_payload("hooks-local", hook));
    }
    let log = sb.log_dir.join("cline").join(format!("{SESSION}.jsonl"));
    let size = std::fs::metadata(&log).unwrap().len();
    // Room for part of the next unit only: session_shutdown maps to two lines.
    let pid = daemon.child.id().to_string();
    let limit = format!("--fsize={}:unlimited", size + 100);
    assert!(std::process::Command::new("prlimit")
        .args(["--pid", &pid, &limit])
        .status()
        .unwrap()
        .success());
    let out = sb.hook(&payload(
        "hooks-cancel",
        "session_shutdown",
        SESSION,
        Some("2026-11-30T02:53:30.000Z"),
    ));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HTTP 500"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        size,
        "rolled back to the last whole unit"
    );
    assert_eq!(sb.spooled(), 1);
    assert!(std::process::Command::new("prlimit")
        .args(["--pid", &pid, "--fsize=unlimited"])
        .status()
        .unwrap()
        .success());
    wait_until("the retry", || sb.spooled() == 0);
    let events = sb.log(SESSION);
    assert_eq!(
        types(&events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "run.cancelled",
            "session.ended"
        ]
    );
    support::daemon::assert_valid_stream(&events);
    // /metrics: the failed write counted, the hook failed live (and in any spool pass that ran
    // before the limit was lifted), then recorded from the spool once.
    let (_, metrics) = support::daemon::http(&daemon.addr(), "GET", "/metrics", &[], b"");
    let value = |series: &str| -> f64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("{series} ")))
            .unwrap_or_else(|| panic!("no {series}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("aep_cline_log_write_errors_total") >= 1.0, "{metrics}");
    assert!(value(r#"aep_cline_hooks_total{hook="session_shutdown",outcome="failed"}"#) >= 1.0);
    assert_eq!(
        value(r#"aep_cline_hooks_total{hook="session_shutdown",outcome="spooled"}"#),
        1.0
    );
    drop(daemon);
}

#[test]
fn one_firing_delivered_by_two_hook_files_is_recorded_once() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let start = real_payload("hooks-local", "agent_start");
    // Cline hands the same payload to the hook file of every folder it reads.
    let both: Vec<_> = (0..2)
        .map(|_| {
            let (sb_state, sb_home, sb_logs, start) = (
                sb.state_dir.clone(),
                sb.root.path().to_path_buf(),
                sb.log_dir.clone(),
                start.clone(),
            );
            std::thread::spawn(move || {
                use std::io::Write;
                let mut child = std::process::Command::new(support::daemon::BIN)
                    .arg("hook")
                    .env("HOME", sb_home)
                    .env("AEP_LOG_DIR", sb_logs)
                    .env("AEP_CLINE_STATE_DIR", sb_state)
                    .stdin(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                child.stdin.take().unwrap().write_all(&start).unwrap();
                child.wait().unwrap()
            })
        })
        .collect();
    for shim in both {
        assert!(shim.join().unwrap().success());
    }
    sb.hook(&real_payload("hooks-local", "tool_call"));
    sb.hook(&real_payload("hooks-local", "tool_call"));
    assert_eq!(
        types(&sb.log(SESSION)),
        ["session.started", "run.started", "tool.requested"]
    );
    drop(daemon);
}

#[test]
fn state_and_log_folders_are_owner_only_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let under_umask_000 = |args: &[&str]| {
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg("umask 000; exec \"$0\" \"$@\"")
            .arg(support::daemon::BIN)
            .args(args)
            .env("HOME", sb.root.path())
            .env("AEP_LOG_DIR", &sb.log_dir)
            .env("AEP_CLINE_STATE_DIR", &sb.state_dir);
        cmd
    };
    // No daemon yet: the shim creates the state folder and the spool.
    let payload = sb.root.path().join("payload.json");
    std::fs::write(&payload, real_payload("hooks-local", "agent_start")).unwrap();
    let shim = under_umask_000(&["hook"])
        .stdin(std::fs::File::open(&payload).unwrap())
        .output()
        .unwrap();
    assert!(shim.status.success());
    let mut daemon = under_umask_000(&["daemon"])
        .env("AEP_LISTEN", "127.0.0.1:0")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the daemon's log", || !sb.log(SESSION).is_empty());
    for dir in [
        sb.state_dir.clone(),
        spool::dir(&sb.state_dir),
        sb.log_dir.clone(),
        sb.log_dir.join("cline"),
    ] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    let log = sb.log_dir.join("cline").join(format!("{SESSION}.jsonl"));
    assert_eq!(std::fs::metadata(log).unwrap().permissions().mode() & 0o777, 0o600);
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn an_open_state_folder_is_tightened_at_start_and_a_shared_one_refused() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    std::fs::create_dir_all(&sb.state_dir).unwrap();
    std::fs::set_permissions(&sb.state_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let daemon = sb.start();
    let mode = std::fs::metadata(&sb.state_dir).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);
    let said = daemon.wait_stderr("tightened it to 0700", Duration::from_secs(10));
    assert!(said.contains("0755"), "says what it was: {said}");
    let (status, stderr) = daemon.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(stderr.matches("tightened it to 0700").count(), 1, "said once: {stderr}");
    // A shared folder like /tmp itself: refused, left as it was, and the error says the fix.
    let shared = sb.root.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let said = sb.root.path().join("refused.stderr");
    let mut refused = std::process::Command::new(support::daemon::BIN)
        .arg("daemon")
        .env("HOME", sb.root.path())
        .env("AEP_LOG_DIR", &sb.log_dir)
        .env("AEP_CLINE_STATE_DIR", &shared)
        .env("AEP_LISTEN", "127.0.0.1:0")
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    // A daemon that took the folder would serve on: wait for its exit, but not for ever.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = refused.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = refused.kill();
            let _ = refused.wait();
            panic!(
                "the daemon took the shared folder: {}",
                std::fs::read_to_string(&said).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&said).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("shared folder") && stderr.contains("set AEP_CLINE_STATE_DIR"),
        "{stderr}"
    );
    let mode = std::fs::metadata(&shared).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o1777);
    assert!(!shared.join("daemon.lock").exists(), "nothing written in it");
}

/// Runs the shim as a child of a shell that stays (as Cline stays while its run goes on), and
/// returns that shell: the shim's parent.
fn cline_stand_in(sb: &Sandbox, payloads: &[Vec<u8>]) -> std::process::Child {
    cline_stand_in_at(sb, sb.root.path(), payloads)
}

/// [`cline_stand_in`] with `home` as its `HOME` (the shim names `$HOME/.cline/data` as Cline's
/// data folder).
fn cline_stand_in_at(sb: &Sandbox, home: &std::path::Path, payloads: &[Vec<u8>]) -> std::process::Child {
    let dir = (1..)
        .map(|n| sb.root.path().join(format!("stand-in-{n}")))
        .find(|d| std::fs::create_dir(d).is_ok())
        .unwrap();
    let mut script = String::new();
    for (i, p) in payloads.iter().enumerate() {
        let file = dir.join(format!("p{i}.json"));
        std::fs::write(&file, p).unwrap();
        script.push_str(&format!("\"$0\" hook < '{}'; ", file.display()));
    }
    script.push_str("exec sleep 60");
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(support::daemon::BIN)
        .env("HOME", home)
        .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
        .spawn()
        .unwrap()
}

/// Waits until the reconciler has judged every session open so far (a later marker, not a
/// sleep): a stand-in Cline is killed and its session's end awaited; twice, as one pass judges
/// its sessions in no set order and the second probe's end comes on a later pass.
fn wait_reconciled(sb: &Sandbox) {
    wait_reconciled_at(sb, sb.root.path());
}

/// [`wait_reconciled`] with probes whose Cline data folder is `home`'s.
fn wait_reconciled_at(sb: &Sandbox, home: &std::path::Path) {
    for probe in ["probe-1", "probe-2"] {
        let mut cline = cline_stand_in_at(sb, home, &[payload("hooks-local", "agent_start", probe, None)]);
        sb.wait_log(probe, "the probe's run", Duration::from_secs(20), |e| e.len() >= 2);
        cline.kill().unwrap();
        cline.wait().unwrap();
        sb.wait_log(
            probe,
            "the killed probe's session ended",
            Duration::from_secs(30),
            |e| e.iter().any(|e| e["type"] == "session.ended"),
        );
    }
}

#[test]
fn a_killed_cline_ends_its_open_run_and_its_session_within_seconds() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut cline = cline_stand_in(
        &sb,
        &[
            real_payload("hooks-local", "agent_start"),
            real_payload("hooks-local", "tool_call"),
        ],
    );
    sb.wait_for_events(SESSION, 3);
    wait_reconciled(&sb);
    assert_eq!(sb.log(SESSION).len(), 3, "nothing ends while Cline lives");
    cline.kill().unwrap();
    cline.wait().unwrap();
    let events = sb.wait_for_events(SESSION, 5);
    support::daemon::assert_cut_short(&events);
    drop(daemon);
}

#[test]
fn a_cline_that_exits_after_its_run_ends_its_session_normally() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut cline = cline_stand_in(
        &sb,
        &[
            real_payload("hooks-local", "agent_start"),
            real_payload("hooks-local", "agent_end"),
        ],
    );
    sb.wait_for_events(SESSION, 3);
    cline.kill().unwrap(); // `cline --json "task"` exits when its run is done
    cline.wait().unwrap();
    let events = sb.wait_for_events(SESSION, 4);
    assert_eq!(
        types(&events),
        ["session.started", "run.started", "run.finished", "session.ended"]
    );
    assert_eq!(events[3]["data"]["reason"], "normal");
    drop(daemon);
}

/// Cline's `db/sessions.db` under `home`, Cline 3.0.65's schema, with `session`'s row saying it
/// completed (and no session file beside it).
fn store_says_completed(home: &std::path::Path, session: &str) -> std::path::PathBuf {
    let db = home.join(".cline/data/db/sessions.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let schema = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cline-usage/tests/data/captured/sessions.db.schema.sql"
    ))
    .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    // The captured dump lists SQLite's own table, which SQLite makes itself.
    conn.execute_batch(&schema.replace("CREATE TABLE sqlite_sequence(name,seq);", ""))
        .unwrap();
    conn.execute(
        "INSERT INTO sessions (session_id, source, pid, started_at, ended_at, exit_code, status, interactive, \
         provider, model, cwd, workspace_root, enable_tools, enable_spawn, enable_teams, hook_path, updated_at) \
         VALUES (?1, 'cli', 1, '2026-12-01T05:05:40.000Z', '2026-12-01T05:05:51.796Z', 0, 'completed', 0, \
         'openai-compatible', 'fake-model', '/w', '/w', 1, 1, 1, '', '2026-12-01T05:05:51.796Z')",
        [session],
    )
    .unwrap();
    db
}

/// A python3 process holding `db` with `BEGIN EXCLUSIVE` (every reader gets SQLITE_BUSY) until
/// its stdin closes; returned once it holds it.
fn hold_exclusively(db: &std::path::Path) -> std::process::Child {
    use std::io::BufRead;
    let mut holder = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             print('held', flush=True)\n\
             sys.stdin.read()\n\
             c.execute('COMMIT')\n",
        )
        .arg(db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "held");
    holder
}

#[test]
fn a_locked_sessions_db_is_read_again_later_not_taken_for_no_evidence() {
    use std::io::Write;
    let sb = Sandbox::new();
    let db = store_says_completed(sb.root.path(), SESSION);
    // Another process holds Cline's database exclusively (as one did while Cline exited).
    let mut holder = hold_exclusively(&db);
    let daemon = sb.start();
    let mut cline = cline_stand_in(
        &sb,
        &[
            real_payload("hooks-local", "agent_start"),
            real_payload("hooks-local", "tool_call"),
        ],
    );
    sb.wait_for_events(SESSION, 3);
    cline.kill().unwrap();
    cline.wait().unwrap();
    daemon.wait_stderr("Cline's store cannot be read", Duration::from_secs(30));
    // Probes of a Cline with no database end: the reconciler has judged the session since its
    // process went (and its hooks settled), and wrote nothing.
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    wait_reconciled_at(&sb, &elsewhere);
    assert_eq!(
        types(&sb.log(SESSION)),
        ["session.started", "run.started", "tool.requested"],
        "no end while its evidence cannot be read"
    );
    // Released: the row is read, and says the run completed.
    holder.stdin.take().unwrap().write_all(b"").unwrap();
    assert!(holder.wait().unwrap().success());
    let events = sb.wait_for_events(SESSION, 5);
    assert_eq!(
        types(&events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "run.finished",
            "session.ended"
        ]
    );
    assert_eq!(events[4]["data"]["reason"], "normal");
    assert_eq!(events[4]["data"]["detected"]["by"], "cline_store");
    assert!(events[4]["data"]["detected"].get("unread").is_none(), "{}", events[4]);
    assert_eq!(events[4]["time"], "2026-12-01T05:05:51.796Z", "at the row's end");
    support::daemon::assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn a_store_locked_past_its_patience_ends_the_session_saying_what_was_not_read() {
    let sb = Sandbox::new().with_env("AEP_SESSION_STORE_PATIENCE", "2s");
    let db = store_says_completed(sb.root.path(), SESSION);
    let mut holder = hold_exclusively(&db);
    let daemon = sb.start();
    let mut cline = cline_stand_in(
        &sb,
        &[
            real_payload("hooks-local", "agent_start"),
            real_payload("hooks-local", "tool_call"),
        ],
    );
    sb.wait_for_events(SESSION, 3);
    cline.kill().unwrap();
    cline.wait().unwrap();
    // Held for good: once its patience is spent it ends on what is known (the process went),
    // and says what it could not read.
    let events = sb.wait_for_events(SESSION, 5);
    support::daemon::assert_cut_short(&events);
    let detected = &events[4]["data"]["detected"];
    assert_eq!(detected["by"], "process_gone", "{detected}");
    assert_eq!(detected["unread"]["source"], "cline_store", "{detected}");
    assert!(detected["unread"]["waited_s"].as_u64().unwrap() >= 2, "{detected}");
    assert!(
        detected["unread"]["problem"].as_str().unwrap().contains("sessions.db"),
        "{detected}"
    );
    daemon.wait_stderr("Cline's store still cannot be read", Duration::from_secs(10));
    drop(holder.stdin.take());
    holder.wait().unwrap();
    drop(daemon);
}

/// A spooled firing of `session`, fired at `fired` (wall clock, ns).
fn spooled_at(delivery: &str, hook: &str, session: &str, fired: u64) -> Spooled {
    Spooled {
        firing: Firing {
            delivery: Some(delivery.to_string()),
            fired: Some(fired),
            ..Firing::default()
        },
        body: String::from_utf8(payload("hooks-local", hook, session, None)).unwrap(),
    }
}

/// The deliveries of a log's Events, in log order, each once.
fn deliveries_in_order(events: &[Value]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for d in events.iter().filter_map(|e| e["clinehook"].as_str()) {
        if order.last().map(String::as_str) != Some(d) {
            order.push(d.to_string());
        }
    }
    order
}

#[test]
fn a_wall_clock_set_back_while_no_daemon_runs_does_not_reorder_a_session() {
    let sb = Sandbox::new();
    let now = aep_cline::firing::now_ns();
    // An earlier version's entry, named by its wall-clock firing time: it still drains, first.
    let old = spooled_at("d1", "agent_start", "step", now - 10_000_000_000);
    let dir = spool::dir(&sb.state_dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{:020}-0000000001-d1.json", old.firing.fired.unwrap())),
        serde_json::to_vec(
            &serde_json::json!({"delivery": "d1", "body": old.body, "fired": old.firing.fired,
            "parent": null, "parent_started": null}),
        )
        .unwrap(),
    )
    .unwrap();
    spool::write(&sb.state_dir, &spooled_at("d2", "tool_call", "step", now)).unwrap();
    // The wall clock is set back an hour: the next firings carry the earlier wall times.
    let hour = 3_600_000_000_000;
    spool::write(&sb.state_dir, &spooled_at("d3", "tool_result", "step", now - hour)).unwrap();
    spool::write(
        &sb.state_dir,
        &spooled_at("d4", "agent_end", "step", now - hour + 1_000_000),
    )
    .unwrap();
    let daemon = sb.start();
    let events = sb.wait_for_events("step", 5);
    assert_eq!(deliveries_in_order(&events), ["d1", "d2", "d3", "d4"], "firing order");
    assert_eq!(
        types(&events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    assert_eq!(
        events[3]["time"],
        aep_cline::firing::rfc3339(now - hour),
        "the Event time is still the wall clock at the firing"
    );
    drop(daemon);
}

#[test]
fn a_fifo_in_clines_store_holds_up_neither_its_sessions_drain_nor_another_sessions_live_hooks() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    // Session "stuck" has a spooled first hook whose Cline store holds a FIFO where its
    // `<id>.json` should be: reading it for the session's model would hang (the store reader
    // skips it; this test once asserted the firing still waited, which held only while the test
    // ran faster than the drain's next pass).
    let data = sb.root.path().join("cline-data");
    let folder = data.join("sessions").join("stuck");
    std::fs::create_dir_all(&folder).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(folder.join("stuck.json"))
        .status()
        .unwrap()
        .success());
    let mut stuck = spooled_at("s1", "agent_start", "stuck", aep_cline::firing::now_ns());
    stuck.firing.cline_data = Some(data.to_str().unwrap().to_string());
    spool::write(&sb.state_dir, &stuck).unwrap();
    // Another session's hooks are recorded whatever the drain does with "stuck" (live; or, on a
    // loaded machine past the shim's budget, spooled and drained: a drain held up by the FIFO
    // would leave them in the spool).
    for hook in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        sb.hook_recorded(&payload("hooks-local", hook, "free", None));
    }
    sb.wait_log("free", "another session's hooks", Duration::from_secs(30), |e| {
        e.len() == 5
    });
    // The FIFO is never waited on: the spooled firing is recorded by the drain too.
    sb.wait_log(
        "stuck",
        "the spooled firing of the session with a FIFO",
        Duration::from_secs(30),
        |e| e.iter().any(|e| e["type"] == "run.started"),
    );
    sb.wait_spool_empty(Duration::from_secs(30));
    drop(daemon);
}

#[test]
fn a_session_whose_log_cannot_be_written_is_retried_with_backoff_not_on_every_hook() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    // A folder stands where "blocked"'s log would be: its spooled firing cannot be recorded.
    std::fs::create_dir_all(sb.log_dir.join("cline").join("blocked.jsonl")).unwrap();
    spool::write(
        &sb.state_dir,
        &spooled_at("b1", "agent_start", "blocked", aep_cline::firing::now_ns()),
    )
    .unwrap();
    // Another session's live hooks, paced over three seconds (the drain passes every second).
    let hooks = ["agent_start", "tool_call", "tool_result", "agent_end"];
    for i in 0..24 {
        sb.hook(&payload(
            "hooks-local",
            hooks[i % 4],
            "busy",
            Some(&format!("2026-11-30T02:53:{i:02}.000Z")),
        ));
        std::thread::sleep(Duration::from_millis(125));
    }
    assert_eq!(sb.spooled(), 1, "still waiting");
    let (_, stderr) = daemon.stop();
    let retries = stderr.matches("spooled hooks of this session wait").count();
    assert!(
        (1..=5).contains(&retries),
        "tried at first, then after 1 s, 2 s, ...; not once per live hook: {retries} tries\n{stderr}"
    );
}

#[test]
fn a_daemon_draining_at_start_refuses_a_shim_at_once_instead_of_leaving_it_waiting() {
    let sb = Sandbox::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let now = aep_cline::firing::now_ns();
    let pile = 200;
    for i in 0..pile {
        spool::write(&sb.state_dir, &spooled_at(&format!("p{i}"), "tool_call", "pile", now)).unwrap();
    }
    // The discovery file a daemon killed earlier left: it names the port the next one takes.
    let socket = sb.state_dir.join("daemon.sock");
    std::fs::write(
        sb.state_dir.join("daemon.json"),
        serde_json::json!({"url": format!("http://127.0.0.1:{port}"), "token": "old", "pid": 1, "version": "0",
                           "socket": socket})
        .to_string(),
    )
    .unwrap();
    let mut daemon = std::process::Command::new(support::daemon::BIN)
        .arg("daemon")
        .env("HOME", sb.root.path())
        .env("AEP_LOG_DIR", &sb.log_dir)
        .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
        .env("AEP_LISTEN", format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the start-up drain", || sb.spooled() < pile);
    let out = sb.hook(&payload("hooks-local", "agent_start", "free", None));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the daemon cannot be reached") && err.contains("spooled"),
        "a shim arriving during the drain finds no socket yet and spools at once, never held: {err}"
    );
    let events = sb.wait_for_events("free", 2);
    assert_eq!(types(&events), ["session.started", "run.started"]);
    let _ = daemon.kill();
    let _ = daemon.wait();
}
