//! The hub control tap on the REAL Cline hub (CLI 3.0.65), offline: a fake model, an isolated
//! CLINE_DIR with the shim installed as its hooks, `cline hub ensure` on a port of its own, the
//! daemon with `AEP_CLINE_HUB_CONTROL=1` reading the hub's discovery file, and a test client
//! that plays the user (creates a session that asks before every tool, starts runs, answers out
//! of band). Commands reach the daemon's intake through `POST /control`.
//!
//! Each test stops its hub (`cline hub stop`) when it ends, pass or fail. They fail (never skip)
//! when the CLI is missing: `.ci/install-cline.sh` installs it.
//!
//! Notifications (`AEP_CLINE_NOTIFY`) are tested here too, with a receiver on 127.0.0.1 beside a
//! dead and a hung one: the approval's link answers the real hub's approval once.
//!
//! Which lane reports a control cancel: on the real hub, `run.abort` fires no `agent_abort`
//! (TaskCancel) hook; it fires `session_shutdown`, and the hub broadcasts `run.aborted`. Either
//! may reach the daemon first; the run gets exactly one `run.cancelled {by: "control"}`.

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::cline::ClineSandbox;
use support::daemon::{assert_valid_stream, http, of, types, Daemon, Sandbox};
use support::fake_model::{FakeModel, Script};
use support::hub_client::HubClient;
use support::real_hub::{tapped_sandbox, RealHub};
use support::wait::wait_until_seen;
use support::webhook::Receiver;

/// A Cline sandbox whose hooks run the real shim, and the daemon's sandbox with the hub gates on.
fn setup() -> (FakeModel, ClineSandbox, Sandbox) {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL").with_env("RUST_LOG", "info");
    (model, cline, aep)
}

/// Polls the session's log until `done` holds (60 s at most).
fn wait_log(aep: &Sandbox, session: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    aep.wait_log(session, what, Duration::from_secs(60), done)
}

fn command(id: &str, ty: &str, session: &str, subject: Option<&str>, data: Value) -> Value {
    let mut c = json!({"aep": "0.1", "id": id, "type": ty, "time": "2026-11-30T00:00:00Z",
        "source": "aep://e2e/agent/console", "agent": "console", "session": session, "data": data});
    if let Some(s) = subject {
        c["subject"] = json!(s);
    }
    c
}

/// Sends a command to the daemon's intake (`POST /control`).
fn post(daemon: &Daemon, command: &Value) {
    let auth = format!("Bearer {}", daemon.token);
    let (status, body) = http(
        &daemon.addr(),
        "POST",
        "/control",
        &[("authorization", &auth), ("content-type", "application/json")],
        command.to_string().as_bytes(),
    );
    assert_eq!(status, 202, "POST /control: {body}");
}

fn caused_by<'a>(events: &'a [Value], ty: &str, cause: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == ty && e["cause"] == cause)
        .collect()
}

/// Where the first Event of `ty` caused by `cause` (any cause when `None`) sits in `log`.
fn position(log: &[Value], ty: &str, cause: Option<&str>) -> usize {
    log.iter()
        .position(|e| e["type"] == ty && cause.is_none_or(|c| e["cause"] == c))
        .unwrap_or_else(|| panic!("no {ty} caused by {cause:?}: {:?}", types(log)))
}

/// Asserts the Events named by `(type, cause)` come in this order in `log` (#20: answers before
/// their effects).
fn assert_order(log: &[Value], order: &[(&str, Option<&str>)]) {
    let at: Vec<usize> = order.iter().map(|(ty, cause)| position(log, ty, *cause)).collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "{order:?} at {at:?}: {:?}",
        types(log)
    );
}

