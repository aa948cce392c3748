//! The hook pipeline on the REAL Cline CLI 3.0.65, offline: a fake model, an isolated home,
//! `aep-cline install-hooks`, the daemon, and `cline --json`. These tests fail (never skip)
//! when the CLI is missing: `.ci/install-cline.sh` installs it.

use crate::support;

use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::cline::ClineSandbox;
use support::daemon::{assert_ended_late, assert_valid_stream, http, project, types, Daemon, Sandbox, COMPLETED_RUN};
use support::fake_model::{FakeModel, Script};
use support::wait::{wait_until, wait_until_seen};

/// A Cline sandbox whose hook folder runs the real shim, plus a daemon sandbox beside it.
struct Rig {
    _model: FakeModel,
    cline: ClineSandbox,
    aep: Sandbox,
}

impl Rig {
    fn new(script: Script) -> Self {
        let model = FakeModel::start(script);
        let cline = ClineSandbox::new(&model);
        let aep = Sandbox::new();
        aep.install_hooks_for(&cline);
        Rig {
            _model: model,
            cline,
            aep,
        }
    }

    fn run(&self) -> Value {
        let run = self.cline.run("Run the command and report what it printed.");
        run.assert_success("cline --json");
        run.run_result()
    }

    /// The one session log the run produced, once it holds at least `n` events (agent_end and
    /// session_shutdown hooks run detached and may land after the CLI exits).
    fn session_log(&self, n: usize) -> (String, Vec<Value>) {
        let dir = self.aep.log_dir.join("cline");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                .unwrap_or_default();
            if let [file] = files.as_slice() {
                let session = file.file_stem().unwrap().to_str().unwrap().to_string();
                let events = self.aep.log(&session);
                if events.len() >= n || Instant::now() > deadline {
                    return (session, events);
                }
            }
            assert!(
                Instant::now() < deadline,
                "expected one session log in {}, found {files:?}",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The lifecycle of one completed run with one tool call, cause-linked, in a session that
/// ended when `cline --json` exited.
fn assert_completed_run(session: &str, events: &[Value]) {
    assert_eq!(types(events), COMPLETED_RUN, "{events:#?}");
    assert_eq!(events[5]["data"]["reason"], "normal");
    // Keyed by sessionContext.rootSessionId (`<ms>_<suffix>`), not the `conv_` taskId.
    assert!(!session.starts_with("conv_") && session.contains('_'), "{session}");
    assert!(events.iter().all(|e| e["session"] == session));
    let run = &events[1]["run"];
    assert!(run.is_string());
    assert_eq!(events[2]["run"], *run);
    assert_eq!(events[2]["data"]["tool"]["name"], "run_commands");
    assert_eq!(events[3]["cause"], events[2]["id"]);
    assert_eq!(events[3]["run"], *run);
    assert_eq!(events[4]["run"], *run);
    assert_eq!(events[4]["cause"], events[1]["id"]);
    assert_valid_stream(events);
}

#[test]
fn a_real_cline_run_is_logged_as_one_valid_aep_session() {
    let rig = Rig::new(Script::default());
    let daemon = rig.aep.start();
    let result = rig.run();
    assert_eq!(result["finishReason"], "completed");
    let (session, events) = rig.session_log(6);
    assert_completed_run(&session, &events);
    let (status, _) = daemon.stop();
    assert!(status.success());
}

#[test]
fn a_run_cancelled_by_a_hook_closes_its_run_once() {
    let rig = Rig::new(Script::default());
    // A second PreToolUse in the project's hook folder cancels the run; ours still observes.
    let project_hooks = rig.cline.workspace().join(".cline").join("hooks");
    std::fs::create_dir_all(&project_hooks).unwrap();
    let cancel = project_hooks.join("PreToolUse");
    std::fs::write(&cancel, "#!/bin/sh\ncat >/dev/null\necho '{\"cancel\":true}'\n").unwrap();
    std::fs::set_permissions(&cancel, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let daemon = rig.aep.start();
    let run = rig.cline.run("Run the command and report what it printed.");
    assert_eq!(run.run_result()["finishReason"], "aborted");
    let (_, events) = rig.session_log(4);
    eprintln!("hook-cancelled run: {:?}", types(&events));
    let terminals: Vec<&Value> = events
        .iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("run.finished" | "run.failed" | "run.cancelled")
            )
        })
        .collect();
    assert_eq!(terminals.len(), 1, "exactly one terminal: {events:#?}");
    assert_eq!(terminals[0]["run"], events[1]["run"]);
    assert_eq!(
        &types(&events)[..3],
        ["session.started", "run.started", "tool.requested"]
    );
    assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn with_the_daemon_down_cline_finishes_and_the_spooled_hooks_arrive_later() {
    let rig = Rig::new(Script::default());
    let result = rig.run();
    assert_eq!(result["finishReason"], "completed");
    // Wait for the detached hooks to have spooled too.
    wait_until_seen("every hook to be spooled (4)", Duration::from_secs(30), || {
        match rig.aep.spooled() {
            n if n >= 4 => Ok(()),
            n => Err(format!("{n} spooled")),
        }
    });
    let daemon = rig.aep.start();
    let (session, events) = rig.session_log(6);
    assert_completed_run(&session, &events);
    // A spool file goes once its hook is in the log: the last may still be on its way out.
    rig.aep.wait_spool_empty(Duration::from_secs(30));
    drop(daemon);
}

#[test]
fn with_the_daemon_hung_cline_finishes_and_nothing_is_lost_or_doubled() {
    let rig = Rig::new(Script::default());
    let daemon: Daemon = rig.aep.start();
    daemon.signal("-STOP");
    let result = rig.run();
    assert_eq!(result["finishReason"], "completed");
    daemon.signal("-CONT");
    let (session, events) = rig.session_log(6);
    // Everything that could still add a duplicate is done: no shim of the run still runs (it
    // would answer or spool), every spooled firing is recorded, and every request the shims
    // sent the hung daemon has been handled.
    rig.aep.wait_shims_gone(Duration::from_secs(30));
    rig.aep.wait_spool_empty(Duration::from_secs(30));
    rig.aep.wait_socket_connections_done(Duration::from_secs(30));
    let events_after = rig.aep.log(&session);
    assert_eq!(events_after.len(), events.len());
    assert_completed_run(&session, &events_after);
    drop(daemon);
}

/// Waits (up to 20 s) until the session's log holds an Event of type `ty`.
fn wait_for_type(rig: &Rig, session: &str, ty: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = rig.aep.log(session);
        if types(&events).contains(&ty) || Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_normal_cli_run_ends_its_session_when_cline_exits() {
    let rig = Rig::new(Script::default());
    let daemon: Daemon = rig.aep.start();
    rig.run();
    let (session, _) = rig.session_log(6);
    let events = wait_for_type(&rig, &session, "session.ended");
    assert_eq!(types(&events), COMPLETED_RUN);
    assert_eq!(events[5]["data"]["reason"], "normal");
    assert_valid_stream(&events);
    drop(daemon);
}

/// Starts `cline --json` on a command that sleeps, and returns it once the tool is running.
fn cline_in_a_long_tool(rig: &Rig) -> (std::process::Child, String) {
    let mut cmd = rig
        .cline
        .json_run_command("Run the command and report what it printed.");
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn cline");
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        if let Some(session) = rig.aep.session_with("tool.requested") {
            break session;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run never reached its tool");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (child, session)
}

#[test]
fn a_killed_cline_gets_its_run_and_session_ended_as_killed() {
    let rig = Rig::new(Script::command("sleep 30; echo never"));
    let daemon: Daemon = rig.aep.start();
    let (cline, session) = cline_in_a_long_tool(&rig);
    kill(cline);
    assert_ended_late(&rig.aep, &session, "process_gone");
    drop(daemon);
}

/// SIGKILLs the real `cline --json` (no hook will ever say its run ended) and reaps it.
fn kill(mut cline: std::process::Child) {
    cline.kill().unwrap();
    cline.wait().unwrap();
}

#[test]
fn a_real_cline_killed_while_the_daemon_is_down_is_ended_at_the_restart_at_its_last_hook() {
    let rig = Rig::new(Script::command("sleep 30; echo never"));
    let daemon = rig.aep.start();
    let (cline, session) = cline_in_a_long_tool(&rig);
    // SIGTERM with the session open: the daemon stops, the session stays open in its log.
    let (status, _) = daemon.stop();
    assert!(status.success());
    assert_eq!(
        project(&rig.aep.log(&session)),
        (false, 1),
        "open when the daemon stopped"
    );
    kill(cline);
    let _daemon = rig.aep.start();
    // The restarted daemon knows its process from the log (clineparent) and finds it gone.
    assert_ended_late(&rig.aep, &session, "process_gone");
}

#[test]
fn a_real_cline_running_through_a_daemon_restart_stays_open_until_it_is_killed() {
    let rig = Rig::new(Script::command("sleep 30; echo never"));
    let daemon = rig.aep.start();
    let (cline, session) = cline_in_a_long_tool(&rig);
    drop(daemon.stop());
    let daemon = rig.aep.start();
    // The restart's first pass judged it alive (its Cline runs) and took it up in memory.
    wait_until("the open session taken up again", Duration::from_secs(15), || {
        let health = http(&daemon.addr(), "GET", "/healthz", &[], b"").1;
        (serde_json::from_str::<Value>(&health).unwrap()["sessions"] == 1).then_some(())
    });
    assert_eq!(project(&rig.aep.log(&session)), (false, 1), "alive: left open");
    assert_eq!(rig.aep.sessions_json()[&session]["state"], "running");
    kill(cline);
    assert_ended_late(&rig.aep, &session, "process_gone");
}

#[test]
fn ctrl_c_of_cline_json_leaves_no_run_open_and_ends_the_session() {
    let rig = Rig::new(Script::command("sleep 30; echo never"));
    let daemon: Daemon = rig.aep.start();
    let (cline, session) = cline_in_a_long_tool(&rig);
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &cline.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let out = cline.wait_with_output().unwrap();
    let events = wait_for_type(&rig, &session, "session.ended");
    let kinds = types(&events);
    assert_eq!(
        kinds.last(),
        Some(&"session.ended"),
        "{kinds:?} (cline exited {:?})",
        out.status
    );
    let terminals = kinds
        .iter()
        .filter(|t| matches!(**t, "run.finished" | "run.cancelled" | "run.failed"))
        .count();
    assert_eq!(terminals, 1, "the run has exactly one terminal: {kinds:?}");
    assert_eq!(project(&events), (true, 0));
    assert_eq!(rig.aep.sessions_json()[&session]["state"], "ended");
    assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn hooks_installed_in_two_folders_record_each_firing_once() {
    let rig = Rig::new(Script::default());
    let workspace = rig.cline.workspace();
    let cline_dir = rig.cline.cline_dir();
    // install-hooks writes no second copy (it says the global hooks run here): a project hooked
    // by hand beside the global hooks, as an older install left it.
    let out = rig.aep.run(
        &["install-hooks", "--project", workspace.to_str().unwrap()],
        &[("CLINE_DIR", cline_dir.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already run for"),
        "install-hooks says the global hooks run there"
    );
    let project_hooks = workspace.join(".clinerules/hooks");
    std::fs::create_dir_all(&project_hooks).unwrap();
    for file in std::fs::read_dir(cline_dir.join("hooks")).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, project_hooks.join(file.file_name().unwrap())).unwrap();
    }
    let daemon: Daemon = rig.aep.start();
    rig.run();
    let (session, _) = rig.session_log(6);
    let events = wait_for_type(&rig, &session, "session.ended");
    assert_eq!(types(&events), COMPLETED_RUN, "two hook files per firing, one record");
    drop(daemon);
}

#[test]
fn a_failing_command_is_logged_as_a_failed_tool_with_its_kind() {
    let rig = Rig::new(Script::command("echo oops >&2; exit 3"));
    let daemon: Daemon = rig.aep.start();
    rig.run();
    let (session, _) = rig.session_log(6);
    let events = rig.aep.log(&session);
    let failed: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool.failed").collect();
    assert_eq!(failed.len(), 1, "{:?}", types(&events));
    assert_eq!(failed[0]["data"]["error"]["type"], "exit_code");
    assert!(!types(&events).contains(&"tool.completed"));
    let requested = events.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(failed[0]["cause"], requested["id"]);
    assert_valid_stream(&events);
    drop(daemon);
}
