//! The terminal commands a person uses (`sessions`, `show`, `approvals`, `approve`, `deny`,
//! `answer`, `cancel`, `send`) on the real binary, against a running daemon whose hub tap talks
//! to a stub hub (real hub frames): no JSON by hand, the ack printed, the exit status telling
//! accepted (0), rejected (1) or not decided (2), and every bad input answered in words.

use crate::support;

use serde_json::{json, Value};
use std::process::{Output, Stdio};
use std::time::Duration;
use support::daemon::{has, real_payload, Sandbox, BIN};
use support::stub_hub::{real_frame, StubHub};

const SESSION: &str = "1796007217803_dxv4z";
const TOKEN: &str = "0123456789abcdef0123456789abcdef-stub";

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Runs `aep-cline ARGS` off the async workers (it may wait for the stub hub).
async fn cli(sandbox: &Sandbox, args: &[&str]) -> Output {
    let (bin_env, args): (Vec<(String, String)>, Vec<String>) = (
        vec![
            ("HOME".into(), sandbox.root.path().display().to_string()),
            ("AEP_LOG_DIR".into(), sandbox.log_dir.display().to_string()),
            ("AEP_CLINE_STATE_DIR".into(), sandbox.state_dir.display().to_string()),
        ],
        args.iter().map(|a| a.to_string()).collect(),
    );
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(BIN)
            .args(&args)
            .envs(bin_env)
            .env_remove("AEP_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn wait_for(sandbox: &Sandbox, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    sandbox.wait_log(SESSION, what, Duration::from_secs(20), done)
}

fn control_sandbox(hub: &StubHub) -> Sandbox {
    Sandbox::new()
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN)
}

