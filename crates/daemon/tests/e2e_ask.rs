//! An `ask` rule at the hook on the REAL Cline CLI 3.0.65 (#46): in Cline's default mode (it
//! auto-approves, asks nobody), the daemon holds the `tool_call` hook while a person answers:
//! from the dashboard in real Chromium, from a notification's link, from the terminal
//! (`aep-cline approve`, the TUI beside it), or nobody, when the rule's `on_timeout` answers.
//! The command runs only once a person allowed it.

use crate::support;

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use support::browser::Browser;
use support::cline::{ClineRun, ClineSandbox};
use support::daemon::{http, of, types, Daemon, Sandbox};
use support::fake_model::{FakeModel, Script, MODEL_ID};
use support::tmux::Tmux;
use support::webhook::Receiver;

/// `touch *` asks a person; nobody within `timeout`, it is denied.
fn policy(timeout: &str) -> String {
    format!(
        "[[rule]]\nname = \"touch-asks\"\ntool = \"run_commands\"\ncommand = \"touch *\"\nanswer = \"ask\"\n\
         reason = \"files are made with a person\"\ntimeout = \"{timeout}\"\non_timeout = \"deny\"\n"
    )
}

struct Rig {
    model: FakeModel,
    cline: Arc<ClineSandbox>,
    aep: Sandbox,
    daemon: Daemon,
}

fn rig(timeout: &str, env: &[(&str, &str)]) -> Rig {
    let model = FakeModel::start(Script::command("touch asked.txt"));
    let cline = ClineSandbox::new(&model);
    let mut aep = Sandbox::new();
    let path = aep.root.path().join("policy.toml");
    std::fs::write(&path, policy(timeout)).unwrap();
    aep = aep.with_env("AEP_CLINE_POLICY", path.to_str().unwrap());
    for (k, v) in env {
        aep = aep.with_env(k, v);
    }
    aep.install_hooks_for(&cline);
    let daemon = aep.start();
    Rig {
        model,
        cline: Arc::new(cline),
        aep,
        daemon,
    }
}

impl Rig {
    /// `cline --json` in the default mode, in a thread (its hook waits for a person).
    fn run(&self) -> std::thread::JoinHandle<ClineRun> {
        let cline = self.cline.clone();
        std::thread::spawn(move || cline.run("please CMD:touch asked.txt"))
    }

    /// The session and its request, once the held call asks.
    fn request(&self) -> (String, Value) {
        let session = support::wait::wait_until("a session with a request", Duration::from_secs(60), || {
            self.aep.session_with("attention.requested")
        });
        let log = self.aep.log(&session);
        (session, of(&log, "attention.requested")[0].clone())
    }

    fn made(&self) -> bool {
        self.cline.workspace().join("asked.txt").exists()
    }

