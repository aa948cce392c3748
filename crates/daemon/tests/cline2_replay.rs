//! Cline 2.18's captured hook payloads (`crates/cline-hooks/tests/data/cline2/`, every folder's
//! copy) replayed through the real shim into a real daemon, against the log expected per case
//! (`tests/data/cline2-replay/<case>.json`; `UPDATE_GOLDEN=1` rewrites them for review). And
//! 2.x's trailing TaskCancel raced against its TaskComplete by concurrent shims, in both orders.

use crate::support;

use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;
use support::daemon::{assert_valid_stream, of, types, Sandbox, BIN};

/// How long a probe's held TaskCancel may take to be applied: the hold (2 s) and the tick (1 s),
/// with room for a loaded machine.
const HOLD_WITHIN: Duration = Duration::from_secs(30);

fn captures(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cline-hooks/tests/data/cline2")
        .join(case)
}

/// Every capture file of a case, in hook process start order: `(label, payload bytes)`. The
/// bytes are the payload re-serialized; every folder's copy of a firing is the same JSON, so
/// the copies stay byte-identical (one delivery id), as Cline's are.
fn firings(case: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(captures(case))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let capture: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            let label = capture["meta"]["label"].as_str().unwrap().to_string();
            (label, serde_json::to_vec(&capture["payload"]).unwrap())
        })
        .collect()
}

/// Starts one shim (`aep-cline hook`) with `payload` on its stdin.
fn shim(sb: &Sandbox, payload: &[u8]) -> Child {
    let mut child = std::process::Command::new(BIN)
        .arg("hook")
        .env("HOME", sb.root.path())
        .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn aep-cline hook");
    child.stdin.take().unwrap().write_all(payload).unwrap();
    child
}

/// Waits for a shim; one that outlasted its 250 ms budget on a loaded machine spooled its hook,
/// and returns once the daemon has drained it: recorded either way.
fn finish(sb: &Sandbox, child: Child) {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    if !said.is_empty() {
        assert!(said.contains("spooled for the daemon"), "the shim said: {said}");
        sb.wait_spool_empty(Duration::from_secs(30));
    }
}

/// Waits until the hold of every 2.x TaskCancel sent so far is over and applied, by a later
/// marker rather than a sleep: the a-cmd run's start and a TaskCancel, in a probe session of its
/// own, whose `run.cancelled` is awaited; twice. The daemon's tick applies every due cancel at
/// once, in no set order, so the first probe's may be written before an older one; the second
/// probe's, held only after the first was applied, is applied on a later tick.
fn wait_past_the_hold(sb: &Sandbox) {
    let all = firings("a-cmd");
    for probe in ["1796100000001", "1796100000002"] {
        for hook in ["TaskStart", "UserPromptSubmit", "TaskCancel"] {
            let (_, payload) = all.iter().find(|(_, p)| hook_name(p) == hook).unwrap();
            let payload = String::from_utf8(payload.clone())
                .unwrap()
                .replace("1796103184924", probe);
            finish(sb, shim(sb, payload.as_bytes()));
        }
        sb.wait_log(probe, "the probe's held TaskCancel applied", HOLD_WITHIN, |e| {
            e.iter().any(|e| e["type"] == "run.cancelled")
        });
    }
}

