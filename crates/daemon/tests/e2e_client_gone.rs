//! A session Cline's hub hosts ends when the client that drove it is gone, on the REAL Cline
//! 3.0.65 CLI and hub, offline against the fake model (README "When does a session end", the
//! process that drove the session): the hub runs its hooks and lives on, and its store keeps
//! `running` (a SIGKILLed `cline --json` mid-tool) or `idle` (a TUI left with `/exit` or
//! Ctrl+C), so only the session file's `pid` says no one will continue it.

use crate::support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::cline::ClineSandbox;
use support::daemon::{assert_valid_stream, of, project, types, Sandbox};
use support::fake_model::{FakeModel, Script, MODEL_ID};
use support::real_hub::RealHub;
use support::tmux::Tmux;
use support::wait::{wait_until, wait_until_seen};

/// How long after its client is gone a session may take to end: the store is read every 5 s
/// once the session is quiet, its hooks settle 3 s, and the machine is shared.
const ENDS_WITHIN: Duration = Duration::from_secs(30);

fn store_sessions(cline: &ClineSandbox) -> BTreeSet<String> {
    std::fs::read_dir(cline.cline_dir().join("data/sessions"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn store_record(cline: &ClineSandbox, session: &str) -> Option<Value> {
    let path = cline
        .cline_dir()
        .join("data/sessions")
        .join(session)
        .join(format!("{session}.json"));
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn new_session(cline: &ClineSandbox, before: &BTreeSet<String>) -> String {
    wait_until("the run's session in Cline's store", Duration::from_secs(60), || {
        store_sessions(cline).difference(before).next().cloned()
    })
}

/// Whether process `pid` still runs (not a zombie).
fn runs(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// Asserts the session ended once, found as `by` says (its client gone, for a session the hub
/// hosts), within [`ENDS_WITHIN`] of `gone`, with no run left open; returns its log.
fn assert_ended(aep: &Sandbox, session: &str, gone: Instant, reason: &str, by: &[&str]) -> Vec<Value> {
    let log = aep.wait_log(session, "session.ended", ENDS_WITHIN + Duration::from_secs(30), |e| {
        support::daemon::has(e, "session.ended")
    });
    let took = gone.elapsed();
    eprintln!("{session}: ended {took:?} after its client left: {:?}", types(&log));
    assert!(took < ENDS_WITHIN, "ended within {ENDS_WITHIN:?} (took {took:?})");
    let ended = of(&log, "session.ended");
    assert_eq!(ended.len(), 1, "ended once: {:?}", types(&log));
    let found = ended[0]["data"]["detected"]["by"].as_str().unwrap_or_default();
    assert!(by.contains(&found), "found by {found}, not {by:?}: {}", ended[0]);
    assert_eq!(ended[0]["data"]["reason"], reason, "{}", ended[0]);
    assert_eq!(project(&log), (true, 0), "a consumer sees it over, no run open");
    assert_valid_stream(&log);
    assert_eq!(aep.sessions_json()[session]["state"], "ended");
    log
}

#[test]
fn sigkill_of_a_hub_hosted_cline_json_mid_tool_ends_the_session() {
    let model = FakeModel::start(Script::command("touch started && sleep 60"));
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    let hub = RealHub::ensure(&cline);
    let _daemon = aep.start();
    let before = store_sessions(&cline);
    let mut cmd = hub.command(&[
        "--json",
        "-P",
        "openai-compatible",
        "-m",
        MODEL_ID,
        "Run the command and report what it printed.",
    ]);
    cmd.env("CLINE_SESSION_BACKEND_MODE", "hub")
        .current_dir(cline.workspace())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut run = cmd.spawn().expect("spawn cline");
    let marker = cline.workspace().join("started");
    wait_until("the command to start", Duration::from_secs(90), || {
        marker.exists().then_some(())
    });
    let session = new_session(&cline, &before);
    let record = store_record(&cline, &session).expect("the session file");
    eprintln!("session file pid {} (cline {})", record["pid"], run.id());
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    let gone = Instant::now();
    let log = assert_ended(&aep, &session, gone, "killed", &["client_gone"]);
    let cancelled = of(&log, "run.cancelled");
    assert_eq!(cancelled.len(), 1, "the open run is cut short: {:?}", types(&log));
    assert_eq!(cancelled[0]["data"]["by"], "shutdown");
    let record = store_record(&cline, &session).unwrap();
    eprintln!(
        "the store now: status {} ended_at {}",
        record["status"], record["ended_at"]
    );
}

/// A TUI through the hub runs `please CMD:echo hi` to its end (the session is then `idle`), and
/// is left with `keys`; returns the session and when its process was gone.
fn tui_left_with(aep: &Sandbox, cline: &ClineSandbox, hub: &RealHub, keys: &[&str]) -> (String, Instant) {
    let before = store_sessions(cline);
    let mut cmd = hub.command(&["please CMD:echo hi"]);
    cmd.env("CLINE_SESSION_BACKEND_MODE", "auto")
        .current_dir(cline.workspace());
    let tmux = Tmux::start(cline.root(), &cmd);
    let session = new_session(cline, &before);
    aep.wait_log(&session, "the run's end", Duration::from_secs(90), |e| {
        support::daemon::has(e, "run.finished")
    });
    // The session file's pid is the hub's when the hub hosts the session (seen on 3.0.65):
    // the TUI is watched through its terminal.
    let pid = wait_until("the session file's pid", Duration::from_secs(30), || {
        store_record(cline, &session).and_then(|r| r["pid"].as_u64())
    });
    eprintln!("the session file names pid {pid} (alive: {})", runs(pid));
    // Left as a person does; Ctrl+C may want a second press: each look presses the keys, then
    // watches the TUI for two seconds.
    wait_until_seen("the TUI to exit", Duration::from_secs(30), || {
        for k in keys {
            tmux.keys(k);
            std::thread::sleep(Duration::from_millis(300));
        }
        for _ in 0..20 {
            if tmux.exited() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("it shows:\n{}", tmux.screen()))
    });
    let gone = Instant::now();
    let record = store_record(cline, &session).unwrap();
    eprintln!(
        "after leaving: store status {} ended_at {}",
        record["status"], record["ended_at"]
    );
    (session, gone)
}

#[test]
fn a_tui_left_with_exit_ends_its_session_within_seconds() {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    let hub = RealHub::ensure(&cline);
    let _daemon = aep.start();
    let (session, gone) = tui_left_with(&aep, &cline, &hub, &["/exit", "Enter"]);
    // On 3.0.65 `/exit` records the end in Cline's store (`completed`, `ended_at`), which the
    // reconciler reads within seconds; else the client's or the hook process's absence says.
    assert_ended(
        &aep,
        &session,
        gone,
        "normal",
        &["cline_store", "client_gone", "process_gone"],
    );
}

#[test]
fn a_tui_left_with_ctrl_c_ends_its_session_within_seconds() {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    let hub = RealHub::ensure(&cline);
    let _daemon = aep.start();
    let (session, gone) = tui_left_with(&aep, &cline, &hub, &["C-c"]);
    // Cline may record a Ctrl+C as the end itself (then its store says how), else the client.
    let by = ["client_gone", "process_gone", "cline_store"];
    let log = aep.wait_log(&session, "session.ended", ENDS_WITHIN + Duration::from_secs(30), |e| {
        support::daemon::has(e, "session.ended")
    });
    let reason = of(&log, "session.ended")[0]["data"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ended(&aep, &session, gone, &reason, &by);
}
