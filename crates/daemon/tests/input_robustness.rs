//! No single input stops recording (issue #19): a hook body that once made the daemon panic,
//! Cline's store with a FIFO where a file should be, a byte order mark, an optional field of
//! the wrong type. Each costs at most its own hook's part; every other session's hooks, and
//! the affected session's own, go on being recorded. The real binary, real sockets and files.

use crate::support;

use aep_cline::lane::{Bus, IngestError, Journal, Sessions};
use aep_core::redact::{RedactOptions, Redactor};
use aep_core::{Capture, CapturePolicy};
use cline_hooks::PayloadError;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use support::daemon::{real_payload, types, Daemon, Sandbox};
use support::wait::wait_until;

const SESSION: &str = "1796007203184_6l7jh";

/// A real 3.x payload moved to `session`.
fn moved(hook: &str, session: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&real_payload("hooks-local", hook)).unwrap();
    v["sessionContext"]["rootSessionId"] = Value::from(session);
    serde_json::to_vec(&v).unwrap()
}

/// The real Cline 2.18 `TaskStart` with its epoch-ms `timestamp` replaced.
fn task_start_2x(timestamp: &str) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cline-hooks/tests/data/cline2/a-cmd/1796103185.222221-TaskStart-hooksdir.json"
    );
    let capture: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut payload = capture["payload"].clone();
    payload["timestamp"] = Value::from(timestamp);
    serde_json::to_vec(&payload).unwrap()
}

/// The daemon took the hook: it neither refused nor failed it (no HTTP status in what the shim
/// says). On a loaded machine the shim may outlast its budget and spool it; then the drain
/// records it, awaited here.
fn assert_recorded(sb: &Sandbox, out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("HTTP "), "{err}");
    if err.contains("spooled") {
        sb.wait_spool_empty(Duration::from_secs(30));
    }
}

/// SIGTERM, and the daemon is gone within `within` (else it is killed and the test fails).
fn stops_promptly(mut daemon: Daemon, within: Duration) {
    daemon.signal("-TERM");
    let status = wait_until("the daemon to stop after SIGTERM", within, || {
        daemon.child.try_wait().unwrap()
    });
    assert!(status.success(), "the daemon stopped with {status}");
}

#[test]
fn a_2x_timestamp_past_year_9999_stops_nothing_and_takes_the_firing_time() {
    let sb = Sandbox::new();
    // No daemon: the shim spools the poison first, then another session's hook behind it.
    let before = aep_cline::firing::now_ns();
    let out = sb.hook(&task_start_2x("9999999999999999"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("spooled"));
    sb.hook(&moved("agent_start", "other"));
    assert_eq!(sb.spooled(), 2);
    let daemon = sb.start();
    // Live hooks of a third session, each of which drains the spool first.
    for hook in ["agent_start", "tool_call", "tool_result"] {
        assert_recorded(&sb, &sb.hook(&moved(hook, "live")));
    }
    assert_eq!(
        types(&sb.log("live")),
        ["session.started", "run.started", "tool.requested", "tool.completed"]
    );
    assert_eq!(types(&sb.log("other")), ["session.started", "run.started"]);
    assert_eq!(sb.spooled(), 0, "the drain got past the poison");
    let poisoned = sb.log("1796103184924");
    assert_eq!(types(&poisoned), ["session.started", "run.started"]);
    let t = aep_core::time::parse(poisoned[0]["time"].as_str().unwrap(), false).unwrap();
    let ns = t.as_nanosecond() as u64;
    assert!(
        ns >= before / 1_000_000 * 1_000_000 && ns <= aep_cline::firing::now_ns(),
        "no time in the payload: the shim's firing time"
    );
    // Live, too: answered, recorded, and the next hook goes on.
    assert_recorded(&sb, &sb.hook(&task_start_2x("253402300800000")));
    assert_recorded(&sb, &sb.hook(&moved("agent_end", "live")));
    stops_promptly(daemon, Duration::from_secs(20));
}

#[test]
fn a_panic_costs_one_piece_of_work_and_leaves_the_session_whole() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::new(
        Journal::new(dir.path()),
        "host".into(),
        CapturePolicy::new(Capture::Metadata),
        Redactor::new(RedactOptions::default()).unwrap(),
        Bus::default(),
    );
    let firing = aep_cline::firing::Firing::default();
    sessions
        .ingest_hook(&real_payload("hooks-local", "agent_start"), &firing)
        .unwrap();
    let panicked = sessions.append(SESSION, || panic!("a bug while planning"));
    match panicked {
        Err(IngestError::Payload(e @ PayloadError::Panicked(_))) => {
            assert!(e.to_string().contains("a bug while planning"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // The same session goes on, its positions unbroken.
    sessions
        .ingest_hook(&real_payload("hooks-local", "tool_call"), &firing)
        .unwrap();
    sessions
        .ingest_hook(&real_payload("hooks-local", "agent_end"), &firing)
        .unwrap();
    let text = std::fs::read_to_string(Journal::new(dir.path()).path(SESSION)).unwrap();
    let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        types(&events),
        ["session.started", "run.started", "tool.requested", "run.finished"]
    );
    support::daemon::assert_valid_stream(&events);
}

/// Makes a FIFO at `path` (in place of whatever was there).
fn fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

#[test]
fn fifos_and_devices_in_clines_store_never_wedge_the_daemon() {
    let sb = Sandbox::new();
    // The shim names `$HOME/.cline/data` as Cline's data folder (the sandbox's HOME).
    let folder = sb.root.path().join(".cline/data/sessions").join(SESSION);
    std::fs::create_dir_all(&folder).unwrap();
    fifo(&folder.join(format!("{SESSION}.json")));
    fifo(&folder.join(format!("{SESSION}.messages.json")));
    // A subagent's file that never ends.
    std::os::unix::fs::symlink("/dev/zero", folder.join("agent_x.messages.json")).unwrap();
    std::fs::create_dir_all(sb.root.path().join(".cline/data/db")).unwrap();
    fifo(&sb.root.path().join(".cline/data/db/sessions.db"));
    // Beside it, the real CLI's store of a session whose two model calls made 45 tokens each.
    const BESIDE: &str = "1796101551589_u7fdi";
    let captured = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cline-usage/tests/data/captured/sessions/1796101551589_u7fdi"
    );
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(captured)
        .arg(sb.root.path().join(".cline/data/sessions"))
        .status()
        .unwrap();
    assert!(copied.success());
    let daemon = sb.start();
    // The first hook reads the store (the model), the terminal one the run's usage. On a loaded
    // machine a hook may be spooled and drained: what must hold is that every one lands and the
    // daemon still stops at once (a wedged daemon does neither).
    let taken = |out: std::process::Output| assert!(out.status.success(), "{out:?}");
    for hook in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        taken(sb.hook(&real_payload("hooks-local", hook)));
        let mut beside: Value = serde_json::from_slice(&moved(hook, BESIDE)).unwrap();
        // The run's window holds both calls (at …51.718 and …51.774).
        match hook {
            "agent_start" => beside["timestamp"] = Value::from("2026-12-01T05:05:51.600Z"),
            "agent_end" => beside["timestamp"] = Value::from("2026-12-01T05:05:52.000Z"),
            _ => {}
        }
        taken(sb.hook(&serde_json::to_vec(&beside).unwrap()));
    }
    let events = sb.wait_for_events(SESSION, 5);
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
    assert!(
        events[4]["data"].get("gen_ai.usage.output_tokens").is_none(),
        "no usage claimed from a store that could not be read: {}",
        events[4]
    );
    let beside = sb.wait_for_events(BESIDE, 5);
    assert_eq!(beside.len(), 5);
    assert_eq!(
        beside[4]["data"]["gen_ai.usage.output_tokens"], 90,
        "a readable store still gives the run its usage: {}",
        beside[4]
    );
    stops_promptly(daemon, Duration::from_secs(20));
}

#[test]
fn a_byte_order_mark_or_an_optional_field_of_the_wrong_type_loses_nothing() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mut start = b"\xEF\xBB\xBF".to_vec();
    start.extend(real_payload("hooks-local", "agent_start"));
    assert_recorded(&sb, &sb.hook(&start));
    let mut call: Value = serde_json::from_slice(&real_payload("hooks-local", "tool_call")).unwrap();
    call["iteration"] = Value::from("one");
    call["userId"] = Value::from(42);
    assert_recorded(&sb, &sb.hook(&serde_json::to_vec(&call).unwrap()));
    let mut wrong: Value = serde_json::from_slice(&real_payload("hooks-local", "tool_result")).unwrap();
    wrong["hookName"] = Value::from(7);
    let out = sb.hook(&serde_json::to_vec(&wrong).unwrap());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HTTP 400"),
        "a required field of the wrong type still refuses the hook: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        types(&sb.log(SESSION)),
        ["session.started", "run.started", "tool.requested"]
    );
    drop(daemon);
}