/// The stub hub asks for one approval in SESSION; returns the `attention.requested` Event.
fn ask(hub: &StubHub, sandbox: &Sandbox, nth: usize) -> Value {
    let mut approval = real_frame("approval.requested.approve");
    approval["envelope"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["approvalId"] = json!(format!("appr-{nth}"));
    approval["envelope"]["sequence"] = json!(100 + nth);
    hub.send(&approval.to_string());
    let events = wait_for(sandbox, "the request", |e| {
        e.iter().filter(|x| x["type"] == "attention.requested").count() > nth
    });
    events
        .into_iter()
        .filter(|e| e["type"] == "attention.requested")
        .nth(nth)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_lists_answers_cancels_and_steers_without_json() {
    let hub = StubHub::start(TOKEN).await;
    let sandbox = control_sandbox(&hub);
    let _daemon = sandbox.start();
    hub.subscribed().await;
    for hook in ["agent_start", "tool_call"] {
        assert!(sandbox.hook(&real_payload("hooks-cancel", hook)).status.success());
    }
    let request = ask(&hub, &sandbox, 0);
    let short = request["id"].as_str().unwrap()[20..].to_lowercase();

    // sessions: the session, waiting for one approval.
    let out = cli(&sandbox, &["sessions"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "{stderr}");
    let row = stdout
        .lines()
        .find(|l| l.starts_with(SESSION))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("waiting(1)"), "{row}");
    assert!(stdout.starts_with("SESSION"), "{stdout}");
    let out = cli(&sandbox, &["sessions", "--json"]).await;
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["session"], SESSION);
    assert_eq!(list[0]["state"], "waiting");
    assert_eq!(
        (list[0]["runs"].as_u64(), list[0]["tool_calls"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(
        list[0]["workspace"]
            .as_str()
            .is_some_and(|w| w.starts_with('#') && w.len() == 9),
        "at metadata the workspace is a short digest: {}",
        list[0]
    );
    assert!(
        list[0].get("model").is_none() && list[0].get("cost").is_none(),
        "blank until known"
    );

    // approvals: the short id a person types.
    let out = cli(&sandbox, &["approvals"]).await;
    let (stdout, _) = text(&out);
    assert!(stdout.contains(&short) && stdout.contains("run_commands"), "{stdout}");
    let out = cli(&sandbox, &["approvals", "--json"]).await;
    let pending: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pending[0]["short"], short.as_str());
    assert_eq!(pending[0]["id"], request["id"]);

    // approve SHORT: the hub gets approval.respond approved, the ack and the outcome are printed.
    let approving = {
        let (state, logs, home) = (
            sandbox.state_dir.clone(),
            sandbox.log_dir.clone(),
            sandbox.root.path().to_path_buf(),
        );
        let short = short.to_uppercase(); // any case
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["approve", &short])
                .env("HOME", home)
                .env("AEP_LOG_DIR", logs)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap()
        })
    };
    let sent = hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["payload"]["approved"], true);
    assert_eq!(sent["envelope"]["payload"]["approvalId"], "appr-0");
    hub.reply(&sent, None);
    let mut resolved = real_frame("approval.resolved.approved");
    resolved["envelope"]["sessionId"] = json!(SESSION);
    resolved["envelope"]["payload"]["approvalId"] = json!("appr-0");
    hub.send(&resolved.to_string());
    let out = approving.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("accepted: approve {short}")), "{stdout}");
    assert!(
        stdout.contains("outcome: attention.answered approve via control"),
        "{stdout}"
    );
    let events = wait_for(&sandbox, "the resolution", |e| has(e, "attention.resolved"));
    let ack = events.iter().find(|e| e["type"] == "control.accepted").unwrap();
    let printed = format!("(command {})", ack["cause"].as_str().unwrap()[20..].to_lowercase());
    assert!(stdout.contains(&printed), "the ack's command is named: {stdout}");

    // No longer pending: nothing to approve, said in words, exit 2.
    let out = cli(&sandbox, &["approve", &short]).await;
    let (_, stderr) = text(&out);
    assert_eq!(code(&out), 2);
    assert!(
        stderr.contains("no pending approval matches") && stderr.contains("aep-cline approvals"),
        "{stderr}"
    );
    let out = cli(&sandbox, &["approvals"]).await;
    assert_eq!(text(&out).0, "no pending approvals\n");

    // deny with a reason: the reason reaches the hub; --json prints the ack.
    let second = ask(&hub, &sandbox, 1);
    let short2 = second["id"].as_str().unwrap()[20..].to_lowercase();
    let denying = {
        let (state, logs, home) = (
            sandbox.state_dir.clone(),
            sandbox.log_dir.clone(),
            sandbox.root.path().to_path_buf(),
        );
        let short2 = short2.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["deny", &short2, "--reason", "use the staging box", "--json"])
                .env("HOME", home)
                .env("AEP_LOG_DIR", logs)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap()
        })
    };
    let sent = hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["payload"]["approved"], false);
    assert_eq!(sent["envelope"]["payload"]["reason"], "use the staging box");
    hub.reply(&sent, Some("approval_not_found"));
    let out = denying.await.unwrap();
    assert_eq!(code(&out), 1, "the hub refused: rejected, exit 1: {:?}", text(&out));
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(waited["ack"]["type"], "control.rejected");
    assert_eq!(waited["ack"]["data"]["reason"], "refused");

    // cancel: the hub gets run.abort for the session and answers ok, as the real hub does
    // whatever it finds, but nothing ends the run: the cancel says nothing happened, and what to
    // do, after its bounded wait (not a bare "accepted").
    let cancelling = {
        let (state, logs, home) = (
            sandbox.state_dir.clone(),
            sandbox.log_dir.clone(),
            sandbox.root.path().to_path_buf(),
        );
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["cancel", "dxv4z"])
                .env("HOME", home)
                .env("AEP_LOG_DIR", logs)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap()
        })
    };
    let sent = hub.command("run.abort").await;
    assert_eq!(sent["envelope"]["sessionId"], SESSION);
    hub.reply(&sent, None);
    let sent_at = std::time::Instant::now();
    let out = cancelling.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 2, "not decided: {stdout}{stderr}");
    assert!(!stdout.contains("accepted:"), "no bare accepted: {stdout}");
    assert!(
        stderr.contains("nothing happened") && stderr.contains(&format!("aep-cline end {SESSION}")),
        "{stderr}"
    );
    assert!(sent_at.elapsed() < Duration::from_secs(30), "a bounded wait");

    // send --steer: session.send_input with delivery steer; the text is not echoed back.
    let sending = {
        let (state, logs, home) = (
            sandbox.state_dir.clone(),
            sandbox.log_dir.clone(),
            sandbox.root.path().to_path_buf(),
        );
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["send", SESSION, "also run the linter", "--steer"])
                .env("HOME", home)
                .env("AEP_LOG_DIR", logs)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap()
        })
    };
    let sent = hub.command("session.send_input").await;
    assert_eq!(sent["envelope"]["payload"]["delivery"], "steer");
    hub.reply(&sent, None);
    let out = sending.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "{stdout}{stderr}");
    assert!(stdout.contains("outcome: x.cline.input.sent (steer)"), "{stdout}");
    assert!(!stdout.contains("linter"), "{stdout}");

    // show: the timeline tells it.
    let out = cli(&sandbox, &["show", "dxv4z"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(code(&out), 0, "{stderr}");
    assert!(stdout.starts_with(&format!("session   {SESSION}\n")), "{stdout}");
    for expected in [
        "run      user",
        "tool     run_commands",
        "approval run_commands approved",
        "via=control",
        "input    input sent",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    let out = cli(&sandbox, &["show", SESSION, "--json"]).await;
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["summary"]["session"], SESSION);
    let approvals: Vec<&Value> = shown["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "approval")
        .collect();
    assert_eq!(approvals.len(), 2);
    assert_eq!(approvals[0]["status"], "approved");
    assert_eq!(approvals[0]["detail"]["via"], "control");
    assert_eq!(
        approvals[1]["status"], "pending",
        "the hub refused the deny: still pending"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_a_missing_daemon_are_said_in_words() {
    let sandbox = Sandbox::new();
    // No logs yet, no daemon.
    let out = cli(&sandbox, &["sessions"]).await;
    assert_eq!(code(&out), 0);
    assert!(text(&out).1.contains("no sessions in"), "{:?}", text(&out));
    assert_eq!(text(&cli(&sandbox, &["sessions", "--json"]).await).0, "[]\n");
    for hook in ["agent_start", "tool_call"] {
        sandbox.hook(&real_payload("hooks-cancel", hook)); // spooled: no daemon
    }
    let daemon = sandbox.start(); // drains the spool into the log
    wait_for(&sandbox, "the spooled hooks", |e| e.len() >= 3);

    // POST /control?wait= takes a number of milliseconds up to 30 s, nothing else.
    let auth = format!("Bearer {}", daemon.token);
    let cancel = json!({"aep": "0.1", "id": "C-wait", "type": "control.cancel", "time": "2026-12-01T00:00:00Z",
        "source": "aep://t/agent/t", "agent": "t", "session": SESSION, "data": {"scope": "run"}})
    .to_string();
    for bad in ["wait=abc", "wait=0", "wait=30001"] {
        let (status, body) = support::daemon::http(
            &daemon.addr(),
            "POST",
            &format!("/control?{bad}"),
            &[("authorization", &auth)],
            cancel.as_bytes(),
        );
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains("milliseconds from 1 to 30000"), "{body}");
    }
    assert!(
        !sandbox.log(SESSION).iter().any(|e| e["cause"] == "C-wait"),
        "nothing was submitted"
    );

    // Control is off: a command is rejected `unsupported`, exit 1, with what to do.
    let out = cli(&sandbox, &["cancel", SESSION]).await;
    let (_, stderr) = text(&out);
    assert_eq!(code(&out), 1, "{stderr}");
    assert!(
        stderr.contains("rejected (unsupported)") && stderr.contains("AEP_CLINE_HUB_CONTROL=1"),
        "{stderr}"
    );

    for (args, expected) in [
        (vec!["show", "nope"], "no session matches \"nope\""),
        (vec!["cancel", "nope"], "no session matches \"nope\""),
        (vec!["approve", "zzzzzz"], "no pending approval matches \"zzzzzz\""),
        (vec!["answer", "zzzzzz", "  "], "the answer is empty"),
        (vec!["send", SESSION, " "], "the prompt is empty"),
    ] {
        let out = cli(&sandbox, &args).await;
        let (_, stderr) = text(&out);
        assert_ne!(code(&out), 0, "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let long = "x".repeat(4001);
    let out = cli(&sandbox, &["send", SESSION, &long]).await;
    assert!(
        text(&out).1.contains("4001 characters; send at most 4000"),
        "{:?}",
        text(&out).1
    );
    assert!(!text(&out).1.contains(&long[..100]), "the prompt is not echoed");

    // Two sessions that start alike: ambiguous.
    let other = String::from_utf8(real_payload("hooks-cancel", "agent_start"))
        .unwrap()
        .replace(SESSION, "1796007217803_other");
    sandbox.hook(other.as_bytes());
    let out = cli(&sandbox, &["show", "1796007217803"]).await;
    assert!(
        text(&out).1.contains("matches more than one session"),
        "{:?}",
        text(&out)
    );

    // A reader that goes away (`| head`) is no error and no panic.
    let mut child = std::process::Command::new(BIN)
        .args(["sessions", "--all", "--json"])
        .env("HOME", sandbox.root.path())
        .env("AEP_LOG_DIR", &sandbox.log_dir)
        .env("AEP_CLINE_STATE_DIR", &sandbox.state_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));

    // A discovery file whose token is not the daemon's: said as such, the token never printed.
    let mut discovery = sandbox.discovery().unwrap();
    let real = discovery.clone();
    discovery["token"] = json!("not-the-token-0123456789");
    std::fs::write(sandbox.state_dir.join("daemon.json"), discovery.to_string()).unwrap();
    let out = cli(&sandbox, &["cancel", SESSION]).await;
    let (_, stderr) = text(&out);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(stderr.contains("refused the token"), "{stderr}");
    assert!(!stderr.contains("not-the-token"), "{stderr}");
    std::fs::write(sandbox.state_dir.join("daemon.json"), real.to_string()).unwrap();

    // The daemon dies (its discovery file stays): "not running", in words, exit 2.
    let mut daemon = daemon;
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    let out = cli(&sandbox, &["send", SESSION, "hello"]).await;
    let (_, stderr) = text(&out);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(
        stderr.contains("the daemon is not running: nothing answers at"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "said once: {stderr}");
    std::fs::remove_file(sandbox.state_dir.join("daemon.json")).unwrap();
    let out = cli(&sandbox, &["cancel", SESSION]).await;
    assert!(
        text(&out).1.contains("no aep-cline daemon is running"),
        "{:?}",
        text(&out)
    );
}