/// Waits until the daemon has handled every hub frame sent so far: it reads the hub's frames in
/// order, so once an approval requested now (in a session of its own) is in the daemon's log,
/// everything the hub sent before it has been handled too.
async fn hub_frames_handled(client: &HubClient, aep: &Sandbox, cline: &ClineSandbox) {
    let marker = client.create_session(&cline.workspace()).await;
    client.start_run(&marker, "marker CMD:echo marker");
    wait_log(aep, &marker, "the marker approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
}

/// Stops the daemon and checks the hub token never reached its log.
fn stop_without_leaking(daemon: Daemon, hub: &RealHub) {
    let token = serde_json::from_slice::<Value>(&std::fs::read(hub.discovery()).unwrap()).unwrap()["authToken"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, stderr) = daemon.stop();
    for line in stderr.lines().filter(|l| l.contains("run.aborted")) {
        eprintln!("daemon: {line}");
    }
    assert!(stderr.contains("hub tap connected"), "{stderr}");
    assert!(!stderr.contains(&token), "the hub token is in the daemon's log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_answered_through_the_intake_once_even_when_redelivered() {
    let (_model, cline, aep) = setup();
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;

    client.start_run(&session, "please CMD:echo approved-run");
    let log = wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
    let request = of(&log, "attention.requested")[0].clone();
    assert_eq!(request["subject"], "run_commands");
    assert_eq!(request["data"]["respond_via"], json!(["control", "oob"]));
    assert_eq!(
        request["run"],
        of(&log, "run.started")[0]["run"],
        "on the run the hooks opened"
    );
    assert_eq!(
        request["cause"],
        of(&log, "tool.requested")[0]["id"],
        "caused by the gated tool call"
    );
    assert!(
        !request.to_string().contains("approved-run"),
        "no tool input at metadata"
    );

    let approve = command(
        "CMD-approve",
        "control.attention.respond",
        &session,
        request["id"].as_str(),
        json!({"answer": {"option": "approve"}}),
    );
    post(&daemon, &approve);
    let log = wait_log(&aep, &session, "the approved run's end", |l| {
        !of(l, "run.finished").is_empty()
    });
    assert_eq!(caused_by(&log, "control.accepted", "CMD-approve").len(), 1);
    let answered = caused_by(&log, "attention.answered", "CMD-approve");
    assert_eq!(answered.len(), 1);
    assert_eq!(
        answered[0]["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    let resolved = caused_by(&log, "attention.resolved", answered[0]["id"].as_str().unwrap());
    assert_eq!(resolved[0]["data"]["resolution"], "answered");
    assert_eq!(
        of(&log, "tool.completed").len(),
        1,
        "the approved tool ran: {:?}",
        types(&log)
    );

    // Redelivered: taken, decided once, never executed twice.
    post(&daemon, &approve);
    // A deny by text (AEP-0008): unmatched text refuses, with the text as the reason.
    client.start_run(&session, "now CMD:echo denied-run");
    let log = wait_log(&aep, &session, "the second approval", |l| {
        of(l, "attention.requested").len() == 2
    });
    let second = of(&log, "attention.requested")[1].clone();
    let deny = command(
        "CMD-deny",
        "control.attention.respond",
        &session,
        second["id"].as_str(),
        json!({"answer": {"text": "not now, use the staging box"}}),
    );
    post(&daemon, &deny);
    let log = wait_log(&aep, &session, "the denied run's end", |l| {
        of(l, "run.finished").len() == 2
    });
    let denied = caused_by(&log, "attention.answered", "CMD-deny");
    assert_eq!(
        denied[0]["data"],
        json!({"answer": {"option": "deny"}, "via": "control"})
    );
    let failed = of(&log, "tool.failed");
    assert_eq!(failed.len(), 1, "{:?}", types(&log));
    assert_eq!(failed[0]["data"]["error"]["type"], "denied");
    let answered = denied[0]["id"].as_str().unwrap();
    assert_order(
        &log,
        &[
            ("control.accepted", Some("CMD-deny")),
            ("attention.answered", Some("CMD-deny")),
            ("attention.resolved", Some(answered)),
            ("tool.failed", None),
        ],
    );
    assert_eq!(caused_by(&log, "control.accepted", "CMD-deny").len(), 1, "one ack");
    let resolved = client.event(&session, "approval.resolved", 1).await;
    assert_eq!(resolved["payload"]["approved"], false);
    assert_eq!(resolved["payload"]["reason"], "not now, use the staging box");
    assert_eq!(
        of(&log, "tool.completed").len(),
        1,
        "the denied tool did not run: {:?}",
        types(&log)
    );
    assert_eq!(
        caused_by(&log, "control.accepted", "CMD-approve").len(),
        1,
        "one decision"
    );
    assert!(
        of(&log, "control.rejected").is_empty(),
        "{:?}",
        of(&log, "control.rejected")
    );
    eprintln!("approve/deny session: {:?}", types(&log));
    assert_valid_stream(&log);
    stop_without_leaking(daemon, &hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_band_answers_are_mirrored_and_send_input_is_queued() {
    let (_model, cline, aep) = setup();
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;

    client.start_run(&session, "first CMD:echo first");
    wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
    let input = command(
        "CMD-input",
        "x.cline.control.send_input",
        &session,
        None,
        json!({"text": "then CMD:echo second", "delivery": "queue"}),
    );
    post(&daemon, &input);
    let log2 = wait_log(&aep, &session, "the input sent", |l| {
        !caused_by(l, "x.cline.input.sent", "CMD-input").is_empty()
    });
    assert_eq!(caused_by(&log2, "control.accepted", "CMD-input").len(), 1);
    assert_eq!(
        caused_by(&log2, "x.cline.input.sent", "CMD-input")[0]["data"],
        json!({"delivery": "queue"})
    );

    // Another hub client (Cline's UI, here the test) answers both approvals.
    let first = client.event(&session, "approval.requested", 0).await;
    client.command(
        "approval.respond",
        Some(&session),
        json!({"approvalId": first["payload"]["approvalId"], "approved": true}),
    );
    let second = client.event(&session, "approval.requested", 1).await;
    client.command(
        "approval.respond",
        Some(&session),
        json!({"approvalId": second["payload"]["approvalId"], "approved": true}),
    );
    let log = wait_log(&aep, &session, "both tools", |l| {
        of(l, "tool.completed").len() == 2 && of(l, "attention.resolved").len() == 2
    });
    let oob: Vec<&Value> = of(&log, "attention.answered");
    assert_eq!(oob.len(), 2);
    assert!(oob
        .iter()
        .all(|a| a["data"] == json!({"answer": {"option": "approve"}, "via": "oob"})));
    assert_eq!(
        of(&log, "attention.requested")[0]["id"],
        of(&log, "attention.answered")[0]["subject"]
    );
    eprintln!("oob/send_input session: {:?}", types(&log));
    assert_valid_stream(&log);
    stop_without_leaking(daemon, &hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_running_sleep_ends_its_run_once_by_control() {
    let (_model, cline, aep) = setup();
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;

    client.start_run(&session, "finally CMD:sleep 20; echo never");
    let log = wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
    let request = of(&log, "attention.requested")[0].clone();
    post(
        &daemon,
        &command(
            "CMD-go",
            "control.attention.respond",
            &session,
            request["id"].as_str(),
            json!({"answer": {"option": "approve"}}),
        ),
    );
    client.event(&session, "tool.started", 0).await;
    post(
        &daemon,
        &command("CMD-cancel", "control.cancel", &session, None, json!({"scope": "run"})),
    );
    // The hub's session outlives the run.abort's session_shutdown hook: the run ends, the
    // session does not.
    wait_log(&aep, &session, "the cancelled run", |l| {
        !of(l, "run.cancelled").is_empty()
    });
    let finished = client.event(&session, "tool.finished", 0).await;
    assert_eq!(
        finished["payload"]["output"][0]["success"], false,
        "the sleep was interrupted: {finished}"
    );
    // Both lanes have reported by now: the hook's session_shutdown and the hub's run.aborted.
    client.event(&session, "run.aborted", 0).await;
    hub_frames_handled(&client, &aep, &cline).await;
    let log = aep.log(&session);
    let cancelled = of(&log, "run.cancelled");
    assert_eq!(cancelled.len(), 1, "exactly one terminal: {:?}", types(&log));
    assert_eq!(cancelled[0]["data"]["by"], "control");
    assert_eq!(cancelled[0]["cause"], "CMD-cancel");
    assert_eq!(cancelled[0]["run"], of(&log, "run.started")[0]["run"]);
    assert_eq!(caused_by(&log, "control.accepted", "CMD-cancel").len(), 1);
    eprintln!("cancelled run: {:?}", types(&log));
    assert_valid_stream(&log);
    stop_without_leaking(daemon, &hub);
}

/// A run in its own `cline --json` process (no hub) while the tap is connected: the hub would
/// answer its `run.abort` ok and change nothing, so `aep-cline cancel` is refused, in words, and
/// the run goes on.
#[test]
fn a_cancel_of_a_run_outside_the_hub_is_refused_in_words_and_the_run_goes_on() {
    let model = FakeModel::start(Script::command("sleep 30; echo never"));
    let cline = ClineSandbox::new(&model);
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL").with_env("RUST_LOG", "info");
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    daemon.wait_stderr("hub tap connected", Duration::from_secs(30));
    let mut run = cline.json_run_command("Run the command and report what it printed.");
    run.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut run = run.spawn().unwrap();
    let session = support::wait::wait_until("the run's tool call", Duration::from_secs(60), || {
        aep.session_with("tool.requested")
    });
    let out = aep.run(&["cancel", &session], &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("does not run in Cline's hub") && said.contains("only the hub can cancel a run"),
        "why, in words: {said}"
    );
    let log = aep.log(&session);
    assert_eq!(types(&log).last(), Some(&"control.rejected"), "{:?}", types(&log));
    assert!(
        of(&log, "run.cancelled").is_empty(),
        "nothing was cancelled: {:?}",
        types(&log)
    );
    assert!(run.try_wait().unwrap().is_none(), "the run goes on");
    run.kill().unwrap();
    run.wait().unwrap();
    stop_without_leaking(daemon, &hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_with_an_approval_pending_dismisses_it_and_the_hub_session_goes_on() {
    let (_model, cline, aep) = setup();
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;

    client.start_run(&session, "again CMD:echo pending");
    let log = wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
    let request = of(&log, "attention.requested")[0].clone();
    post(
        &daemon,
        &command(
            "CMD-cancel",
            "control.cancel",
            &session,
            None,
            json!({"scope": "run", "reason": "changed my mind"}),
        ),
    );
    wait_log(&aep, &session, "the cancelled run and the dismissal", |l| {
        !of(l, "run.cancelled").is_empty() && !of(l, "attention.resolved").is_empty()
    });
    client.event(&session, "run.aborted", 0).await;
    hub_frames_handled(&client, &aep, &cline).await;
    let log = aep.log(&session);
    let resolved = of(&log, "attention.resolved");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["subject"], request["id"]);
    assert_eq!(resolved[0]["data"]["resolution"], "dismissed");
    assert!(
        of(&log, "session.ended").is_empty(),
        "the hub's session goes on: {:?}",
        types(&log)
    );
    let cancelled = of(&log, "run.cancelled");
    assert_eq!(cancelled.len(), 1, "{:?}", types(&log));
    assert_eq!(cancelled[0]["data"]["by"], "control");
    assert_eq!(cancelled[0]["cause"], "CMD-cancel");
    assert_order(
        &log,
        &[
            ("control.accepted", Some("CMD-cancel")),
            ("attention.resolved", None),
            ("run.cancelled", Some("CMD-cancel")),
        ],
    );
    if let Some(refused) = log.iter().position(|e| e["type"] == "tool.failed") {
        // The pending tool's refusal, when its hook came before the run's end.
        assert!(
            position(&log, "attention.resolved", None) < refused,
            "{:?}",
            types(&log)
        );
    }
    let aborted = client.event(&session, "approval.resolved", 0).await;
    assert_eq!(aborted["payload"]["cancelled"], true);
    assert_eq!(aborted["payload"]["reason"], "changed my mind");
    eprintln!("cancel with an approval pending: {:?}", types(&log));
    assert_valid_stream(&log);
    stop_without_leaking(daemon, &hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_in_one_hub_session_each_end_once_by_their_own_cancel() {
    let (_model, cline, aep) = setup();
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;
    for n in 0..2 {
        client.start_run(&session, &format!("run {n} CMD:sleep 20; echo never"));
        let log = wait_log(&aep, &session, "the approval", |l| {
            of(l, "attention.requested").len() > n
        });
        let request = of(&log, "attention.requested")[n].clone();
        post(
            &daemon,
            &command(
                &format!("CMD-go-{n}"),
                "control.attention.respond",
                &session,
                request["id"].as_str(),
                json!({"answer": {"option": "approve"}}),
            ),
        );
        client.event(&session, "tool.started", n).await;
        let cancel = format!("CMD-cancel-{n}");
        post(
            &daemon,
            &command(&cancel, "control.cancel", &session, None, json!({"scope": "run"})),
        );
        wait_log(&aep, &session, "the cancelled run", |l| {
            of(l, "run.cancelled").len() > n
        });
        client.event(&session, "run.aborted", n).await;
    }
    hub_frames_handled(&client, &aep, &cline).await;
    let log = aep.log(&session);
    let runs = of(&log, "run.started");
    let cancelled = of(&log, "run.cancelled");
    assert_eq!((runs.len(), cancelled.len()), (2, 2), "{:?}", types(&log));
    for (n, run) in runs.iter().enumerate() {
        let cause = format!("CMD-cancel-{n}");
        let by_command = caused_by(&log, "run.cancelled", &cause);
        assert_eq!(by_command.len(), 1, "run {n}: {:?}", types(&log));
        assert_eq!(by_command[0]["data"]["by"], "control");
        assert_eq!(by_command[0]["run"], run["run"]);
        assert_eq!(caused_by(&log, "control.accepted", &cause).len(), 1);
    }
    let ended = of(&log, "session.ended");
    assert!(ended.len() <= 1);
    if !ended.is_empty() {
        assert_eq!(log.last().unwrap()["type"], "session.ended", "{:?}", types(&log));
    }
    eprintln!("two cancelled runs in one hub session: {:?}", types(&log));
    assert_valid_stream(&log);
    stop_without_leaking(daemon, &hub);
}

/// The notices of one budget threshold: `attention.requested` naming it, each resolved `auto`.
fn budget_notices<'a>(log: &'a [Value], name: &str, threshold: f64) -> Vec<&'a Value> {
    let notices: Vec<&Value> = of(log, "attention.requested")
        .into_iter()
        .filter(|e| e["data"]["budget"]["name"] == name && e["data"]["budget"]["threshold"] == threshold)
        .collect();
    for n in &notices {
        let resolved = caused_by(log, "attention.resolved", n["id"].as_str().unwrap());
        assert_eq!(resolved.len(), 1, "a notice is resolved at once: {n}");
        assert_eq!(resolved[0]["data"]["resolution"], "auto");
    }
    notices
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_budget_is_cancelled_through_the_hub_after_the_notice_at_80_percent() {
    // The fake model's calls report 45 output tokens; at 0.01 USD each (a private model priced
    // through AEP_CLINE_PRICES) a call costs 0.45 USD: run 1's two calls reach 90% of both
    // budgets and it finishes; run 2's first call takes the session to 1.35 of 1.00 while its
    // `sleep` runs, and the budget cancels it. The tap alone (no control gate) is enough.
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let prices = cline.root().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"data": [{"id": "acme/fake-model", "pricing": {"prompt": "0", "completion": "0.01", "input_cache_read": "0"}}]}"#,
    )
    .unwrap();
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB")
        .with_env("RUST_LOG", "info")
        .with_env("AEP_CLINE_PRICES", prices.to_str().unwrap())
        .with_env("AEP_CLINE_BUDGET", "run=1.00,session=1.00");
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session_with(&cline.workspace(), true).await;

    client.start_run(&session, "first CMD:echo under-budget");
    client.event(&session, "run.completed", 0).await;
    let log = wait_log(&aep, &session, "run 1's end and its notices", |l| {
        !of(l, "run.finished").is_empty() && of(l, "attention.requested").len() >= 2
    });
    let run1 = of(&log, "run.started")[0]["run"].clone();
    for name in ["run", "session"] {
        let warned = budget_notices(&log, name, 0.8);
        assert_eq!(
            warned.len(),
            1,
            "one notice at 80% of the {name} budget: {:?}",
            types(&log)
        );
        assert_eq!(warned[0]["run"], run1);
        assert_eq!(warned[0]["data"]["budget"]["limit"], 1.0);
        assert!((warned[0]["data"]["budget"]["cost"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(warned[0]["data"]["budget"]["currency"], "USD");
    }
    assert!(of(&log, "run.cancelled").is_empty(), "run 1 is under budget: untouched");

    client.start_run(&session, "second CMD:sleep 30; echo never");
    wait_log(&aep, &session, "the run the budget cancelled", |l| {
        !of(l, "run.cancelled").is_empty()
    });
    let finished = client.event(&session, "tool.finished", 1).await;
    assert_eq!(
        finished["payload"]["output"][0]["success"], false,
        "the sleep was interrupted: {finished}"
    );
    client.event(&session, "run.aborted", 0).await;
    hub_frames_handled(&client, &aep, &cline).await;
    let log = aep.log(&session);
    let cancelled = of(&log, "run.cancelled");
    assert_eq!(cancelled.len(), 1, "exactly one terminal: {:?}", types(&log));
    let run2 = &of(&log, "run.started")[1]["run"];
    assert_eq!(&cancelled[0]["run"], run2);
    let budget = &cancelled[0]["data"]["budget"];
    assert_eq!(cancelled[0]["data"]["by"], "policy", "a budget is the operator's rule");
    assert_eq!((&budget["name"], &budget["limit"]), (&json!("session"), &json!(1.0)));
    assert!((budget["cost"].as_f64().unwrap() - 1.35).abs() < 1e-9, "{budget}");
    let reached = budget_notices(&log, "session", 1.0);
    assert_eq!(reached.len(), 1, "{:?}", types(&log));
    assert_eq!(reached[0]["data"]["budget"]["action"], "cancel");
    assert_eq!(cancelled[0]["cause"], reached[0]["id"], "caused by the budget's notice");
    assert_eq!(&reached[0]["run"], run2);
    assert_eq!(budget_notices(&log, "run", 0.8).len(), 1, "no second notice");
    assert_eq!(of(&log, "run.finished").len(), 1);
    eprintln!("budget-cancelled run: {:?}", types(&log));
    assert_valid_stream(&log);

    // People see it: /healthz, `sessions` and `doctor`.
    let auth = format!("Bearer {}", daemon.token);
    let (_, health) = http(&daemon.addr(), "GET", "/healthz", &[("authorization", &auth)], b"");
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["budget"]["limits"], json!({"run": 1.0, "session": 1.0}));
    assert_eq!(health["budget"]["sessions"][&session]["use"], "1.35/1.00 USD session");
    let out = aep.run(&["sessions"], &[]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("BUDGET") && table.contains("1.35/1.00 USD session"),
        "{table}"
    );
    let out = aep.run(&["doctor"], &[]);
    let doctor = String::from_utf8_lossy(&out.stdout);
    assert!(doctor.contains("run 1.00, session 1.00 USD"), "{doctor}");
    stop_without_leaking(daemon, &hub);
}

/// A receiver that takes connections and never answers.
fn hung_receiver() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    addr
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The path of a link on the daemon (`http://127.0.0.1:PORT/notify/...` → `/notify/...`).
fn link_path(daemon: &Daemon, url: &Value) -> String {
    let url = url.as_str().expect("a link");
    url.strip_prefix(&daemon.url)
        .unwrap_or_else(|| panic!("{url} is not on the daemon's URL {}", daemon.url))
        .to_string()
}

/// A bodiless POST as a reverse proxy forwards it: the public `Host`, and the `Origin: null` a
/// browser sends for a form under `Referrer-Policy: no-referrer`.
fn post_via_proxy(addr: &str, path: &str, host: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: null\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn healthz(daemon: &Daemon) -> Value {
    let (status, body) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_link_approves_the_real_tool_once_and_dead_receivers_delay_nothing() {
    let receiver = Receiver::start();
    let (dead, hung) = (dead_port(), hung_receiver());
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let targets = format!(
        "http://127.0.0.1:{dead}/dead,http://{hung}/hung,{url}/hook,ntfy+{url}/cline_e2e",
        url = receiver.url
    );
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL")
        .with_env("RUST_LOG", "info")
        .with_env("AEP_CLINE_NOTIFY", &targets);
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;

    client.start_run(&session, "please CMD:echo notified-run");
    // The webhook and ntfy, in either order: ntfy's JSON goes to the server's root.
    let mut got = [receiver.next("the approval"), receiver.next("the approval on ntfy")];
    got.sort_by_key(|(path, _)| path.clone());
    let [(root, ntfy), (hook, note)] = got;
    assert_eq!((root.as_str(), hook.as_str()), ("/", "/hook"));
    assert_eq!(ntfy["topic"], "cline_e2e");
    assert!(
        ntfy["message"]
            .as_str()
            .unwrap()
            .contains("run_commands: echo notified-run"),
        "{ntfy}"
    );
    let buttons: Vec<(&str, &str)> = ntfy["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), a["label"].as_str().unwrap()))
        .collect();
    assert_eq!(buttons, [("http", "Approve"), ("http", "Deny"), ("view", "Open")]);
    assert_eq!(note["kind"], "approval", "{note}");
    assert_eq!(note["session"], session.as_str());
    assert_eq!(note["tool"], "run_commands");
    assert_eq!(note["asked"], "run_commands: echo notified-run", "{note}");
    assert!(note["text"].as_str().unwrap().contains("echo notified-run"), "{note}");
    assert!(note["waiting_since"].is_string() && note["host"].is_string(), "{note}");
    let log = wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
    let request = of(&log, "attention.requested")[0].clone();
    assert_eq!(note["request"], request["id"]);
    let dashboard = note["actions"]["dashboard"].as_str().unwrap();
    assert!(
        dashboard.starts_with(&daemon.url) && dashboard.contains("#/s/"),
        "{dashboard}"
    );
    assert_eq!(
        ntfy["actions"][0]["url"], note["actions"]["approve"],
        "one link per answer"
    );
    let approve = link_path(&daemon, &note["actions"]["approve"]);
    let deny = link_path(&daemon, &note["actions"]["deny"]);
    assert!(approve.starts_with("/notify/") && approve != deny, "{approve} {deny}");

    // Opening the link (a preview, a scanner) shows what would be answered and answers nothing.
    let (status, page) = http(&daemon.addr(), "GET", &approve, &[], b"");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("echo notified-run") && page.contains("<form method=\"post\">"),
        "{page}"
    );
    assert_eq!(page.matches("<button").count(), 1, "one button: {page}");
    // A forged link (the approve link's signature on the deny link's claims) is refused.
    let (claims, _) = deny.rsplit_once('.').unwrap();
    let (_, signature) = approve.rsplit_once('.').unwrap();
    let (status, page) = http(&daemon.addr(), "POST", &format!("{claims}.{signature}"), &[], b"");
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("not made by this daemon"), "{page}");
    // Another site's page cannot post it.
    let (status, _) = http(
        &daemon.addr(),
        "POST",
        &approve,
        &[("origin", "https://evil.example")],
        b"",
    );
    assert_eq!(status, 403);
    let log = aep.log(&session);
    assert!(
        of(&log, "attention.answered").is_empty() && of(&log, "control.accepted").is_empty(),
        "still pending after GET and refused POSTs: {:?}",
        types(&log)
    );
    assert!(of(&log, "tool.completed").is_empty());

    // The POST answers, from a device without the dashboard's cookie, under another Host (a proxy).
    let (status, page) = post_via_proxy(&daemon.addr(), &approve, "cline.example.net");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Approved"), "{page}");
    let log = wait_log(&aep, &session, "the approved run's end", |l| {
        !of(l, "run.finished").is_empty()
    });
    assert_eq!(
        of(&log, "tool.completed").len(),
        1,
        "the tool ran once: {:?}",
        types(&log)
    );
    let answered = of(&log, "attention.answered");
    assert_eq!(answered.len(), 1);
    assert_eq!(
        answered[0]["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    let accepted = of(&log, "control.accepted");
    assert_eq!(accepted.len(), 1);
    assert_eq!(
        answered[0]["cause"], accepted[0]["cause"],
        "answered by the link's command"
    );

    // Used: the same link again, and the other answer's link, answer nothing.
    let (status, page) = http(&daemon.addr(), "POST", &approve, &[], b"");
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("used already"), "{page}");
    let (status, page) = http(&daemon.addr(), "POST", &deny, &[], b"");
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("Nothing waits"), "{page}");

    // The dead and hung receivers cost retries, counted, and delayed nothing above.
    let health = wait_until_seen("the retries counted", Duration::from_secs(60), || {
        let health = healthz(&daemon);
        let targets = health["notify"]["targets"].as_array().cloned().unwrap_or_default();
        // Shown without their paths (a webhook's secret, an ntfy topic).
        let of_target = |shown: &str| targets.iter().find(|t| t["target"] == shown).cloned();
        let (hook, ntfy) = (format!("{}/…", receiver.url), format!("ntfy+{}/…", receiver.url));
        if of_target(&format!("http://127.0.0.1:{dead}/…")).is_some_and(|t| t["retries"].as_u64() >= Some(1))
            && of_target(&hook).is_some_and(|t| t["sent"] == 1)
            && of_target(&ntfy).is_some_and(|t| t["sent"] == 1)
        {
            Ok(health)
        } else {
            Err(format!("no retries counted: {health}"))
        }
    });
    eprintln!("notify health: {}", health["notify"]);
    assert!(
        !health.to_string().contains("cline_e2e"),
        "the ntfy topic is a password"
    );
    assert_eq!(health["notify"]["links"], true);

    // Nothing the notification said entered an Event.
    let log = aep.log(&session);
    assert!(
        !serde_json::to_string(&log).unwrap().contains("notified-run"),
        "the command is not in the log at metadata"
    );
    assert_valid_stream(&log);
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("a notification will be retried"), "{stderr}");
    for (_, token) in [&approve, &deny].iter().map(|l| l.rsplit_once('/').unwrap()) {
        assert!(!stderr.contains(token), "a link's token reached the daemon's log");
    }
}

/// The policy (`AEP_CLINE_POLICY`) on the real hub: the daemon answers what its rules decide
/// through the same intake as a person, and leaves the rest to a person.
mod policy {
    use super::*;
    use std::path::PathBuf;

    /// [`setup`] with a policy file (written before the daemon starts).
    fn setup_with(policy: &str) -> (FakeModel, ClineSandbox, Sandbox, PathBuf) {
        let (model, cline, aep) = setup();
        let path = aep.root.path().join("policy.toml");
        std::fs::write(&path, policy).unwrap();
        let aep = aep.with_env("AEP_CLINE_POLICY", path.to_str().unwrap());
        (model, cline, aep, path)
    }

    /// Polls `/healthz` until `done` holds of its `policy` (60 s at most).
    fn wait_policy(daemon: &Daemon, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_until_seen(what, Duration::from_secs(60), || {
            let (_, body) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
            let policy = serde_json::from_str::<Value>(&body).unwrap()["policy"].clone();
            if done(&policy) {
                Ok(policy)
            } else {
                Err(format!("/healthz policy is {policy}"))
            }
        })
    }

    /// The daemon's log without its terminal colours.
    fn plain(stderr: &str) -> String {
        regex::Regex::new("\x1b\\[[0-9;]*m")
            .unwrap()
            .replace_all(stderr, "")
            .into_owned()
    }

    fn answered_by(log: &[Value], rule: &str) -> Vec<Value> {
        of(log, "attention.answered")
            .into_iter()
            .filter(|e| e["data"]["by"] == "policy" && e["data"]["cline.policy_rule"] == rule)
            .cloned()
            .collect()
    }

    /// #35: an approval nobody answers is answered by the policy's `on_timeout` once its
    /// `timeout` passes (audited by the rule, `expires_at` on the request, the time left in
    /// `approvals`); one a person answered in time keeps the person's answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_approval_nobody_answers_is_answered_on_timeout_and_a_persons_answer_stands() {
        let (_model, cline, _) = setup();
        let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL").with_env("RUST_LOG", "info");
        let path = aep.root.path().join("policy.toml");
        std::fs::write(
            &path,
            "timeout = '5s'\non_timeout = 'approve'\n\n\
             [[rule]]\nname = 'cat-waits'\ncommand = 'cat *'\nanswer = 'ask'\ntimeout = '5s'\non_timeout = 'deny'\n",
        )
        .unwrap();
        let aep = aep.with_env("AEP_CLINE_POLICY", path.to_str().unwrap());
        let hub = RealHub::ensure(&cline);
        let daemon = aep.start();
        let client = HubClient::connect(&hub.discovery()).await;
        let session = client.create_session(&cline.workspace()).await;

        client.start_run(&session, "please CMD:cat Cargo.toml");
        let log = wait_log(&aep, &session, "the first approval", |l| {
            !of(l, "attention.requested").is_empty()
        });
        let request = of(&log, "attention.requested")[0].clone();
        assert_eq!(request["data"]["cline.policy_rule"], "cat-waits");
        assert_eq!(
            request["data"]["cline.policy_timeout"],
            json!({"after_s": 5, "answer": "deny", "rule": "cat-waits"})
        );
        assert!(request["data"]["expires_at"].is_string(), "{request}");
        let table = String::from_utf8(aep.run(&["approvals"], &[]).stdout).unwrap();
        assert!(table.contains("ask (cat-waits), deny in"), "{table}");
        let log = wait_log(&aep, &session, "the run's end after the timeout", |l| {
            !of(l, "run.finished").is_empty()
        });
        let answered = answered_by(&log, "cat-waits");
        assert_eq!(answered.len(), 1, "{:?}", types(&log));
        assert_eq!(answered[0]["data"]["answer"], json!({"option": "deny"}));
        let resolved = client.event(&session, "approval.resolved", 0).await;
        assert_eq!(resolved["payload"]["approved"], false);
        let reason = resolved["payload"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("nobody answered") && reason.contains("cat-waits"),
            "{resolved}"
        );
        assert_eq!(of(&log, "tool.failed")[0]["data"]["error"]["type"], "denied");

        // No rule: the file's default (approve after 5 s), but a person answers first.
        client.start_run(&session, "then CMD:ls -la");
        let log = wait_log(&aep, &session, "the second approval", |l| {
            of(l, "attention.requested").len() == 2
        });
        let second = of(&log, "attention.requested")[1].clone();
        assert_eq!(second["data"]["cline.policy_timeout"]["rule"], "timeout");
        hub_frames_handled(&client, &aep, &cline).await;
        post(
            &daemon,
            &command(
                "CMD-person-first",
                "control.attention.respond",
                &session,
                second["id"].as_str(),
                json!({"answer": {"option": "deny"}}),
            ),
        );
        wait_log(&aep, &session, "the second run's end", |l| {
            of(l, "run.finished").len() == 2
        });
        // Past its timeout: the person's answer is the only one.
        std::thread::sleep(Duration::from_secs(6));
        let log = aep.log(&session);
        let answers: Vec<&Value> = of(&log, "attention.answered")
            .into_iter()
            .filter(|e| e["subject"] == second["id"])
            .collect();
        assert_eq!(answers.len(), 1, "{:?}", types(&log));
        assert_eq!(answers[0]["cause"], "CMD-person-first");
        assert_valid_stream(&log);
        let (_, stderr) = daemon.stop();
        let stderr = plain(&stderr);
        assert!(stderr.contains("policy: answered on timeout"), "{stderr}");
        assert!(stderr.contains("policy: timeout not applied"), "{stderr}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn approve_and_deny_rules_answer_with_no_person_and_the_rest_waits() {
        let model = FakeModel::start(Script::default());
        let cline = ClineSandbox::new(&model);
        // The approve rule holds in this workspace only: the hooks tell the daemon where it is.
        let policy = format!(
            r#"
[[rule]]
name = "no-denied-runs"
tool = "run_commands"
command = "echo denied-*"
answer = "deny"
reason = "policy says no: use the staging box"

[[rule]]
name = "echo-here"
tool = "run_*"
command = "echo *"
workspace = "{}"
answer = "approve"

[[rule]]
name = "cat-asks"
command = "cat *"
answer = "ask"
"#,
            cline.workspace().display()
        );
        let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL").with_env("RUST_LOG", "info");
        let path = aep.root.path().join("policy.toml");
        std::fs::write(&path, policy).unwrap();
        let aep = aep.with_env("AEP_CLINE_POLICY", path.to_str().unwrap());
        let hub = RealHub::ensure(&cline);
        let daemon = aep.start();
        let client = HubClient::connect(&hub.discovery()).await;
        let session = client.create_session(&cline.workspace()).await;

        // Approved by policy: the real tool runs, nobody answered.
        client.start_run(&session, "please CMD:echo allowed-run");
        let log = wait_log(&aep, &session, "the approved run's end", |l| {
            !of(l, "run.finished").is_empty()
        });
        let request = of(&log, "attention.requested")[0].clone();
        assert_eq!(request["data"]["cline.policy_rule"], "echo-here");
        assert_eq!(request["data"]["cline.policy_answer"], "approve");
        let answered = answered_by(&log, "echo-here");
        assert_eq!(answered.len(), 1, "{:?}", types(&log));
        assert_eq!(
            answered[0]["data"],
            json!({"answer": {"option": "approve"}, "via": "control", "by": "policy", "cline.policy_rule": "echo-here"})
        );
        assert_eq!(
            caused_by(&log, "control.accepted", answered[0]["cause"].as_str().unwrap()).len(),
            1,
            "acked as any command"
        );
        assert_eq!(
            of(&log, "tool.completed").len(),
            1,
            "the approved tool ran: {:?}",
            types(&log)
        );
        assert!(
            !log.iter().any(|e| e.to_string().contains("allowed-run")),
            "no command at metadata"
        );

        // Denied by policy: Cline gets the rule's reason, the tool fails `denied`.
        client.start_run(&session, "now CMD:echo denied-run");
        let log = wait_log(&aep, &session, "the denied run's end", |l| {
            of(l, "run.finished").len() == 2
        });
        let answered = answered_by(&log, "no-denied-runs");
        assert_eq!(answered.len(), 1, "{:?}", types(&log));
        assert_eq!(answered[0]["data"]["answer"], json!({"option": "deny"}));
        let resolved = client.event(&session, "approval.resolved", 1).await;
        assert_eq!(resolved["payload"]["approved"], false);
        assert_eq!(resolved["payload"]["reason"], "policy says no: use the staging box");
        let failed = of(&log, "tool.failed");
        assert_eq!(failed.len(), 1, "{:?}", types(&log));
        assert_eq!(failed[0]["data"]["error"]["type"], "denied");
        assert_eq!(of(&log, "tool.completed").len(), 1, "the denied tool did not run");
        let by_policy = answered[0]["cause"].as_str().unwrap();
        assert_order(
            &log,
            &[
                ("control.accepted", Some(by_policy)),
                ("attention.answered", Some(by_policy)),
                ("tool.failed", None),
            ],
        );

        // No rule matches: the request waits for a person, as without a policy.
        client.start_run(&session, "then CMD:ls -la");
        let log = wait_log(&aep, &session, "the third approval", |l| {
            of(l, "attention.requested").len() == 3
        });
        let third = of(&log, "attention.requested")[2].clone();
        assert!(third["data"].get("cline.policy_rule").is_none(), "{third}");
        hub_frames_handled(&client, &aep, &cline).await;
        let out = aep.run(&["approvals", "--json"], &[]);
        let pending: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mine: Vec<&Value> = pending
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["session"] == session)
            .collect();
        assert_eq!(mine.len(), 1, "{pending}");
        assert_eq!(mine[0]["id"], third["id"]);
        assert!(mine[0].get("policy").is_none(), "{pending}");
        let log = aep.log(&session);
        assert_eq!(
            of(&log, "attention.answered").len(),
            2,
            "nobody answered the third: {:?}",
            types(&log)
        );
        post(
            &daemon,
            &command(
                "CMD-person",
                "control.attention.respond",
                &session,
                third["id"].as_str(),
                json!({"answer": {"option": "approve"}}),
            ),
        );
        let log = wait_log(&aep, &session, "the third run's end", |l| {
            of(l, "run.finished").len() == 3
        });
        let person = caused_by(&log, "attention.answered", "CMD-person");
        assert_eq!(
            person[0]["data"],
            json!({"answer": {"option": "approve"}, "via": "control"})
        );

        // An `ask` rule: a person answers, and `approvals` names the rule that asked.
        client.start_run(&session, "last CMD:cat Cargo.toml");
        let log = wait_log(&aep, &session, "the fourth approval", |l| {
            of(l, "attention.requested").len() == 4
        });
        let fourth = of(&log, "attention.requested")[3].clone();
        assert_eq!(fourth["data"]["cline.policy_rule"], "cat-asks");
        assert_eq!(fourth["data"]["cline.policy_answer"], "ask");
        let out = aep.run(&["approvals", "--json"], &[]);
        let pending: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mine: Vec<&Value> = pending
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["session"] == session)
            .collect();
        assert_eq!(
            mine[0]["policy"],
            json!({"rule": "cat-asks", "answer": "ask"}),
            "{pending}"
        );
        let table = String::from_utf8(aep.run(&["approvals"], &[]).stdout).unwrap();
        assert!(table.contains("POLICY") && table.contains("ask (cat-asks)"), "{table}");
        assert_valid_stream(&aep.log(&session));

        // Every decision is in the daemon's log with its rule.
        let token = serde_json::from_slice::<Value>(&std::fs::read(hub.discovery()).unwrap()).unwrap()["authToken"]
            .as_str()
            .unwrap()
            .to_string();
        let (_, stderr) = daemon.stop();
        let stderr = plain(&stderr);
        assert!(!stderr.contains(&token));
        let decided = |rule: &str, answer: &str| {
            stderr.lines().any(|l| {
                l.contains("policy: decided")
                    && l.contains(&format!("rule={rule}"))
                    && l.contains(&format!("answer={answer}"))
            })
        };
        assert!(decided("echo-here", "approve"), "{stderr}");
        assert!(decided("no-denied-runs", "deny"), "{stderr}");
        assert!(decided("cat-asks", "ask"), "{stderr}");
        assert!(stderr.contains("policy: no rule matched"), "{stderr}");
        assert!(!stderr.contains("allowed-run"), "no command in the log");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rewritten_policy_applies_to_the_next_request_and_a_bad_one_keeps_the_last_good() {
        let (_model, cline, aep, path) =
            setup_with("[[rule]]\nname = \"v1-approve\"\ncommand = 'echo *'\nanswer = \"approve\"\n");
        let hub = RealHub::ensure(&cline);
        let daemon = aep.start();
        let first = wait_policy(&daemon, "the policy at start", |p| p["rules"] == 1);
        assert!(first["last_error"].is_null(), "{first}");
        let client = HubClient::connect(&hub.discovery()).await;
        let session = client.create_session(&cline.workspace()).await;

        // Rewritten while the daemon runs: the next request is decided by the new rules.
        std::fs::write(
            &path,
            "[[rule]]\nname = \"v2-deny-two\"\ncommand = 'echo two'\nanswer = \"deny\"\nreason = \"v2 says no\"\n\n\
             [[rule]]\nname = \"v2-approve\"\ncommand = 'echo *'\nanswer = \"approve\"\n",
        )
        .unwrap();
        wait_policy(&daemon, "the rewritten policy", |p| p["rules"] == 2);
        client.start_run(&session, "please CMD:echo two");
        let log = wait_log(&aep, &session, "the denied run's end", |l| {
            !of(l, "run.finished").is_empty()
        });
        assert_eq!(answered_by(&log, "v2-deny-two").len(), 1, "{:?}", types(&log));
        let resolved = client.event(&session, "approval.resolved", 0).await;
        assert_eq!(resolved["payload"]["reason"], "v2 says no");

        // A bad file: the last good policy stays, and the log, /healthz and doctor say why.
        std::fs::write(
            &path,
            "[[rule]]\nname = \"v3\"\ncommand_regex = '(unclosed'\nanswer = \"deny\"\n",
        )
        .unwrap();
        let bad = wait_policy(&daemon, "the bad file's error", |p| p["last_error"].is_string());
        let error = bad["last_error"].as_str().unwrap();
        assert!(error.contains("line 1") && error.contains("is not a regex"), "{error}");
        assert_eq!(bad["rules"], 2);
        let doctor = aep.run(&["doctor"], &[]);
        let said = String::from_utf8_lossy(&doctor.stdout);
        assert!(
            said.contains("2 rule(s)")
                && said.contains("the last good policy stays active")
                && said.contains("is not a regex"),
            "{said}"
        );
        client.start_run(&session, "again CMD:echo three");
        let log = wait_log(&aep, &session, "the approved run's end", |l| {
            of(l, "run.finished").len() == 2
        });
        assert_eq!(
            answered_by(&log, "v2-approve").len(),
            1,
            "the last good policy answered: {:?}",
            types(&log)
        );
        assert_eq!(of(&log, "tool.completed").len(), 1);
        assert_valid_stream(&log);

        let stderr = plain(&daemon.stop().1);
        assert!(stderr.contains("policy reloaded"), "{stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("policy file not used") && l.contains("is not a regex")),
            "{stderr}"
        );
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("policy: decided") && l.contains("rule=v2-approve")),
            "{stderr}"
        );
    }

    #[test]
    fn a_missing_policy_file_stops_the_start_and_says_what_to_do() {
        let out = Sandbox::new().run(
            &["daemon"],
            &[
                ("AEP_LISTEN", "127.0.0.1:0"),
                ("AEP_CLINE_POLICY", "/nonexistent/policy.toml"),
            ],
        );
        assert!(!out.status.success());
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("AEP_CLINE_POLICY") && said.contains("does not exist") && said.contains("create it"),
            "{said}"
        );
    }
}
