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

/// A cancel the hub takes while an approval waits, and the hub goes on waiting (seen on the
/// real hub under load: `run.abort` answered ok, no `cancelled` resolution, the run waiting until
/// someone answered): the daemon denies the approval with the cancel's reason, so the run cannot
/// wait on it, and the log says the cancel answered it. One the abort did end is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_meets_a_waiting_approval_denies_it() {
    let hub = StubHub::start(TOKEN).await;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let daemon = sandbox.start();
    hub.subscribed().await;
    sandbox.hook(&real_payload("hooks-cancel", "agent_start"));
    ask(&hub, 1, &["sleep 600"]);
    let events = wait_for(&sandbox, "the request", |e| has(e, "attention.requested"));
    let request = events
        .iter()
        .find(|e| e["type"] == "attention.requested")
        .unwrap()
        .clone();
    let cancel = command(
        "C-stop",
        "control.cancel",
        None,
        json!({"scope": "run", "reason": "stop now"}),
    );
    assert_eq!(post(&daemon, &cancel).0, 202);
    let abort = hub.command("run.abort").await;
    // The hub takes the abort and says nothing of the approval.
    hub.reply(&abort, None);
    let deny = hub.command("approval.respond").await;
    let p = &deny["envelope"]["payload"];
    assert_eq!(
        (p["approvalId"].as_str(), p["approved"].as_bool(), p["reason"].as_str()),
        (Some("approval_display_1"), Some(false), Some("stop now")),
        "{deny}"
    );
    let mut resolved = real_frame("approval.resolved.denied");
    resolved["envelope"]["sessionId"] = json!(SESSION);
    resolved["envelope"]["payload"]["approvalId"] = json!("approval_display_1");
    hub.send(&resolved.to_string());
    hub.reply(&deny, None);
    let events = wait_for(&sandbox, "the answer", |e| has(e, "attention.resolved"));
    let answered: Vec<&Value> = events.iter().filter(|e| e["type"] == "attention.answered").collect();
    assert_eq!(answered.len(), 1, "{events:?}");
    assert_eq!(
        (answered[0]["subject"].as_str(), answered[0]["cause"].as_str()),
        (request["id"].as_str(), Some("C-stop"))
    );
    assert_eq!(answered[0]["data"]["answer"]["option"], "deny");
    let acks: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("control.")))
        .collect();
    assert_eq!(acks.len(), 1, "one ack for the cancel: {acks:?}");

    // A second run whose abort ended the wait (the real hub's `cancelled` resolution before its
    // reply): nothing is denied.
    ask(&hub, 2, &["sleep 601"]);
    wait_for(&sandbox, "the second request", |e| {
        e.iter().filter(|e| e["type"] == "attention.requested").count() == 2
    });
    let cancel = command("C-stop-2", "control.cancel", None, json!({"scope": "run"}));
    assert_eq!(post(&daemon, &cancel).0, 202);
    let abort = hub.command("run.abort").await;
    let mut cancelled = real_frame("approval.resolved.cancelled");
    cancelled["envelope"]["sessionId"] = json!(SESSION);
    cancelled["envelope"]["payload"]["approvalId"] = json!("approval_display_2");
    hub.send(&cancelled.to_string());
    hub.reply(&abort, None);
    let events = wait_for(&sandbox, "the dismissal", |e| {
        e.iter().filter(|e| e["type"] == "attention.resolved").count() == 2
    });
    let last = events.iter().rev().find(|e| e["type"] == "attention.resolved").unwrap();
    assert_eq!(last["data"]["resolution"], "dismissed");
    // Nothing more is sent: the next frame the daemon sends is not an approval.respond.
    let next = tokio::time::timeout(Duration::from_secs(2), hub.command("approval.respond")).await;
    assert!(next.is_err(), "an approval the abort ended was denied too: {next:?}");
    drop(daemon);
}

