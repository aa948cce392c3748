//! `aep-cline doctor` on the real binary: one screen, exit 0 when everything works, exit 1 and
//! the fix when something does not (no hooks, hooks in two folders, a hook running a missing
//! binary, no daemon, a token the daemon refuses, a hub tap that cannot connect), and
//! `/healthz` telling the hub tap's state.

use crate::support;

use serde_json::{json, Value};
use std::process::Output;
use support::daemon::{http, Sandbox};
use support::stub_hub::StubHub;

const TOKEN: &str = "0123456789abcdef0123456789abcdef-stub";

fn doctor(sandbox: &Sandbox, project: &std::path::Path) -> (i32, String) {
    let cline_dir = sandbox.root.path().join(".cline");
    let out: Output = sandbox.run(
        &["doctor", "--project", project.to_str().unwrap()],
        &[("CLINE_DIR", cline_dir.to_str().unwrap())],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    (out.status.code().unwrap_or(-1), text)
}

fn install(sandbox: &Sandbox, extra: &[&str]) {
    let cline_dir = sandbox.root.path().join(".cline");
    let mut args = vec!["install-hooks"];
    args.extend_from_slice(extra);
    let out = sandbox.run(&args, &[("CLINE_DIR", cline_dir.to_str().unwrap())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `/healthz` once the hub tap has finished an attempt that failed.
fn hub_attempt_failed(addr: &str) -> Value {
    support::wait::wait_until_seen(
        "a failed hub attempt in /healthz",
        std::time::Duration::from_secs(30),
        || {
            let (_, body) = http(addr, "GET", "/healthz", &[], b"");
            let v: Value = serde_json::from_str(&body).unwrap();
            if v["hub"]["last_error"].is_string() {
                Ok(v)
            } else {
                Err(format!("hub: {}", v["hub"]))
            }
        },
    )
}

fn line<'a>(report: &'a str, area: &str) -> Vec<&'a str> {
    report
        .lines()
        .filter(|l| l.get(6..).is_some_and(|r| r.starts_with(area)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_setup_says_so_and_exits_0() {
    let hub = StubHub::start(TOKEN).await;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let project = tempfile::tempdir().unwrap();
    install(&sandbox, &[]);
    let daemon = sandbox.start();
    hub.subscribed().await;
    let report = tokio::task::spawn_blocking({
        let (root, log, state) = (
            sandbox.root.path().to_path_buf(),
            sandbox.log_dir.clone(),
            sandbox.state_dir.clone(),
        );
        let project = project.path().to_path_buf();
        move || {
            let out = std::process::Command::new(support::daemon::BIN)
                .args(["doctor", "--project", project.to_str().unwrap()])
                .env("HOME", &root)
                .env("CLINE_DIR", root.join(".cline"))
                .env("AEP_LOG_DIR", log)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
        }
    })
    .await
    .unwrap();
    let (code, text) = report;
    assert_eq!(code, Some(0), "{text}");
    assert!(text.ends_with("everything works\n"), "{text}");
    assert!(
        line(&text, "hooks")[0].starts_with("ok    hooks    11 hook files in") && text.contains("(Cline 2.x reads it)"),
        "{text}"
    );
    assert!(
        line(&text, "daemon")[0].contains("the discovery token is accepted"),
        "{text}"
    );
    assert!(
        line(&text, "hub tap")[0].starts_with("ok    hub tap  connected to ws://"),
        "{text}"
    );
    assert!(line(&text, "control")[0].contains("on:"), "{text}");
    assert!(
        !text.contains(TOKEN) && !text.contains(&daemon.token),
        "no token on screen"
    );

    let (status, body) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    assert_eq!(status, 200);
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["hub"]["connected"], true);
    assert_eq!(health["hub"]["control"], true);
    assert_eq!(health["capture"], "metadata");
    assert_eq!(health["control"], true);
    assert!(!body.contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_problem_fails_with_its_fix() {
    let sandbox = Sandbox::new();
    let project = tempfile::tempdir().unwrap();

    // Nothing installed, nothing running.
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("FAIL  hooks    no aep-cline hook files"), "{text}");
    assert!(text.contains("→ run `aep-cline install-hooks`"), "{text}");
    assert!(text.contains("FAIL  daemon   no aep-cline daemon is running"), "{text}");

    // Hooks in two folders Cline reads (copied by hand: install-hooks never writes a second
    // copy): every hook would fire twice.
    install(&sandbox, &[]);
    let clinerules = project.path().join(".clinerules/hooks");
    std::fs::create_dir_all(&clinerules).unwrap();
    for file in std::fs::read_dir(sandbox.root.path().join(".cline/hooks")).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, clinerules.join(file.file_name().unwrap())).unwrap();
    }
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 1);
    assert!(text.contains("Cline 3.x runs aep-cline hooks from 2 folders"), "{text}");
    assert!(text.contains("Cline 2.x runs aep-cline hooks from 2 folders"), "{text}");
    assert!(
        text.contains("--uninstall --project DIR"),
        "the fix keeps the global hooks: {text}"
    );
    let out = sandbox.run(
        &[
            "install-hooks",
            "--uninstall",
            "--project",
            project.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success());

    // A hook file that runs a binary that is gone; another tool's hook file is only named.
    let hooks = sandbox.root.path().join(".cline/hooks");
    std::fs::write(
        hooks.join("PreToolUse"),
        "#!/bin/sh\n# aep-cline-hook: written by `aep-cline install-hooks`\nexec '/nowhere/aep-cline' hook\n",
    )
    .unwrap();
    std::fs::create_dir_all(&clinerules).unwrap();
    std::fs::write(clinerules.join("TaskStart.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 1);
    assert!(text.contains("runs /nowhere/aep-cline, which is not there"), "{text}");
    assert!(
        text.contains("other hook files, not aep-cline's: TaskStart.sh"),
        "{text}"
    );
    install(&sandbox, &[]);

    // Hooks spooled while no daemon runs: a warning, they wait for it.
    sandbox.hook(br#"{"hookName":"agent_start","taskId":"t1","timestamp":"2026-12-01T00:00:00Z"}"#);
    let (_, text) = doctor(&sandbox, project.path());
    assert!(text.contains("warn  spool    1 hooks"), "{text}");
    assert!(text.contains("the daemon takes them when it starts"), "{text}");

    // A daemon whose discovery file holds another token.
    let daemon = sandbox.start();
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("ok    spool"), "drained: {text}");
    let mut discovery = sandbox.discovery().unwrap();
    discovery["token"] = json!("stale-token-0123456789");
    std::fs::write(sandbox.state_dir.join("daemon.json"), discovery.to_string()).unwrap();
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 1);
    assert!(text.contains("it refuses the token in its discovery file"), "{text}");
    assert!(!text.contains("stale-token"), "{text}");
    drop(daemon);

    // The daemon died and left its discovery file: not running, said in words.
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 1);
    assert!(text.contains("the daemon is not running: nothing answers at"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_tap_that_cannot_connect_fails_with_the_reason() {
    let hub = StubHub::start("another-token").await;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let project = tempfile::tempdir().unwrap();
    install(&sandbox, &[]);
    let daemon = sandbox.start();
    let addr = daemon.addr();
    let health = tokio::task::spawn_blocking(move || hub_attempt_failed(&addr))
        .await
        .unwrap();
    assert_eq!(health["hub"]["connected"], false);
    assert_eq!(health["hub"]["control"], false);
    assert!(!health.to_string().contains(TOKEN));
    let (code, text) = tokio::task::spawn_blocking({
        let (root, log, state) = (
            sandbox.root.path().to_path_buf(),
            sandbox.log_dir.clone(),
            sandbox.state_dir.clone(),
        );
        let project = project.path().to_path_buf();
        move || {
            let out = std::process::Command::new(support::daemon::BIN)
                .args(["doctor", "--project", project.to_str().unwrap()])
                .env("HOME", &root)
                .env("CLINE_DIR", root.join(".cline"))
                .env("AEP_LOG_DIR", log)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
        }
    })
    .await
    .unwrap();
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("FAIL  hub tap  not connected: the hub at ws://"),
        "{text}"
    );
    assert!(text.contains("refused the connection (HTTP 401"), "{text}");
    assert!(text.contains("→ start Cline's hub"), "{text}");
}

#[test]
fn cline_hub_not_running_is_said_and_is_no_failure() {
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB", "1")
        .with_env("AEP_CLINE_HUB_DISCOVERY", "/nonexistent/locks/hub/production.json");
    let project = tempfile::tempdir().unwrap();
    install(&sandbox, &[]);
    let daemon = sandbox.start();
    let health = hub_attempt_failed(&daemon.addr());
    assert_eq!(health["hub"]["hub_down"], true, "{health}");
    let (code, text) = doctor(&sandbox, project.path());
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("info  hub tap  Cline's hub is not running right now (cannot read the hub discovery file"),
        "{text}"
    );
    assert!(text.contains("the tap connects when it starts"), "{text}");
}

/// Notifications are in the report (#32): off, with how to turn them on; on, each target as
/// shown (its secret path left out) with what it sent.
#[test]
fn notifications_are_reported_off_or_per_target() {
    let project = tempfile::tempdir().unwrap();
    let off = Sandbox::new();
    install(&off, &[]);
    let daemon = off.start();
    let (_, text) = doctor(&off, project.path());
    assert!(
        text.contains("notify") && text.contains("off (AEP_CLINE_NOTIFY="),
        "{text}"
    );
    drop(daemon);

    let on = Sandbox::new().with_env("AEP_CLINE_NOTIFY", "http://127.0.0.1:9/secret-topic-path");
    install(&on, &[]);
    let daemon = on.start();
    let (_, text) = doctor(&on, project.path());
    let line = text
        .lines()
        .find(|l| l.contains("notify"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("127.0.0.1:9") && line.contains("0 sent"), "{text}");
    assert!(
        !text.contains("secret-topic-path"),
        "a target's path may be its secret: {text}"
    );
    drop(daemon);
}