/// The real `hook` payload with bytes that are not UTF-8 inside a string, as a tool's raw
/// output can carry them.
fn not_utf8(hook: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&real_payload("hooks-local", hook)).unwrap();
    v["note"] = Value::from("@@@@");
    let mut bytes = serde_json::to_vec(&v).unwrap();
    let at = bytes.windows(4).position(|w| w == b"@@@@").unwrap();
    bytes.splice(at..at + 4, *b"\xff\xfe\xff\xfe");
    bytes
}

#[test]
fn a_body_with_invalid_utf8_is_recorded_alike_live_and_spooled() {
    let sb = Sandbox::new();
    sb.hook(&real_payload("hooks-local", "agent_start"));
    // No daemon: spooled (its text made valid), then taken by the daemon's drain.
    let out = sb.hook(&not_utf8("tool_call"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("spooled"));
    let daemon = sb.start();
    // Live: the daemon takes the same text the spool would have (it once answered 400, and
    // the hook was lost while the spooled copy of the same body was recorded).
    assert_recorded(&sb, &sb.hook(&not_utf8("tool_result")));
    assert_eq!(
        types(&sb.log(SESSION)),
        ["session.started", "run.started", "tool.requested", "tool.completed"]
    );
    drop(daemon);
}

/// Runs a user command of the sandbox's; fails the test if it has not finished within a minute.
fn finishes(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(support::daemon::BIN)
        .args(args)
        .env("HOME", sb.root.path())
        .env("AEP_LOG_DIR", &sb.log_dir)
        .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
        .env_remove("CLINE_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("aep-cline {args:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_fifo_named_like_a_hook_in_clines_hook_folders_hangs_no_command() {
    let sb = Sandbox::new();
    let mut fifos = Vec::new();
    for folder in [".cline/hooks", "Documents/Cline/Hooks", "Cline/Hooks"] {
        let dir = sb.root.path().join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        fifo(&dir.join("TaskStart"));
        fifos.push(dir.join("TaskStart"));
    }
    finishes(&sb, &["doctor"]);
    let install = finishes(&sb, &["install-hooks"]);
    let said = String::from_utf8_lossy(&install.stderr);
    assert!(
        !install.status.success()
            && said.contains("a FIFO")
            && fifos.iter().any(|f| said.contains(&f.display().to_string())),
        "install-hooks names the FIFO it cannot replace: {said}"
    );
}