/// A payload's `hookName`.
fn hook_name(payload: &[u8]) -> String {
    serde_json::from_slice::<Value>(payload).unwrap()["hookName"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The log without what is minted per run: `run` and `cause` as indexes into the log.
fn view(log: &[Value]) -> Vec<Value> {
    let index = |id: &Value| log.iter().position(|e| e["id"] == *id);
    let run = |r: &Value| log.iter().position(|e| e["type"] == "run.started" && e["run"] == *r);
    log.iter()
        .map(|e| {
            json!({
                "type": e["type"], "time": e["time"], "seq": e["seq"], "severity": e["severity"],
                "subject": e["subject"], "run": run(&e["run"]), "cause": index(&e["cause"]),
                "capture": e["capture"], "data": e["data"],
            })
        })
        .collect()
}

fn golden(case: &str, log: &[Value]) {
    let got = Value::Array(view(log));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/cline2-replay/{case}.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; UPDATE_GOLDEN=1 writes it", path.display())),
    )
    .unwrap();
    assert_eq!(
        got,
        want,
        "{case}: got\n{}",
        serde_json::to_string_pretty(&got).unwrap()
    );
}

/// Replays a case: each firing's copies (one per folder) by concurrent shims, firings one
/// after another, as Cline runs them; then waits out the TaskCancel hold.
fn replay(case: &str, session: &str) -> Vec<Value> {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let all = firings(case);
    let mut i = 0;
    while i < all.len() {
        let group: Vec<&(String, Vec<u8>)> = all[i..].iter().take_while(|(_, p)| *p == all[i].1).collect();
        i += group.len();
        let shims: Vec<Child> = group.iter().map(|(_, p)| shim(&sb, p)).collect();
        shims.into_iter().for_each(|c| finish(&sb, c));
    }
    wait_past_the_hold(&sb);
    let log = sb.log(session);
    assert_valid_stream(&log);
    // One record per firing, whatever the folders: every Event names its delivery.
    let deliveries: std::collections::HashSet<&str> = log.iter().filter_map(|e| e["clinehook"].as_str()).collect();
    let distinct: std::collections::HashSet<&Vec<u8>> = all.iter().map(|(_, p)| p).collect();
    assert!(
        deliveries.len() <= distinct.len(),
        "{case}: {} deliveries",
        deliveries.len()
    );
    for d in &deliveries {
        let events: Vec<&Value> = log.iter().filter(|e| e["clinehook"] == *d).collect();
        let first = log.iter().position(|e| e["clinehook"] == *d).unwrap();
        assert!(
            events.iter().enumerate().all(|(k, e)| log[first + k] == **e),
            "{case}: a firing's Events are one unit, recorded once"
        );
    }
    golden(case, &log);
    drop(daemon);
    log
}

#[test]
fn a_successful_run_replayed_from_every_folder() {
    let log = replay("a-cmd", "1796103184924");
    assert_eq!(
        types(&log),
        [
            "session.started",
            "run.started",
            "x.cline.prompt.submitted",
            "tool.requested",
            "tool.completed",
            "run.finished",
            "x.cline.notification.sent",
            "x.cline.notification.sent"
        ],
        "three folders, one record each; the trailing TaskCancel cancels nothing"
    );
    assert_eq!(
        of(&log, "tool.completed")[0]["cause"],
        of(&log, "tool.requested")[0]["id"]
    );
}

#[test]
fn a_command_that_exits_2_replayed_is_a_failed_tool() {
    let log = replay("c-cmdfail", "1796103200033");
    let failed = of(&log, "tool.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["error"]["type"], "exit_code");
    assert_eq!(of(&log, "run.finished").len(), 1);
    assert!(of(&log, "run.cancelled").is_empty());
}

#[test]
fn a_model_error_replayed_fails_its_run_at_the_cancel() {
    let log = replay("d-error500", "1796103205397");
    assert!(of(&log, "run.cancelled").is_empty(), "nobody cancelled it");
    let failed = of(&log, "run.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["reason"], "api_req_failed");
    assert_eq!(failed[0]["data"]["error"]["status"], 500);
    assert_eq!(
        failed[0]["time"], "2026-12-01T05:33:46.650Z",
        "the TaskCancel's own time"
    );
    let note = log
        .iter()
        .position(|e| e["type"] == "x.cline.notification.sent")
        .unwrap();
    let terminal = log.iter().position(|e| e["type"] == "run.failed").unwrap();
    assert!(note < terminal, "why, then the terminal");
}

#[test]
fn a_hook_cancelled_run_replayed_is_cancelled_by_the_user() {
    let log = replay("s2-pre-cancel", "1796102559813");
    let cancelled = of(&log, "run.cancelled");
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["data"]["by"], "user");
    assert!(of(&log, "tool.completed").is_empty() && of(&log, "tool.failed").is_empty());
}

/// The a-cmd run up to its PostToolUse, then TaskComplete and TaskCancel fired at once from all
/// three folders (six shims), the cancel's processes started first or last.
fn race(cancel_first: bool) {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let all = firings("a-cmd");
    let mut done = std::collections::HashSet::new();
    for (_, p) in &all {
        let n = hook_name(p);
        if matches!(n.as_str(), "TaskComplete" | "TaskCancel" | "Notification") || !done.insert(p.clone()) {
            continue;
        }
        finish(&sb, shim(&sb, p));
    }
    let pick = |hook: &str| -> Vec<Vec<u8>> {
        all.iter()
            .filter(|(_, p)| hook_name(p) == hook)
            .map(|(_, p)| p.clone())
            .collect()
    };
    let (first, second) = if cancel_first {
        (pick("TaskCancel"), pick("TaskComplete"))
    } else {
        (pick("TaskComplete"), pick("TaskCancel"))
    };
    let mut shims: Vec<Child> = first.iter().map(|p| shim(&sb, p)).collect();
    // The scenario: the first hook's processes get a head start, as 2.x's do.
    std::thread::sleep(Duration::from_millis(40));
    shims.extend(second.iter().map(|p| shim(&sb, p)));
    shims.into_iter().for_each(|c| finish(&sb, c));
    wait_past_the_hold(&sb);
    let log = sb.log("1796103184924");
    assert_valid_stream(&log);
    let terminals: Vec<&str> = types(&log)
        .into_iter()
        .filter(|t| matches!(*t, "run.finished" | "run.cancelled" | "run.failed"))
        .collect();
    assert_eq!(
        terminals,
        ["run.finished"],
        "cancel first: {cancel_first}; {:?}",
        types(&log)
    );
    assert_eq!(of(&log, "run.finished")[0]["data"]["duration_ms"], 2500);
    drop(daemon);
}

#[test]
fn the_trailing_cancel_racing_ahead_of_the_completion_cancels_nothing() {
    race(true);
}

#[test]
fn the_trailing_cancel_after_the_completion_cancels_nothing() {
    race(false);
}

#[test]
fn a_bad_2x_payload_is_refused_with_the_field_named_and_not_spooled() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let cases: [(&[u8], &str); 2] = [
        (
            br#"{"hookName":"PreToolUse","taskId":{"id":"sk-live-SECRET"},"preToolUse":{"toolName":"x"}}"#,
            "`taskId`",
        ),
        (br#"{"hookName":"TaskStart","timestamp":"1796103185048"}"#, "neither"),
    ];
    for (body, _) in cases {
        let out = sb.hook(body);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "the shim never fails Cline"
        );
        assert!(err.contains("HTTP 400"), "{err}");
        assert!(!err.contains("SECRET"));
    }
    assert_eq!(sb.spooled(), 0, "refused for good: not spooled");
    // An optional field of the wrong type is read as absent: the hook is recorded.
    let out = sb.hook(
        br#"{"hookName":"PostToolUse","taskId":"17","postToolUse":{"toolName":"x","parameters":"sk-live-SECRET","success":"yes"}}"#,
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("HTTP"));
    assert!(!sb.log("17").is_empty());
    // What the daemon said names the field, never the value.
    let (status, text) = daemon.stop();
    assert!(status.success());
    assert!(!text.contains("SECRET"));
    let dropped = ["postToolUse.parameters", "postToolUse.success"];
    for says in cases.iter().map(|(_, says)| *says).chain(dropped) {
        assert!(text.contains(says), "the daemon's log names {says}: {text}");
    }
    // A 2.x payload with fields no Cline sends still maps (unknown fields are tolerated).
    let sb = Sandbox::new();
    let daemon = sb.start();
    let out = sb.hook(br#"{"hookName":"TaskStart","taskId":"18","timestamp":"1796103185048","future":{"x":1},"taskStart":{"taskMetadata":{"new":true}}}"#);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert_eq!(types(&sb.log("18")), ["session.started", "run.started"]);
    drop(daemon);
}

// ---- When does a 2.x session end: its task record (README "When does a session end") ----

/// The storage 2.18 left for a captured case: its `tasks/<id>/` folder copied into `data`.
fn task_record(case: &str, task: &str, data: &std::path::Path) {
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cline-usage/tests/data/cline2")
        .join(case)
        .join("tasks")
        .join(task);
    let to = data.join("tasks").join(task);
    std::fs::create_dir_all(&to).unwrap();
    for file in std::fs::read_dir(from).unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
    }
}

/// A 2.18 task's firings (the workspace folder's copies) up to, not including, `until`, posted
/// from `cline` as its shim does (its process, its data folder `data`); then the daemon stops,
/// 2.18 ends the task and writes its record while no daemon runs, its last hooks reach no
/// daemon (the hook processes died with the CLI), the CLI exits, and the daemon starts again.
/// Returns the session's log once it has ended.
fn ended_while_down(case: &str, task: &str, until: &str) -> (Sandbox, Vec<Value>) {
    use crate::daemon_lifecycle::{post_from, Cline};
    let sb = Sandbox::new();
    let data = sb.root.path().join("cline-data");
    let daemon = sb.start();
    let mut cline = Cline::start();
    for (i, (_, payload)) in firings(case)
        .iter()
        .filter(|(label, _)| label == "workspace")
        .take_while(|(_, p)| serde_json::from_slice::<Value>(p).unwrap()["hookName"] != until)
        .enumerate()
    {
        let status = post_from(
            &daemon.addr(),
            &daemon.token,
            payload,
            &format!("{task}-{i}"),
            &cline,
            Some(&data),
        );
        assert_eq!(status, 200);
    }
    assert!(daemon.stop().0.success());
    task_record(case, task, &data);
    cline.exit();
    let _daemon = sb.start();
    let log = sb.wait_log(task, "session.ended", Duration::from_secs(20), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_valid_stream(&log);
    (sb, log)
}

#[test]
fn a_2x_task_that_failed_while_the_daemon_was_down_ends_failed_as_its_record_says() {
    let task = "1796103205397";
    let (sb, log) = ended_while_down("d-error500", task, "Notification");
    assert_eq!(
        types(&log),
        [
            "session.started",
            "run.started",
            "x.cline.prompt.submitted",
            "run.failed",
            "session.ended"
        ],
        "never run.cancelled: the model failed"
    );
    let failed = of(&log, "run.failed")[0];
    assert_eq!(failed["data"]["reason"], "api_req_failed");
    assert_eq!(failed["data"]["error"], json!({"type": "server_error", "status": 500}));
    let ended = &log[4];
    assert_eq!(ended["data"]["reason"], "error");
    assert_eq!(ended["data"]["detected"]["by"], "cline_store");
    for e in &log[3..] {
        assert_eq!(
            e["time"], "2026-12-01T05:33:46.823Z",
            "at the task's last message, not when the daemon found out: {e}"
        );
    }
    assert_eq!(support::daemon::project(&log), (true, 0));
    let listed = sb.sessions_json();
    assert_eq!(listed[task]["state"], "ended", "{}", listed[task]);
    assert_eq!(listed[task]["failures"], 1, "{}", listed[task]);
}

#[test]
fn a_2x_task_that_completed_while_the_daemon_was_down_ends_finished_not_idle() {
    let task = "1796103184924";
    let (sb, log) = ended_while_down("a-cmd", task, "TaskComplete");
    assert_eq!(terminals(&log), ["run.finished"], "{:?}", types(&log));
    assert!(of(&log, "run.cancelled").is_empty());
    let ended = of(&log, "session.ended")[0];
    assert_eq!(ended["data"]["reason"], "normal");
    assert_eq!(ended["data"]["detected"]["by"], "cline_store");
    assert_eq!(ended["time"], "2026-12-01T05:33:07.963Z");
    assert_eq!(of(&log, "run.finished")[0]["time"], "2026-12-01T05:33:07.963Z");
    assert_eq!(sb.sessions_json()[task]["state"], "ended");
}

#[test]
fn a_2x_model_failure_whose_notification_is_lost_still_fails_its_run() {
    use crate::daemon_lifecycle::{post_from, Cline};
    let task = "1796103205397";
    let sb = Sandbox::new();
    let data = sb.root.path().join("cline-data");
    // 2.18 writes its record as the task goes: `ask: api_req_failed` is in it by the cancel.
    task_record("d-error500", task, &data);
    let daemon = sb.start();
    let mut cline = Cline::start();
    // Every firing but the `Notification {source: api_req_failed}` (late, or lost).
    for (i, (_, payload)) in firings("d-error500")
        .iter()
        .filter(|(label, p)| {
            label == "workspace" && serde_json::from_slice::<Value>(p).unwrap()["hookName"] != "Notification"
        })
        .enumerate()
    {
        let status = post_from(
            &daemon.addr(),
            &daemon.token,
            payload,
            &format!("{task}-{i}"),
            &cline,
            Some(&data),
        );
        assert_eq!(status, 200);
    }
    let log = sb.wait_log(task, "the held TaskCancel applied", Duration::from_secs(20), |e| {
        terminals(e).len() == 1
    });
    assert_eq!(
        terminals(&log),
        ["run.failed"],
        "nobody cancelled it: {:?}",
        types(&log)
    );
    let failed = of(&log, "run.failed")[0];
    assert_eq!(failed["data"]["reason"], "api_req_failed");
    assert_eq!(failed["data"]["error"], json!({"type": "server_error", "status": 500}));
    assert_eq!(failed["time"], "2026-12-01T05:33:46.650Z", "the TaskCancel's own time");
    cline.exit();
    let log = sb.wait_log(task, "session.ended", Duration::from_secs(20), |e| {
        support::daemon::has(e, "session.ended")
    });
    assert_eq!(of(&log, "session.ended")[0]["data"]["reason"], "error");
    assert_valid_stream(&log);
    drop(daemon);
}

fn terminals(log: &[Value]) -> Vec<&str> {
    types(log)
        .into_iter()
        .filter(|t| matches!(*t, "run.finished" | "run.cancelled" | "run.failed"))
        .collect()
}