/// The policy file swapped while hooks and hub approvals arrive (#35): every `mv` and every
/// rewrite in place, under load. Both versions deny `rm` under their own rule name, so at no
/// moment may a tool be allowed (no gap while the file changes, no half-written file used), and
/// each decision's audit on the log names the rule its effect came from: the hook's cancel and
/// its `tool.requested`, the hub's answer and its `attention.requested`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_swapped_under_load_is_used_whole_and_audit_equals_effect() {
    let version = |v: &str, pad: usize| {
        format!(
            "{}[[rule]]\nname = \"no-rm-{v}\"\ntool = \"run_commands\"\ncommand = \"rm *\"\nanswer = \"deny\"\nreason = \"{v} says no\"\n",
            "# padding\n".repeat(pad)
        )
    };
    let hub = StubHub::start(TOKEN).await;
    let base = Sandbox::new();
    let path = base.root.path().join("policy.toml");
    std::fs::write(&path, version("a", 0)).unwrap();
    let sandbox = std::sync::Arc::new(
        base.with_env("AEP_CLINE_HUB_CONTROL", "1")
            .with_env("AEP_CLINE_HUB_URL", &hub.url)
            .with_env("AEP_CLINE_HUB_TOKEN", TOKEN)
            .with_env("AEP_CLINE_POLICY", path.to_str().unwrap()),
    );
    let daemon = sandbox.start();
    hub.subscribed().await;
    sandbox.hook(&real_payload("hooks-cancel", "agent_start"));
    let run_for = Duration::from_secs(9);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The swapper: a rename, then a rewrite in place (truncate, then write), in turn; each version
    // stays 2 s, as a file is used once it has stayed the same for a poll (1 s).
    let swapper = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let text = version(if n.is_multiple_of(2) { "a" } else { "b" }, n % 7);
                if n.is_multiple_of(2) {
                    std::fs::write(&path, text).unwrap();
                } else {
                    let tmp = path.with_extension("tmp");
                    std::fs::write(&tmp, text).unwrap();
                    std::fs::rename(&tmp, &path).unwrap();
                }
                std::thread::sleep(Duration::from_millis(2000));
            }
        })
    };
    // Hooks from three threads, each a new tool call running `rm`.
    let hookers: Vec<_> = (0..3)
        .map(|t| {
            let sandbox = sandbox.clone();
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + run_for;
                let mut told = Vec::new();
                let mut i = 0;
                while std::time::Instant::now() < deadline {
                    i += 1;
                    let call = format!("call_swap_{t}_{i}");
                    let mut p: Value = serde_json::from_slice(&real_payload("hooks-cancel", "tool_call")).unwrap();
                    p["tool_call"] = json!({"id": call, "name": "run_commands", "input": {"commands": [format!("rm -rf v{t}_{i}")]}});
                    let out = sandbox.hook(&serde_json::to_vec(&p).unwrap());
                    assert!(out.status.success(), "{out:?}");
                    told.push((call, String::from_utf8(out.stdout).unwrap()));
                }
                told
            })
        })
        .collect();
    // Hub approvals meanwhile, each answered by the policy; the stub replies ok to each answer.
    let mut answers = Vec::new();
    let deadline = tokio::time::Instant::now() + run_for;
    let mut n = 0;
    while tokio::time::Instant::now() < deadline {
        n += 1;
        ask(&hub, n, &[&format!("rm -rf w{n}")]);
        let respond = hub.command("approval.respond").await;
        hub.reply(&respond, None);
        answers.push(respond["envelope"]["payload"].clone());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let told: Vec<(String, String)> = hookers.into_iter().flat_map(|h| h.join().unwrap()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();

    let rule_of = |said: &str| -> String {
        let control: Value = serde_json::from_str(said).unwrap_or_else(|e| panic!("allowed ({e}): {said:?}"));
        // A deny of one of Cline's own tools fails the tool alone (#46): its input taken away,
        // the rule's words for the model.
        assert_eq!(control["overrideInput"], Value::Null, "{control}");
        let words = control["context"].as_str().unwrap();
        ["no-rm-a", "no-rm-b"]
            .into_iter()
            .find(|r| words.contains(&format!("\"{r}\"")))
            .unwrap_or_else(|| panic!("no rule named: {words}"))
            .to_string()
    };
    let events = wait_for(&sandbox, "every hook's events", |e| {
        e.iter().filter(|e| e["type"] == "tool.requested").count() == told.len()
    });
    let mut seen = std::collections::BTreeSet::new();
    for (call, said) in &told {
        let rule = rule_of(said);
        let requested = events
            .iter()
            .find(|e| e["type"] == "tool.requested" && e["data"]["tool"]["call_id"] == call.as_str())
            .unwrap_or_else(|| panic!("no tool.requested for {call}"));
        assert_eq!(
            requested["data"]["cline.policy_rule"],
            rule.as_str(),
            "audit and effect differ: {requested}"
        );
        seen.insert(rule);
    }
    assert_eq!(
        seen.len(),
        2,
        "both versions decided hooks: {seen:?} of {} hooks",
        told.len()
    );
    assert!(!events.iter().any(|e| e["type"] == "tool.completed"));
    for answer in &answers {
        assert_eq!(answer["approved"], false, "{answer}");
        let id = answer["approvalId"].as_str().unwrap();
        let request = events
            .iter()
            .find(|e| e["type"] == "attention.requested" && e["data"]["cline.approval_id"] == id)
            .unwrap_or_else(|| panic!("no request for {id}"));
        let rule = request["data"]["cline.policy_rule"].as_str().unwrap();
        let v = rule.trim_start_matches("no-rm-");
        assert_eq!(answer["reason"], format!("{v} says no"), "{request}");
    }
    eprintln!(
        "{} hooks and {} approvals decided while the policy changed",
        told.len(),
        answers.len()
    );
    drop(daemon);
}