    /// The log once the run ended.
    fn ended(&self, session: &str) -> Vec<Value> {
        self.aep
            .wait_log(session, "the run's end", Duration::from_secs(60), |events| {
                events.iter().any(|e| {
                    matches!(
                        e["type"].as_str(),
                        Some("run.finished" | "run.failed" | "run.cancelled")
                    )
                })
            })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_at_the_hook_is_answered_from_the_dashboard_and_the_command_runs() {
    let rig = rig("90s", &[]);
    let run = rig.run();
    let (session, request) = rig.request();
    assert_eq!(request["data"]["cline.policy_rule"], "touch-asks", "{request}");
    assert!(!rig.made(), "the command ran before anyone answered");
    let browser = Browser::start().await;
    let link = rig.aep.run(&["open", "--no-browser"], &[]);
    assert!(link.status.success(), "{}", String::from_utf8_lossy(&link.stderr));
    browser
        .client
        .goto(String::from_utf8_lossy(&link.stdout).trim())
        .await
        .unwrap();
    browser
        .until(
            "the held call's approval",
            30,
            "return document.querySelector('#approval-list button.approve')",
        )
        .await;
    browser.click("#approval-list button.approve").await;
    let run = tokio::task::spawn_blocking(move || run.join().unwrap()).await.unwrap();
    run.assert_success("cline --json");
    assert!(rig.made(), "approved from the page, the command did not run");
    let log = rig.ended(&session);
    let answered = of(&log, "attention.answered");
    assert_eq!(answered.len(), 1, "{:?}", types(&log));
    assert_eq!(answered[0]["data"]["via"], "control");
    assert_eq!(of(&log, "tool.completed").len(), 1, "{:?}", types(&log));
    assert!(of(&log, "tool.denied").is_empty());
    browser.close().await;
    support::daemon::assert_valid_stream(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_at_the_hook_is_answered_by_a_notification_link() {
    let receiver = Receiver::start();
    let rig = rig("90s", &[("AEP_CLINE_NOTIFY", &format!("{}/hook", receiver.url))]);
    let run = rig.run();
    let (_, note) = tokio::task::spawn_blocking(move || receiver.next("the held call's notification"))
        .await
        .unwrap();
    assert_eq!(note["kind"], "approval", "{note}");
    assert_eq!(note["tool"], "run_commands");
    assert!(note["asked"].as_str().unwrap().contains("touch asked.txt"), "{note}");
    let (session, request) = rig.request();
    assert_eq!(note["request"], request["id"]);
    let approve = note["actions"]["approve"].as_str().unwrap();
    let path = approve.strip_prefix(&rig.daemon.url).unwrap().to_string();
    let addr = rig.daemon.addr();
    let (status, page) = tokio::task::spawn_blocking(move || http(&addr, "POST", &path, &[], b""))
        .await
        .unwrap();
    assert_eq!(status, 200, "{page}");
    let run = tokio::task::spawn_blocking(move || run.join().unwrap()).await.unwrap();
    run.assert_success("cline --json");
    assert!(rig.made(), "approved by the link, the command did not run");
    let log = rig.ended(&session);
    assert_eq!(of(&log, "tool.completed").len(), 1, "{:?}", types(&log));
}

/// Nobody answers within the rule's timeout: its `on_timeout` denies, softly: the command does
/// not run, the run goes on to its end, and the model is told.
#[test]
fn an_ask_at_the_hook_nobody_answers_is_denied_at_its_timeout_and_the_run_goes_on() {
    let rig = rig("5s", &[]);
    let run = rig.run().join().unwrap();
    assert!(!rig.made(), "the command ran though nobody allowed it");
    assert_eq!(run.run_result()["finishReason"], "completed", "{}", run.stderr);
    let told = rig
        .model
        .chat_requests()
        .iter()
        .skip(1)
        .map(|r| r.to_string())
        .collect::<String>();
    assert!(told.contains("nobody answered within 5 s"), "{told}");
    let session = rig
        .aep
        .session_with("attention.timeout")
        .expect("the timeout in the log");
    let log = rig.ended(&session);
    let timeout = of(&log, "attention.timeout");
    assert_eq!(timeout.len(), 1, "{:?}", types(&log));
    let denied = of(&log, "tool.denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["cause"], timeout[0]["id"]);
    assert!(of(&log, "run.finished").len() == 1, "{:?}", types(&log));
    support::daemon::assert_valid_stream(&log);
}

/// The TUI (a person at Cline's own terminal, under tmux), where Cline auto-approves: the hook
/// holds the call, `aep-cline approve` from another terminal answers, and the command runs.
#[test]
fn an_ask_at_the_hook_holds_the_tui_until_a_person_approves_from_the_terminal() {
    let rig = rig("90s", &[]);
    let mut cmd = rig.cline.command();
    cmd.args(["-P", "openai-compatible", "-m", MODEL_ID, "please CMD:touch asked.txt"]);
    let tmux = Tmux::start(rig.cline.root(), &cmd);
    let (session, request) = rig.request();
    std::thread::sleep(Duration::from_secs(1));
    if rig.made() {
        let log = rig.aep.log(&session);
        panic!(
            "the TUI ran the command before anyone answered:\n{}\n--- log ---\n{:#?}\n--- daemon ---\n{}",
            tmux.screen(),
            log.iter()
                .map(|e| (e["type"].clone(), e["time"].clone(), e["data"].clone()))
                .collect::<Vec<_>>(),
            std::fs::read_to_string(&rig.daemon.stderr_path).unwrap_or_default()
        );
    }
    let short = request["id"].as_str().unwrap()[20..].to_lowercase();
    let out = rig.aep.run(&["approve", &short], &[]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    support::wait::wait_until("the approved command to run", Duration::from_secs(60), || {
        rig.made().then_some(())
    });
    let log = rig
        .aep
        .wait_log(&session, "the tool's result", Duration::from_secs(60), |e| {
            !of(e, "tool.completed").is_empty()
        });
    assert_eq!(of(&log, "attention.answered").len(), 1, "{:?}", types(&log));
}
