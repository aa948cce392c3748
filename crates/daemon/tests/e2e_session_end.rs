//! When a session ends that no hook ends, on the REAL Cline 3.0.65 CLI and hub, offline against
//! the fake model (README "When does a session end"): hub runs completed while the daemon had no
//! hub connection (running without the tap, or down), a `cline --json` in Cline's default
//! backend interrupted with SIGINT, and a TUI run interrupted with Ctrl+C under tmux (plain
//! daemon, and with the hub tap). Each asserts the log, `aep-cline sessions
//! --json` and a consumer's projection written from the spec ([`support::daemon::project`]).
//!
//! What the real 3.0.65 does here (seen on these runs): a `cline --json` run through the hub
//! fires no `session_shutdown`; the hub's session stays, and only Cline's store
//! (`sessions/<id>/<id>.json`: `status`, `ended_at`) says it ended.

use crate::support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;
use support::cline::{ClineSandbox, RUN_TIMEOUT};
use support::daemon::{assert_valid_stream, has, of, project, types, Daemon, Sandbox};
use support::fake_model::{FakeModel, Script, MODEL_ID};
use support::real_hub::{tapped_sandbox, RealHub};
use support::tmux::Tmux;
use support::wait::{wait_until, wait_until_seen_every};

/// The session ids Cline's store holds (`$CLINE_DIR/data/sessions/<id>/`).
fn store_sessions(cline: &ClineSandbox) -> BTreeSet<String> {
    std::fs::read_dir(cline.cline_dir().join("data/sessions"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Cline's store record of `session`, once it is readable JSON.
fn store_record(cline: &ClineSandbox, session: &str) -> Option<Value> {
    let path = cline
        .cline_dir()
        .join("data/sessions")
        .join(session)
        .join(format!("{session}.json"));
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The one session the store gained beyond `before`.
fn new_session(cline: &ClineSandbox, before: &BTreeSet<String>) -> String {
    wait_until("the run's session in Cline's store", Duration::from_secs(30), || {
        store_sessions(cline).difference(before).next().cloned()
    })
}

/// Waits until Cline's store records the session's end; returns the record.
fn store_end(cline: &ClineSandbox, session: &str) -> Value {
    wait_until("Cline's store to record the end", Duration::from_secs(60), || {
        store_record(cline, session).filter(|r| r["ended_at"].is_string())
    })
}

/// Asserts Cline's `db/sessions.db` row of `session` records the same end as its session file
/// (`record`): what makes the database evidence when the file cannot be read.
fn assert_db_agrees(cline: &ClineSandbox, session: &str, record: &Value) {
    let db = cline.cline_dir().join("data/db/sessions.db");
    let row = cline_usage::db::session_end(&db, session).unwrap();
    let (status, ended_at, exit_code) = row.expect("a row for the session");
    assert_eq!(
        (Some(status.as_str()), ended_at.as_deref(), exit_code),
        (
            record["status"].as_str(),
            record["ended_at"].as_str(),
            record["exit_code"].as_i64()
        ),
        "sessions.db and the session file say the same end"
    );
}

/// `cline --json … <prompt>` through `hub` (`CLINE_SESSION_BACKEND_MODE=hub`), to its end.
fn hub_run(cline: &ClineSandbox, hub: &RealHub, prompt: &str) -> String {
    let before = store_sessions(cline);
    let mut cmd = hub.command(&["--json", "-P", "openai-compatible", "-m", MODEL_ID, prompt]);
    cmd.env("CLINE_SESSION_BACKEND_MODE", "hub")
        .current_dir(cline.workspace());
    let run = cline.run_command(cmd, RUN_TIMEOUT);
    run.assert_success("cline --json through the hub");
    new_session(cline, &before)
}

/// Asserts a session the daemon ended from Cline's store: `session.ended` at the store's
/// `ended_at`, found by the store, after the run's own terminal; no run left open, and
/// `sessions --json` says it ended with the store's outcome.
fn assert_ended_as_the_store_says(aep: &Sandbox, session: &str, record: &Value, by: &str) -> Vec<Value> {
    let run_terminal = match record["status"].as_str() {
        Some("completed") => "run.finished",
        Some("failed" | "error") => "run.failed",
        _ => "run.cancelled",
    };
    let log = aep.wait_log(session, "session.ended", Duration::from_secs(90), |e| {
        has(e, "session.ended")
    });
    eprintln!(
        "{session}: {:?}; store: {} at {}",
        types(&log),
        record["status"],
        record["ended_at"]
    );
    let ended_at = aep_core::time::parse(record["ended_at"].as_str().unwrap(), true)
        .map(aep_core::time::millis)
        .unwrap();
    let ended = of(&log, "session.ended");
    assert_eq!(ended.len(), 1, "ended once: {:?}", types(&log));
    assert_eq!(ended[0]["time"], ended_at.as_str(), "at the store's ended_at");
    assert_eq!(ended[0]["data"]["detected"]["by"], by);
    let terminals: Vec<&Value> = log
        .iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("run.finished" | "run.failed" | "run.cancelled")
            )
        })
        .collect();
    assert_eq!(
        terminals.last().map(|e| e["type"].as_str().unwrap()),
        Some(run_terminal),
        "the run ended as the store says: {:?}",
        types(&log)
    );
    assert_eq!(project(&log), (true, 0), "a consumer sees it over, no run open");
    assert_valid_stream(&log);
    assert_eq!(aep.sessions_json()[session]["state"], "ended");
    log
}

#[test]
fn hub_runs_completed_while_the_daemon_had_no_hub_connection_end_as_clines_store_says() {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    let hub = RealHub::ensure(&cline);

    // The daemon runs without the tap: the hooks reach it live, the hub's end does not.
    let daemon = aep.start();
    let live = hub_run(&cline, &hub, "please CMD:echo hi");
    let record = store_end(&cline, &live);
    assert_eq!(record["status"], "completed", "{record}");
    assert_db_agrees(&cline, &live, &record);
    assert_ended_as_the_store_says(&aep, &live, &record, "cline_store");

    // The daemon is down: the hooks spool; the restarted daemon drains them and ends the session.
    let (status, _) = daemon.stop();
    assert!(status.success());
    let down = hub_run(&cline, &hub, "please CMD:echo hi");
    let record = store_end(&cline, &down);
    assert_eq!(record["status"], "completed", "{record}");
    assert_db_agrees(&cline, &down, &record);
    // Its session file is gone: Cline's sessions.db says the same.
    let file = cline.cline_dir().join(format!("data/sessions/{down}/{down}.json"));
    std::fs::remove_file(&file).unwrap();
    wait_until("the hooks to spool", Duration::from_secs(30), || {
        (aep.spooled() > 0).then_some(())
    });
    let _daemon = aep.start();
    assert_ended_as_the_store_says(&aep, &down, &record, "cline_store");
}

/// The issue's own steps: `cline --json` as a person runs it (Cline's default session backend,
/// not the tests' `local`, with Cline's hub running), interrupted with SIGINT once its command
/// runs. 3.0.65 then fires no further hook and records `status: failed`, `exit_code: 1` at the
/// interrupt (in the `local` backend it fires its abort hooks and records `cancelled`): the
/// session ends as that record says, at its `ended_at`, found by the store.
#[test]
fn ctrl_c_of_cline_json_in_its_default_mode_ends_as_clines_store_says() {
    let model = FakeModel::start(Script::command("touch started && sleep 30"));
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    // The default backend starts Cline's hub when none runs: one on a port of the test's own,
    // stopped when the test ends.
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
    cmd.env_remove("CLINE_SESSION_BACKEND_MODE")
        .current_dir(cline.workspace())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut run = cmd.spawn().expect("spawn cline");
    let marker = cline.workspace().join("started");
    wait_until("the command to start", Duration::from_secs(60), || {
        marker.exists().then_some(())
    });
    let session = new_session(&cline, &before);
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    run.wait().unwrap();
    let record = store_end(&cline, &session);
    eprintln!(
        "after SIGINT: store {} exit {} at {}",
        record["status"], record["exit_code"], record["ended_at"]
    );
    let log = assert_ended_as_the_store_says(&aep, &session, &record, "cline_store");
    let terminals = types(&log)
        .into_iter()
        .filter(|t| matches!(*t, "run.finished" | "run.cancelled" | "run.failed"))
        .count();
    assert_eq!(terminals, 1, "one terminal, as Cline recorded it: {:?}", types(&log));
    if record["status"] == "failed" {
        let failed = of(&log, "run.failed")[0];
        assert_eq!(failed["data"]["error"]["exit_code"], record["exit_code"], "{failed}");
        assert_eq!(of(&log, "session.ended")[0]["data"]["reason"], "error");
    }
}

/// The steps: one `cline --json` run through the hub first, then the TUI runs `sleep 31`
/// and gets Ctrl+C once the command started (it touched a marker file); Cline's store records
/// the end. Returns the daemon, the session and the store's record.
fn ctrl_c_in_the_tui(aep: &Sandbox, cline: &ClineSandbox, hub: &RealHub) -> (Daemon, String, Value) {
    let daemon = aep.start();
    let first = hub_run(cline, hub, "please CMD:echo hi");
    store_end(cline, &first);
    let before = store_sessions(cline);
    // The command says when it started: a marker file in the workspace.
    let marker = cline.workspace().join("started");
    let mut cmd = hub.command(&["please CMD:touch started && sleep 31"]);
    cmd.env("CLINE_SESSION_BACKEND_MODE", "auto")
        .current_dir(cline.workspace());
    let tmux = Tmux::start(cline.root(), &cmd);
    let session = wait_until("the TUI's session in Cline's store", Duration::from_secs(60), || {
        store_sessions(cline).difference(&before).next().cloned()
    });
    let shown = || {
        let store = store_record(cline, &session).map(|r| (r["status"].clone(), r["ended_at"].clone()));
        format!("the TUI shows:\n{}\nstore (status, ended_at): {store:?}", tmux.screen())
    };
    // Each look that fails asks tmux for its screen (`shown`): these look less often.
    wait_until_seen_every(
        "the command to start",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || {
            if marker.exists() {
                Ok(())
            } else {
                Err(shown())
            }
        },
    );
    tmux.keys("C-c");
    let record = wait_until_seen_every(
        "Cline's store to record the end",
        Duration::from_secs(90),
        Duration::from_millis(100),
        || {
            store_record(cline, &session)
                .filter(|r| r["ended_at"].is_string())
                .ok_or_else(shown)
        },
    );
    eprintln!("after Ctrl+C: {}", shown());
    (daemon, session, record)
}

#[test]
fn ctrl_c_in_the_tui_under_tmux_ends_the_session_as_clines_store_says() {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    let hub = RealHub::ensure(&cline);
    let (_daemon, session, record) = ctrl_c_in_the_tui(&aep, &cline, &hub);
    assert_eq!(record["status"], "failed", "what 3.0.65 records of a Ctrl+C");
    assert_db_agrees(&cline, &session, &record);
    let log = assert_ended_as_the_store_says(&aep, &session, &record, "cline_store");
    assert_eq!(of(&log, "run.failed")[0]["data"]["error"]["exit_code"], 1);
}

#[test]
fn ctrl_c_in_the_tui_under_tmux_with_the_hub_tap_ends_the_session() {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL").with_env("RUST_LOG", "info");
    let hub = RealHub::ensure(&cline);
    let (_daemon, session, record) = ctrl_c_in_the_tui(&aep, &cline, &hub);
    // The connected hub says the session ended (its `endedAt`); the run ends as Cline
    // recorded it.
    assert_eq!(record["status"], "failed", "what 3.0.65 records of a Ctrl+C");
    assert_ended_as_the_store_says(&aep, &session, &record, "hub");
}
