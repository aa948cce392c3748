//! The real `aep-cline` binary with its hub tap pointed at a stub hub (real hub frames, and the
//! faults): the hook path never notices the hub, commands get their acks through `POST /control`,
//! and the hub token never reaches the daemon's log.

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::daemon::{has, http, real_payload, Daemon, Sandbox};
use support::stub_hub::{real_frame, StubHub};
use support::webhook::Receiver;

const SESSION: &str = "1796007217803_dxv4z";
const TOKEN: &str = "0123456789abcdef0123456789abcdef-stub";

fn post(daemon: &Daemon, command: &Value) -> (u16, String) {
    let auth = format!("Bearer {}", daemon.token);
    http(
        &daemon.addr(),
        "POST",
        "/control",
        &[("authorization", &auth)],
        command.to_string().as_bytes(),
    )
}

fn command(id: &str, ty: &str, subject: Option<&str>, data: Value) -> Value {
    let mut c = json!({"aep": "0.1", "id": id, "type": ty, "time": "2026-11-30T00:00:00Z",
        "source": "aep://ops/agent/console", "agent": "console", "session": SESSION, "data": data});
    if let Some(s) = subject {
        c["subject"] = json!(s);
    }
    c
}

fn wait_for(sandbox: &Sandbox, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    sandbox.wait_log(SESSION, what, Duration::from_secs(20), done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_hub_leaves_the_hooks_alone_and_commands_busy_and_the_token_unlogged() {
    let hub = StubHub::start("the-real-token").await;
    let sandbox = Sandbox::new()
        .with_env("RUST_LOG", "info")
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let daemon = sandbox.start();
    for hook in ["agent_start", "tool_call"] {
        let out = sandbox.hook(&real_payload("hooks-cancel", hook));
        assert!(out.status.success() && out.stdout.is_empty());
    }
    assert_eq!(sandbox.log(SESSION).len(), 3, "the hooks are logged as ever");
    let (status, _) = post(&daemon, &command("C1", "control.cancel", None, json!({"scope": "run"})));
    assert_eq!(status, 202);
    let events = wait_for(&sandbox, "a nack", |e| has(e, "control.rejected"));
    let nack = events.iter().find(|e| e["type"] == "control.rejected").unwrap();
    assert_eq!(
        (nack["data"]["reason"].as_str(), nack["cause"].as_str()),
        (Some("busy"), Some("C1"))
    );
    assert_eq!(hub.connections(), 0);
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("refused the connection (HTTP 401"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token is in the log: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_through_post_control_on_the_real_binary() {
    let hub = StubHub::start(TOKEN).await;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let daemon = sandbox.start();
    hub.subscribed().await;
    sandbox.hook(&real_payload("hooks-cancel", "agent_start"));
    let mut approval = real_frame("approval.requested.approve");
    approval["envelope"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["sessionId"] = json!(SESSION);
    hub.send(&approval.to_string());
    let events = wait_for(&sandbox, "the request", |e| has(e, "attention.requested"));
    let request = events
        .iter()
        .find(|e| e["type"] == "attention.requested")
        .unwrap()
        .clone();
    // /metrics: the tap connected, one approval waiting (the dashboard's view follows the bus).
    let metrics_say = |what: &str, lines: &[&str]| {
        support::wait::wait_until_seen(what, Duration::from_secs(20), || {
            let (_, m) = http(&daemon.addr(), "GET", "/metrics", &[], b"");
            if lines.iter().all(|l| m.contains(&format!("{l}\n"))) {
                Ok(())
            } else {
                Err(m)
            }
        })
    };
    metrics_say(
        "the approval pending in /metrics",
        &[
            "aep_cline_hub_connected 1",
            "aep_cline_approvals_pending 1",
            "aep_cline_approval_waited_seconds_count 0",
        ],
    );

    // Bad input at the door: not JSON, not a command, not ours, no token.
    let auth = format!("Bearer {}", daemon.token);
    let door = |body: &[u8], headers: &[(&str, &str)]| http(&daemon.addr(), "POST", "/control", headers, body).0;
    assert_eq!(door(b"{", &[("authorization", &auth)]), 400);
    assert_eq!(
        door(br#"{"type":"run.started","id":"x"}"#, &[("authorization", &auth)]),
        400
    );
    let mut elsewhere = command("C0", "control.cancel", None, json!({"scope": "run"}));
    elsewhere["session"] = json!("not-a-session-here");
    assert_eq!(door(elsewhere.to_string().as_bytes(), &[("authorization", &auth)]), 404);
    assert_eq!(door(b"{}", &[]), 401);

    let respond = command(
        "C2",
        "control.attention.respond",
        request["id"].as_str(),
        json!({"answer": {"text": "Approve"}}),
    );
    assert_eq!(post(&daemon, &respond).0, 202);
    let sent = hub.command("approval.respond").await;
    assert_eq!(
        sent["envelope"]["payload"]["approved"], true,
        "AEP-0008: the label is the option"
    );
    let mut resolved = real_frame("approval.resolved.approved");
    resolved["envelope"]["sessionId"] = json!(SESSION);
    hub.send(&resolved.to_string());
    hub.reply(&sent, None);
    let events = wait_for(&sandbox, "the resolution", |e| has(e, "attention.resolved"));
    let answered = events.iter().find(|e| e["type"] == "attention.answered").unwrap();
    assert_eq!(
        answered["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    assert_eq!(answered["cause"], "C2");
    let accepted: Vec<&Value> = events.iter().filter(|e| e["type"] == "control.accepted").collect();
    assert_eq!((accepted.len(), accepted[0]["cause"].as_str()), (1, Some("C2")));
    // Answered: no longer pending, and how long it waited observed once.
    metrics_say(
        "the approval's wait in /metrics",
        &[
            "aep_cline_approvals_pending 0",
            "aep_cline_approval_waited_seconds_count 1",
        ],
    );
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waiting_for_its_ack_is_not_cut_by_the_header_timeout() {
    let hub = StubHub::start(TOKEN).await;
    // A request's body must come within 3 s; the ack comes from the guard, after 4 s.
    let sandbox = Sandbox::new()
        .with_env("AEP_HEADER_TIMEOUT", "1s")
        .with_env("AEP_CLINE_HUB_ACK_GUARD_MS", "4000")
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let daemon = sandbox.start();
    hub.subscribed().await;
    sandbox.hook(&real_payload("hooks-cancel", "agent_start"));
    let mut approval = real_frame("approval.requested.approve");
    approval["envelope"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["sessionId"] = json!(SESSION);
    hub.send(&approval.to_string());
    let events = wait_for(&sandbox, "the request", |e| has(e, "attention.requested"));
    let request = events.iter().find(|e| e["type"] == "attention.requested").unwrap();
    let respond = command(
        "C3",
        "control.attention.respond",
        request["id"].as_str(),
        json!({"answer": {"text": "Approve"}}),
    );
    let (addr, auth) = (daemon.addr(), format!("Bearer {}", daemon.token));
    let waiting = tokio::task::spawn_blocking(move || {
        http(
            &addr,
            "POST",
            "/control?wait=10000",
            &[("authorization", &auth)],
            respond.to_string().as_bytes(),
        )
    });
    hub.command("approval.respond").await; // and never replied to
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["ack"]["type"], "control.accepted", "{answer}");
}

/// The stub hub asks to approve `commands` (`run_commands`), as request `n`.
fn ask(hub: &StubHub, n: usize, commands: &[&str]) {
    let mut approval = real_frame("approval.requested.approve");
    let e = &mut approval["envelope"];
    e["sessionId"] = json!(SESSION);
    e["eventId"] = json!(format!("hevt_display_{n}"));
    e["sequence"] = json!(1000 + n);
    let p = &mut e["payload"];
    p["sessionId"] = json!(SESSION);
    p["approvalId"] = json!(format!("approval_display_{n}"));
    p["toolCallId"] = json!(format!("call_display_{n}"));
    p["inputJson"] = json!(json!({ "commands": commands }).to_string());
    hub.send(&approval.to_string());
}

/// What an approver sees is what runs (#30), on the real binary: a 257-character command whose
/// tail would run unseen behind a 200-character cut, and one with a second line, a right-to-left
/// override and a zero-width space. The webhook's message cuts the first saying how much it hid
/// and linking the page; the page and `approvals` show all of both; the hidden characters are
/// `\u{202e}` and `\u{200b}` everywhere, never themselves; the second line is a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_approver_sees_is_what_runs_in_the_notification_the_link_page_and_approvals() {
    let receiver = Receiver::start();
    let hub = StubHub::start(TOKEN).await;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN)
        .with_env("AEP_CLINE_NOTIFY", &format!("{}/hook", receiver.url));
    let daemon = sandbox.start();
    hub.subscribed().await;
    sandbox.hook(&real_payload("hooks-cancel", "agent_start"));
    let tail = "; touch /tmp/aep-30/TAIL_RAN";
    let long = format!("echo {}{tail}", "a".repeat(257 - "echo ".len() - tail.len()));
    assert_eq!(long.chars().count(), 257);
    ask(&hub, 1, &[&long]);
    let (_, first) = receiver.next("the long command");
    ask(&hub, 2, &["echo line-one\ntouch X \u{202e}txt.exe\u{200b}"]);
    let (_, second) = receiver.next("the hiding command");
    let shown = "run_commands: echo line-one\ntouch X \\u{202e}txt.exe\\u{200b}";

    // The notification: the cut says how many characters it hid and where all of them are.
    let approve = first["actions"]["approve"].as_str().expect("a link: control is on");
    let whole = format!("run_commands: {long}");
    let hidden = whole.chars().count() - 200;
    assert_eq!(hidden, 71);
    assert_eq!(
        first["asked"],
        format!("{}… {hidden} more characters: see {approve}", &whole[..200]),
        "{first}"
    );
    assert!(first["text"]
        .as_str()
        .unwrap()
        .ends_with(first["asked"].as_str().unwrap()));
    assert_eq!(second["asked"], shown, "{second}");
    let raw = second.to_string();
    assert!(!raw.contains('\u{202e}') && !raw.contains('\u{200b}'), "{raw}");

    // The link's page shows all of it, lines as lines.
    let path = approve.strip_prefix(&daemon.url).expect("a link on the daemon");
    let (status, page) = http(&daemon.addr(), "GET", path, &[], b"");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("<pre>{whole}</pre>")), "{page}");
    let path = second["actions"]["approve"].as_str().unwrap();
    let (status, page) = http(&daemon.addr(), "GET", path.strip_prefix(&daemon.url).unwrap(), &[], b"");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("<pre>{shown}</pre>")), "{page}");
    assert!(!page.contains('\u{202e}') && !page.contains('\u{200b}'), "{page}");

    // `aep-cline approvals`: every command whole, its second line on a line of its own.
    let out = sandbox.run(&["approvals"], &[]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{table}");
    assert!(table.contains(&format!("\n  $ {long}\n")), "{table}");
    assert!(
        table.contains("\n  $ echo line-one\n    touch X \\u{202e}txt.exe\\u{200b}\n"),
        "{table}"
    );
    assert!(!table.contains('\u{202e}') && !table.contains('\u{200b}'), "{table}");
    drop(daemon);
}
