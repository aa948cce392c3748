//! The hub tap and the intake against a stub hub replaying real hub frames, in process (moved
//! out of `src/`: it uses only the tap's public face): the session
//! lane, the intake, the client and the ack guard, with every fault the issue names. Hooks are
//! the real Cline 3.0.65 payloads of a run (`cline-hooks/tests/data/hooks-cancel`), so the hub
//! frames are rewritten to that run's session, agent and tool call.

use crate::support::stub_hub;
use aep_cline::control::Intake;
use aep_cline::hub::settings::{Settings, Source};
use aep_cline::lane::{Bus, Journal, Note, Published, Sessions};
use aep_core::redact::{RedactOptions, Redactor};
use aep_core::types::{
    ATTENTION_ANSWERED, ATTENTION_REQUESTED, ATTENTION_RESOLVED, CONTROL_ACCEPTED, CONTROL_ATTENTION_RESPOND,
    CONTROL_CANCEL, CONTROL_PAUSE, CONTROL_REJECTED, RUN_CANCELLED, RUN_STARTED, SESSION_ENDED, SESSION_STARTED,
    TOOL_COMPLETED, TOOL_FAILED, TOOL_REQUESTED,
};
use aep_core::validate::StreamValidator;
use aep_core::{Capture, CapturePolicy};
use cline_hub::discovery::Endpoint;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use stub_hub::{real_frame, Register, StubHub};
use tokio::sync::broadcast;

const SESSION: &str = "1796007217803_dxv4z";
const AGENT: &str = "agent_1796007217889_ld7hfc";
const CALL: &str = "call_4908f8b395";
const TOKEN: &str = "stub-token-0123456789";

fn hook(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../cline-hooks/tests/data/hooks-cancel/{name}-global.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).expect("a real hook payload")
}

/// The real `tool_result` of `run` (`hooks-denied`: the approval was refused; `hooks-local`: the
/// tool ran) moved to this run's session, agent and gated tool call: an answer's effect.
fn tool_result(run: &str) -> Vec<u8> {
    let path = format!(
        "{}/../cline-hooks/tests/data/{run}/tool_result-global.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut p: Value = serde_json::from_slice(&std::fs::read(path).expect("a real hook payload")).unwrap();
    p["sessionContext"]["rootSessionId"] = json!(SESSION);
    p["taskId"] = json!("conv_1796007217933_4tex136");
    p["agent_id"] = json!(AGENT);
    p["tool_result"]["id"] = json!(CALL);
    p["timestamp"] = json!("2026-11-30T02:53:38.400Z");
    serde_json::to_vec(&p).unwrap()
}

/// A real hub frame moved to this run's session, agent and tool call.
fn frame(name: &str) -> String {
    let mut f = real_frame(name);
    let env = &mut f["envelope"];
    env["sessionId"] = json!(SESSION);
    if env["event"] == "approval.requested" {
        env["payload"]["sessionId"] = json!(SESSION);
        env["payload"]["agentId"] = json!(AGENT);
        env["payload"]["toolCallId"] = json!(CALL);
    }
    f.to_string()
}

fn approval_id(name: &str) -> String {
    real_frame(name)["envelope"]["payload"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string()
}

struct Rig {
    _dir: tempfile::TempDir,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    hub: StubHub,
    bus: broadcast::Receiver<Note>,
    task: tokio::task::JoinHandle<()>,
    next_command: u64,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Options {
    control: bool,
    token: &'static str,
    guard: Duration,
    capture: Capture,
    /// `AEP_CLINE_POLICY`'s rules, written to a file of the rig's.
    policy: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            control: true,
            token: TOKEN,
            guard: Duration::from_secs(8),
            capture: Capture::Metadata,
            policy: None,
        }
    }
}

/// An approval answered through the intake ([`Rig::answer`]).
struct Answered {
    /// The AEP command the person sent.
    respond: Value,
    /// What the tap sent the hub.
    sent: Value,
}

impl Rig {
    async fn start(options: Options) -> Rig {
        let hub = StubHub::start(TOKEN).await;
        let dir = tempfile::tempdir().unwrap();
        let sessions = Arc::new(Sessions::new(
            Journal::new(dir.path()),
            "host".into(),
            CapturePolicy::new(options.capture),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        ));
        let bus = sessions.bus().subscribe();
        let settings = Settings {
            control: options.control,
            source: Source::Direct(Endpoint::direct(&hub.url, options.token).unwrap()),
            ack_guard: options.guard,
            reconnect: Duration::from_millis(50),
            handshake: Duration::from_millis(500),
            notify: None,
            policy: options.policy.map(|rules| {
                let file = dir.path().join("policy.toml");
                std::fs::write(&file, rules).unwrap();
                aep_cline::policy::Active::load(&file).unwrap()
            }),
        };
        let (link, requests) = aep_cline::control::link();
        let intake = Arc::new(Intake::new(sessions.clone(), options.control.then_some(link)));
        let requests = Arc::new(tokio::sync::Mutex::new(requests));
        let task = tokio::spawn(aep_cline::hub::run(
            settings,
            sessions.clone(),
            intake.clone(),
            requests,
            Default::default(),
            aep_cline::budget::Watch::new(Default::default(), None, None),
        ));
        Rig {
            _dir: dir,
            sessions,
            intake,
            hub,
            bus,
            task,
            next_command: 0,
        }
    }

    /// Started, registered and subscribed (the tap marks itself connected before it
    /// subscribes), with the run's start and tool call hooked.
    async fn connected(options: Options) -> Rig {
        let mut rig = Rig::start(options).await;
        rig.hub.subscribed().await;
        rig.hook("agent_start");
        rig.hook("tool_call");
        rig.drain();
        rig
    }

    fn hook(&self, name: &str) -> Vec<Value> {
        self.ingest(&hook(name))
    }

    fn ingest(&self, body: &[u8]) -> Vec<Value> {
        match self
            .sessions
            .ingest_hook(body, &aep_cline::firing::Firing::default())
            .unwrap()
        {
            aep_cline::lane::Ingested::Appended { events, .. } => events.iter().map(|e| e.value.clone()).collect(),
            other => panic!("{other:?}"),
        }
    }

    fn drain(&mut self) {
        while self.bus.try_recv().is_ok() {}
    }

    /// The next Event published (panics after 10 s).
    async fn next(&mut self) -> Arc<Published> {
        loop {
            let note = tokio::time::timeout(Duration::from_secs(10), self.bus.recv())
                .await
                .expect("no Event within 10 s")
                .expect("the bus");
            if let Note::Event(event) = note {
                return event;
            }
        }
    }

    /// The next Event of type `ty`, skipping others.
    async fn next_of(&mut self, ty: &str) -> Value {
        loop {
            let e = self.next().await;
            if e.value["type"] == ty {
                return e.value.clone();
            }
        }
    }

    /// Waits until the tap has mirrored the approval and returns the request Event.
    async fn request(&mut self, name: &str) -> Value {
        self.hub.send(&frame(name));
        self.next_of(ATTENTION_REQUESTED).await
    }

    fn command(&mut self, ty: &str, subject: Option<&str>, data: Value) -> Value {
        self.next_command += 1;
        let mut c = json!({"aep": "0.1", "id": format!("CMD{}", self.next_command), "type": ty,
            "time": "2026-11-30T00:00:00Z", "source": "aep://ops/agent/console", "agent": "console",
            "session": SESSION, "data": data});
        if let Some(s) = subject {
            c["subject"] = json!(s);
        }
        c
    }

    fn submit(&self, command: &Value) {
        self.intake.submit(command).expect("taken");
    }

    /// The hub asks (`frame`), the tap mirrors it, a person answers `option` through the
    /// intake, and the tap sends the hub its `approval.respond`.
    async fn answer(&mut self, frame: &str, option: &str) -> Answered {
        let requested = self.request(frame).await;
        let respond = self.command(
            CONTROL_ATTENTION_RESPOND,
            requested["id"].as_str(),
            json!({"answer": {"option": option}}),
        );
        self.submit(&respond);
        let sent = self.hub.command("approval.respond").await;
        Answered { respond, sent }
    }

    fn log(&self) -> Vec<Value> {
        let path = self.sessions.journal().path(SESSION);
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn assert_valid_log(&self) {
        let mut v = StreamValidator::new();
        for e in self.log() {
            v.push(&e).unwrap_or_else(|err| panic!("{err}: {e}"));
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn an_approval_is_mirrored_on_the_hooks_session_and_answered_through_the_intake() {
    let mut rig = Rig::connected(Options::default()).await;
    let requested = rig.request("approval.requested.approve").await;
    assert_eq!(requested["session"], SESSION);
    assert_eq!(requested["subject"], "run_commands");
    assert_eq!(requested["data"]["respond_via"], json!(["control", "oob"]));
    assert_eq!(requested["data"]["prompt"], "cline requests permission: run_commands");
    let log = rig.log();
    assert_eq!(requested["run"], log[1]["run"], "in the run the hooks opened");
    assert_eq!(requested["cause"], log[2]["id"], "caused by the tool call it gates");

    let respond = rig.command(
        CONTROL_ATTENTION_RESPOND,
        requested["id"].as_str(),
        json!({"answer": {"option": "approve"}}),
    );
    rig.submit(&respond);
    let sent = rig.hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["sessionId"], SESSION);
    assert_eq!(
        sent["envelope"]["payload"],
        json!({"approvalId": approval_id("approval.requested.approve"), "approved": true})
    );
    // The real order: the broadcast resolution, then the reply.
    rig.hub.send(&frame("approval.resolved.approved"));
    rig.hub.reply(&sent, None);
    let accepted = rig.next().await;
    assert_eq!(accepted.value["type"], CONTROL_ACCEPTED);
    assert_eq!(accepted.value["cause"], respond["id"]);
    let answered = rig.next().await.value.clone();
    assert_eq!(answered["type"], ATTENTION_ANSWERED);
    assert_eq!(
        answered["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    assert_eq!(answered["cause"], respond["id"]);
    assert_eq!(answered["subject"], requested["id"]);
    let resolved = rig.next().await.value.clone();
    assert_eq!(resolved["type"], ATTENTION_RESOLVED);
    assert_eq!(resolved["data"], json!({"resolution": "answered", "latency_ms": 14}));

    // Redelivered: the recorded ack again, byte for byte, and nothing sent to the hub.
    rig.submit(&respond);
    let again = rig.next().await;
    assert_eq!(again.line, accepted.line);
    let input = rig.command(
        "x.cline.control.send_input",
        None,
        json!({"text": "next, run the tests"}),
    );
    rig.submit(&input);
    let next = rig.hub.next_where(|f| f["kind"] == "command").await;
    assert_eq!(
        next["envelope"]["command"], "session.send_input",
        "the respond was not sent twice"
    );
    assert_eq!(
        rig.log().iter().filter(|e| e["type"] == CONTROL_ACCEPTED).count(),
        1,
        "a re-emitted ack is not logged twice"
    );
    rig.assert_valid_log();
}

#[tokio::test]
async fn a_text_answer_that_names_no_option_denies_with_the_text_as_reason() {
    let mut rig = Rig::connected(Options {
        capture: Capture::Redacted,
        ..Options::default()
    })
    .await;
    let requested = rig.request("approval.requested.deny").await;
    let respond = rig.command(
        CONTROL_ATTENTION_RESPOND,
        requested["id"].as_str(),
        json!({"answer": {"text": "use the staging registry"}}),
    );
    rig.submit(&respond);
    let sent = rig.hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["payload"]["approved"], false);
    assert_eq!(sent["envelope"]["payload"]["reason"], "use the staging registry");
    rig.hub.reply(&sent, None);
    assert_eq!(rig.next_of(CONTROL_ACCEPTED).await["cause"], respond["id"]);
    let mut resolved = real_frame("approval.resolved.denied");
    resolved["envelope"]["sessionId"] = json!(SESSION);
    resolved["envelope"]["payload"]["reason"] = json!("use the staging registry");
    rig.hub.send(&resolved.to_string());
    let answered = rig.next_of(ATTENTION_ANSWERED).await;
    assert_eq!(
        answered["data"],
        json!({"answer": {"option": "deny", "text": "use the staging registry"}, "via": "control"})
    );
    rig.assert_valid_log();
}

#[tokio::test]
async fn a_denys_answer_is_written_with_its_ack_so_no_effect_comes_between() {
    let mut rig = Rig::connected(Options::default()).await;
    let Answered { respond, sent } = rig.answer("approval.requested.deny", "deny").await;
    // As on the real hub: the resolution is broadcast before the reply to the responder.
    let mut resolved = real_frame("approval.resolved.denied");
    resolved["envelope"]["sessionId"] = json!(SESSION);
    rig.hub.send(&resolved.to_string());
    rig.hub.reply(&sent, None);
    let (ack, answered, done) = (rig.next().await, rig.next().await, rig.next().await);
    let (ack, answered, done) = (&ack.value, &answered.value, &done.value);
    assert_eq!(
        [&ack["type"], &answered["type"], &done["type"]],
        [CONTROL_ACCEPTED, ATTENTION_ANSWERED, ATTENTION_RESOLVED]
    );
    let seq = |e: &Value| e["seq"].as_u64().unwrap();
    assert_eq!(
        (seq(answered), seq(done)),
        (seq(ack) + 1, seq(ack) + 2),
        "one write: a hook's tool.failed {{denied}} lands before the answer or after its resolution"
    );
    assert_eq!(answered["cause"], respond["id"]);
    rig.assert_valid_log();
}

/// Every Event of the log is written once: no two share an id, and each command has one ack.
fn assert_once(log: &[Value]) {
    let ids: std::collections::HashSet<&str> = log.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), log.len(), "an Event written twice: {:?}", types(log));
    let acks = |cause: &Value| {
        log.iter()
            .filter(|e| e["type"].as_str().unwrap().starts_with("control.") && e["cause"] == *cause)
            .count()
    };
    for ack in log
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("control."))
    {
        assert_eq!(
            acks(&ack["cause"]),
            1,
            "two acks for {}: {:?}",
            ack["cause"],
            types(log)
        );
    }
}

/// The hub has handled everything sent so far once a request sent now (a new one) is mirrored.
async fn hub_caught_up(rig: &mut Rig) {
    rig.drain();
    let mut marker: Value = serde_json::from_str(&frame("approval.requested.pending")).unwrap();
    marker["envelope"]["payload"]["approvalId"] = json!(format!("approval_marker_{}", aep_core::id::new_id()));
    rig.hub.send(&marker.to_string());
    rig.next_of(ATTENTION_REQUESTED).await;
}

#[tokio::test]
async fn a_deny_whose_effect_reaches_the_daemon_before_the_hub_s_reply_is_logged_answer_first() {
    let mut rig = Rig::connected(Options::default()).await;
    let Answered { respond, sent } = rig.answer("approval.requested.deny", "deny").await;
    // The hook that reports the refused tool comes first; the hub's frames come late.
    let written = rig.ingest(&tool_result("hooks-denied"));
    assert_eq!(
        types(&written),
        [CONTROL_ACCEPTED, ATTENTION_ANSWERED, ATTENTION_RESOLVED, TOOL_FAILED],
        "the effect proves the hub took the answer: it is written first, in the effect's write"
    );
    assert_eq!(written[0]["cause"], respond["id"]);
    assert_eq!(written[1]["cause"], respond["id"]);
    assert_eq!(
        written[1]["data"],
        json!({"answer": {"option": "deny"}, "via": "control"})
    );
    assert_eq!(written[2]["cause"], written[1]["id"]);
    assert_eq!(written[3]["data"]["error"]["type"], "denied");
    rig.hub.send(&frame("approval.resolved.denied"));
    rig.hub.reply(&sent, None);
    hub_caught_up(&mut rig).await;
    // The reply finds the command decided and the request resolved: nothing more.
    let log = rig.log();
    assert_eq!(
        types(&log),
        [
            SESSION_STARTED,
            RUN_STARTED,
            TOOL_REQUESTED,
            ATTENTION_REQUESTED,
            CONTROL_ACCEPTED,
            ATTENTION_ANSWERED,
            ATTENTION_RESOLVED,
            TOOL_FAILED,
            ATTENTION_REQUESTED
        ]
    );
    assert_once(&log);
    // Redelivered: the ack the effect wrote is the recorded one, byte for byte.
    rig.drain();
    rig.submit(&respond);
    assert_eq!(rig.next().await.value, written[0]);
    rig.assert_valid_log();
}

#[tokio::test]
async fn an_approve_whose_tool_result_comes_first_and_a_resolution_held_before_it_are_answer_first() {
    let mut rig = Rig::connected(Options::default()).await;
    let Answered { respond: _, sent } = rig.answer("approval.requested.approve", "approve").await;
    // The broadcast resolution is handled (held, the reply outstanding), then the tool's result.
    rig.hub.send(&frame("approval.resolved.approved"));
    hub_caught_up(&mut rig).await;
    let written = rig.ingest(&tool_result("hooks-local"));
    assert_eq!(
        types(&written),
        [CONTROL_ACCEPTED, ATTENTION_ANSWERED, ATTENTION_RESOLVED, TOOL_COMPLETED]
    );
    assert_eq!(
        written[1]["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    // The reply, even an error, decides nothing more: the effect showed this answer applied.
    rig.hub.reply(&sent, Some("approval_not_found"));
    hub_caught_up(&mut rig).await;
    let log = rig.log();
    assert!(!types(&log).contains(&CONTROL_REJECTED), "{:?}", types(&log));
    assert_eq!(log.iter().filter(|e| e["type"] == ATTENTION_ANSWERED).count(), 1);
    assert_once(&log);
    rig.assert_valid_log();
}

#[tokio::test]
async fn a_policy_s_deny_whose_effect_comes_before_the_hub_s_reply_is_logged_answer_first() {
    let mut rig = Rig::connected(Options {
        policy: Some("[[rule]]\nname = 'no-commands'\ntool = 'run_commands'\nanswer = 'deny'\n"),
        ..Options::default()
    })
    .await;
    rig.hub.send(&frame("approval.requested.deny"));
    let sent = rig.hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["payload"]["approved"], false);
    let written = rig.ingest(&tool_result("hooks-denied"));
    assert_eq!(
        types(&written),
        [CONTROL_ACCEPTED, ATTENTION_ANSWERED, ATTENTION_RESOLVED, TOOL_FAILED]
    );
    assert_eq!(written[1]["data"]["cline.policy_rule"], "no-commands");
    assert_eq!(written[0]["cause"], written[1]["cause"], "the policy's command");
    rig.hub.send(&frame("approval.resolved.denied"));
    rig.hub.reply(&sent, None);
    hub_caught_up(&mut rig).await;
    assert_once(&rig.log());
    rig.assert_valid_log();
}

#[tokio::test]
async fn an_answer_the_guard_accepted_is_answered_before_its_effect_with_no_second_ack() {
    let mut rig = Rig::connected(Options {
        guard: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let Answered { respond, sent } = rig.answer("approval.requested.deny", "deny").await;
    assert_eq!(rig.next_of(CONTROL_ACCEPTED).await["cause"], respond["id"]);
    let written = rig.ingest(&tool_result("hooks-denied"));
    assert_eq!(types(&written), [ATTENTION_ANSWERED, ATTENTION_RESOLVED, TOOL_FAILED]);
    rig.hub.send(&frame("approval.resolved.denied"));
    rig.hub.reply(&sent, None);
    hub_caught_up(&mut rig).await;
    let log = rig.log();
    assert_eq!(log.iter().filter(|e| e["type"] == ATTENTION_ANSWERED).count(), 1);
    assert_once(&log);
    rig.assert_valid_log();
}

#[tokio::test]
async fn an_effect_that_contradicts_the_answer_in_flight_waits_for_the_hub_to_say_whose_it_was() {
    let mut rig = Rig::connected(Options::default()).await;
    let Answered { respond, sent } = rig.answer("approval.requested.approve", "deny").await;
    // The tool ran: someone else approved it; which answer won, the hub has not said yet.
    assert_eq!(types(&rig.ingest(&tool_result("hooks-local"))), [TOOL_COMPLETED]);
    rig.hub.send(&frame("approval.resolved.approved"));
    rig.hub.reply(&sent, Some("approval_not_found"));
    let nack = rig.next_of(CONTROL_REJECTED).await;
    assert_eq!(nack["cause"], respond["id"]);
    let answered = rig.next_of(ATTENTION_ANSWERED).await;
    assert_eq!(answered["data"], json!({"answer": {"option": "approve"}, "via": "oob"}));
    assert_once(&rig.log());
}

#[tokio::test]
async fn a_held_resolution_that_is_not_ours_is_written_out_of_band_before_the_effect() {
    let mut rig = Rig::connected(Options::default()).await;
    let Answered { respond, sent } = rig.answer("approval.requested.approve", "deny").await;
    rig.hub.send(&frame("approval.resolved.approved"));
    hub_caught_up(&mut rig).await;
    let written = rig.ingest(&tool_result("hooks-local"));
    assert_eq!(
        types(&written),
        [ATTENTION_ANSWERED, ATTENTION_RESOLVED, TOOL_COMPLETED]
    );
    assert_eq!(
        written[0]["data"],
        json!({"answer": {"option": "approve"}, "via": "oob"})
    );
    rig.hub.reply(&sent, Some("approval_not_found"));
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["cause"], respond["id"]);
    assert_once(&rig.log());
    rig.assert_valid_log();
}

#[tokio::test]
async fn an_out_of_band_answer_is_mirrored_and_a_late_respond_is_refused() {
    let mut rig = Rig::connected(Options::default()).await;
    let requested = rig.request("approval.requested.deny").await;
    rig.hub.send(&frame("approval.resolved.denied"));
    let answered = rig.next_of(ATTENTION_ANSWERED).await;
    assert_eq!(answered["data"], json!({"answer": {"option": "deny"}, "via": "oob"}));
    assert_eq!(answered["cause"], requested["id"]);
    assert_eq!(rig.next_of(ATTENTION_RESOLVED).await["data"]["resolution"], "answered");
    // Answering what is no longer pending is refused by this daemon, without the hub.
    let late = rig.command(
        CONTROL_ATTENTION_RESPOND,
        requested["id"].as_str(),
        json!({"answer": {"option": "approve"}}),
    );
    rig.submit(&late);
    let nack = rig.next_of(CONTROL_REJECTED).await;
    assert_eq!(nack["data"]["reason"], "refused");
    assert_eq!(nack["cause"], late["id"]);
    rig.assert_valid_log();
}

#[tokio::test]
async fn a_respond_racing_an_out_of_band_answer_is_refused_and_the_winner_recorded() {
    let mut rig = Rig::connected(Options::default()).await;
    let Answered { respond: _, sent } = rig.answer("approval.requested.approve", "deny").await;
    // Another client approved first: its resolution, then our respond is not found.
    rig.hub.send(&frame("approval.resolved.approved"));
    rig.hub.reply(&sent, Some("approval_not_found"));
    let nack = rig.next().await.value.clone();
    assert_eq!(nack["type"], CONTROL_REJECTED);
    assert_eq!(nack["data"]["reason"], "refused");
    let answered = rig.next().await.value.clone();
    assert_eq!(answered["data"], json!({"answer": {"option": "approve"}, "via": "oob"}));
    rig.assert_valid_log();
}

#[tokio::test]
async fn cancel_closes_the_run_once_when_the_hooks_report_first() {
    let mut rig = Rig::connected(Options::default()).await;
    rig.sessions.hosted_by_hub(SESSION);
    let cancel = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&cancel);
    let sent = rig.hub.command("run.abort").await;
    assert_eq!(sent["envelope"]["payload"]["sessionId"], SESSION);
    rig.hub.reply(&sent, None);
    assert_eq!(rig.next_of(CONTROL_ACCEPTED).await["cause"], cancel["id"]);
    // Real Cline 3.0.65: the abort fires session_shutdown, then the hub's run.aborted.
    // The hub hosts the session: its session_shutdown closes the run, not the session.
    let ended = rig.hook("session_shutdown");
    assert_eq!(types(&ended), [RUN_CANCELLED]);
    assert_eq!(ended[0]["data"]["by"], "control");
    assert_eq!(ended[0]["cause"], cancel["id"]);
    rig.drain();
    rig.hub.send(&frame("run.aborted.running"));
    // Nothing more: a later event is the next thing on the bus.
    rig.hub.send(&frame("approval.requested.pending"));
    assert_eq!(rig.next().await.value["type"], ATTENTION_REQUESTED);
    let cancelled = rig.log().iter().filter(|e| e["type"] == RUN_CANCELLED).count();
    assert_eq!(cancelled, 1);
}

#[tokio::test]
async fn cancel_closes_the_run_once_when_the_hub_reports_first() {
    let mut rig = Rig::connected(Options::default()).await;
    rig.sessions.hosted_by_hub(SESSION);
    let cancel = rig.command(CONTROL_CANCEL, None, json!({"scope": "run", "reason": "stuck"}));
    rig.submit(&cancel);
    let sent = rig.hub.command("run.abort").await;
    assert_eq!(sent["envelope"]["payload"]["reason"], "stuck");
    rig.hub.reply(&sent, None);
    rig.hub.send(&frame("run.aborted.running"));
    let cancelled = rig.next_of(RUN_CANCELLED).await;
    assert_eq!(cancelled["data"]["by"], "control");
    assert_eq!(cancelled["cause"], cancel["id"]);
    assert_eq!(cancelled["run"], rig.log()[1]["run"]);
    // The hub hosts the session: its session_shutdown closes runs (none is open), not the session.
    assert!(rig.hook("session_shutdown").is_empty());
    rig.assert_valid_log();
}

#[tokio::test]
async fn cancel_with_an_approval_pending_dismisses_it_and_cancels_the_run() {
    let mut rig = Rig::connected(Options::default()).await;
    rig.sessions.hosted_by_hub(SESSION);
    let requested = rig.request("approval.requested.pending").await;
    let cancel = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&cancel);
    let sent = rig.hub.command("run.abort").await;
    // The answer is in the log before the hub can act on the command.
    assert_eq!(rig.next_of(CONTROL_ACCEPTED).await["cause"], cancel["id"]);
    // The hub's frames come before its reply, as on the real hub.
    rig.hub.send(&frame("approval.resolved.cancelled"));
    rig.hub.reply(&sent, None);
    rig.hub.send(&frame("run.aborted.pending"));
    let dismissed = rig.next_of(ATTENTION_RESOLVED).await;
    assert_eq!(dismissed["subject"], requested["id"]);
    assert_eq!(dismissed["data"]["resolution"], "dismissed");
    let cancelled = rig.next_of(RUN_CANCELLED).await;
    assert_eq!(
        (cancelled["data"]["by"].clone(), cancelled["cause"].clone()),
        (json!("control"), cancel["id"].clone())
    );
    rig.hook("session_shutdown");
    assert_eq!(
        types(&rig.log()),
        [
            SESSION_STARTED,
            RUN_STARTED,
            TOOL_REQUESTED,
            ATTENTION_REQUESTED,
            CONTROL_ACCEPTED,
            ATTENTION_RESOLVED,
            RUN_CANCELLED
        ],
        "the answer before its effects"
    );
    rig.assert_valid_log();
}

#[tokio::test]
async fn cancel_with_an_approval_pending_is_logged_before_its_effects_when_the_hooks_come_first() {
    let mut rig = Rig::connected(Options::default()).await;
    // The hub's session frames tell the tap it hosts the session (its shutdown hook ends runs).
    rig.sessions.hosted_by_hub(SESSION);
    let requested = rig.request("approval.requested.pending").await;
    let cancel = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&cancel);
    let sent = rig.hub.command("run.abort").await;
    // The abort's hooks reach the daemon before any of the hub's frames: the refused tool, then
    // the run's shutdown.
    let mut aborted: Value = serde_json::from_slice(&tool_result("hooks-denied")).unwrap();
    aborted["tool_result"]["output"] =
        json!({"error": "abort during approval -- NOT a tool or system failure. Clarify with user before proceeding."});
    let effects = [
        rig.ingest(&serde_json::to_vec(&aborted).unwrap()),
        rig.hook("session_shutdown"),
    ]
    .concat();
    rig.hub.send(&frame("approval.resolved.cancelled"));
    rig.hub.reply(&sent, None);
    rig.hub.send(&frame("run.aborted.pending"));
    hub_caught_up(&mut rig).await;
    let log = rig.log();
    assert_eq!(
        types(&log),
        [
            SESSION_STARTED,
            RUN_STARTED,
            TOOL_REQUESTED,
            ATTENTION_REQUESTED,
            CONTROL_ACCEPTED,
            ATTENTION_RESOLVED,
            TOOL_FAILED,
            RUN_CANCELLED,
            ATTENTION_REQUESTED
        ],
        "the answer, then the dismissal, before the tool and the run it ended: {effects:?}"
    );
    let dismissed = log.iter().find(|e| e["type"] == ATTENTION_RESOLVED).unwrap();
    assert_eq!(
        (&dismissed["subject"], &dismissed["data"]["resolution"]),
        (&requested["id"], &json!("dismissed"))
    );
    let cancelled = log.iter().find(|e| e["type"] == RUN_CANCELLED).unwrap();
    assert_eq!(
        (&cancelled["cause"], &cancelled["data"]["by"]),
        (&cancel["id"], &json!("control"))
    );
    assert_once(&log);
    rig.assert_valid_log();
}

#[tokio::test]
async fn a_session_that_ends_with_a_request_pending_dismisses_it_first() {
    let mut rig = Rig::connected(Options::default()).await;
    let requested = rig.request("approval.requested.approve").await;
    // A restarted daemon: it knows the pending request from the log, not that the hub hosts the
    // session, so the shutdown hook ends the session, the request dismissed first.
    let restarted = Sessions::new(
        Journal::new(rig._dir.path()),
        "host".into(),
        CapturePolicy::new(Capture::Metadata),
        Redactor::new(RedactOptions::default()).unwrap(),
        Bus::default(),
    );
    let ended = match restarted
        .ingest_hook(&hook("session_shutdown"), &aep_cline::firing::Firing::default())
        .unwrap()
    {
        aep_cline::lane::Ingested::Appended { events, .. } => {
            events.iter().map(|e| e.value.clone()).collect::<Vec<_>>()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(types(&ended), [ATTENTION_RESOLVED, RUN_CANCELLED, SESSION_ENDED]);
    assert_eq!(ended[0]["subject"], requested["id"]);
    assert_eq!(ended[0]["data"]["resolution"], "dismissed");
    assert_eq!(ended[1]["data"]["by"], "shutdown");
    rig.assert_valid_log();
}

#[tokio::test]
async fn cancel_refuses_other_targets_sessions_outside_the_hub_and_sessions_without_an_active_run() {
    let mut rig = Rig::connected(Options::default()).await;
    // A session no hub frame has named runs in its own process: the hub's `run.abort` would be
    // answered ok and change nothing, so it is refused here, in words, and never sent.
    let outside = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&outside);
    let nack = rig.next_of(CONTROL_REJECTED).await;
    assert_eq!(nack["data"]["reason"], "refused");
    // The log keeps no free text at `metadata`; the daemon's words are kept for the sender.
    assert!(nack["data"]["detail"].is_null(), "{nack}");
    let why = rig.intake.refusal(outside["id"].as_str().unwrap()).unwrap();
    assert!(why.contains("does not run in Cline's hub"), "{why}");
    rig.sessions.hosted_by_hub(SESSION);
    let other_run = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    let mut other_run = other_run;
    other_run["run"] = json!("01NOTTHEACTIVERUN000000000");
    rig.submit(&other_run);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "refused");
    // It did not reach the hub: the next command it sees is this one.
    let input = rig.command("x.cline.control.send_input", None, json!({"text": "hello"}));
    rig.submit(&input);
    assert_eq!(
        rig.hub.next_where(|f| f["kind"] == "command").await["envelope"]["command"],
        "session.send_input"
    );
    rig.hook("session_shutdown");
    rig.drain();
    let idle = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&idle);
    let nack = rig.next_of(CONTROL_REJECTED).await;
    assert_eq!(nack["data"]["reason"], "refused", "no active run");
}

#[tokio::test]
async fn send_input_is_queued_and_reported_sent_without_its_text() {
    let mut rig = Rig::connected(Options::default()).await;
    let input = rig.command(
        "x.cline.control.send_input",
        None,
        json!({"text": "also run the linter", "delivery": "steer"}),
    );
    rig.submit(&input);
    let sent = rig.hub.command("session.send_input").await;
    assert_eq!(
        sent["envelope"]["payload"],
        json!({"prompt": "also run the linter", "delivery": "steer"})
    );
    rig.hub.reply(&sent, None);
    assert_eq!(rig.next().await.value["type"], CONTROL_ACCEPTED);
    let outcome = rig.next().await.value.clone();
    assert_eq!(outcome["type"], "x.cline.input.sent");
    assert_eq!(outcome["data"], json!({"delivery": "steer"}));
    assert_eq!(outcome["cause"], input["id"]);
    assert!(!outcome.to_string().contains("linter"));
    rig.assert_valid_log();
}

#[tokio::test]
async fn a_duplicate_while_pending_gets_nothing_and_a_hub_refusal_is_refused() {
    let mut rig = Rig::connected(Options::default()).await;
    let input = rig.command("x.cline.control.send_input", None, json!({"text": "one"}));
    rig.submit(&input);
    let sent = rig.hub.command("session.send_input").await;
    rig.submit(&input); // pending: nothing
    rig.hub.reply(&sent, Some("session_not_found"));
    let nack = rig.next().await.value.clone();
    assert_eq!(nack["type"], CONTROL_REJECTED);
    assert_eq!(nack["data"]["reason"], "refused");
    assert_eq!(nack["cause"], input["id"]);
    let other = rig.command("x.cline.control.send_input", None, json!({"text": "two"}));
    rig.submit(&other);
    let next = rig.hub.command("session.send_input").await;
    assert_eq!(
        next["envelope"]["payload"]["prompt"], "two",
        "the duplicate was never sent"
    );
}

#[tokio::test]
async fn malformed_commands_are_invalid_and_undeclared_ones_unsupported() {
    let mut rig = Rig::connected(Options::default()).await;
    let long = rig.command("x.cline.control.send_input", None, json!({"text": "x".repeat(4001)}));
    rig.submit(&long);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "invalid");
    let no_answer = rig.command(CONTROL_ATTENTION_RESPOND, Some("R"), json!({}));
    rig.submit(&no_answer);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "invalid");
    let pause = rig.command(CONTROL_PAUSE, None, json!({}));
    rig.submit(&pause);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "unsupported");
    assert!(matches!(
        rig.intake
            .submit(&json!({"type": RUN_STARTED, "id": "x", "source": "s", "session": SESSION})),
        Err(aep_cline::control::Refusal::Invalid(_))
    ));
    assert!(matches!(
        rig.intake
            .submit(&json!({"type": CONTROL_CANCEL, "source": "s", "session": SESSION})),
        Err(aep_cline::control::Refusal::Invalid(_))
    ));
}

#[tokio::test]
async fn with_the_control_gate_off_requests_are_oob_and_commands_unsupported() {
    let mut rig = Rig::connected(Options {
        control: false,
        ..Options::default()
    })
    .await;
    assert!(rig.intake.accepts().is_empty());
    let requested = rig.request("approval.requested.approve").await;
    assert_eq!(requested["data"]["respond_via"], json!(["oob"]));
    let respond = rig.command(
        CONTROL_ATTENTION_RESPOND,
        requested["id"].as_str(),
        json!({"answer": {"option": "approve"}}),
    );
    rig.submit(&respond);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "unsupported");
}

#[tokio::test]
async fn a_hub_that_never_replies_gets_the_guard_s_accept() {
    let mut rig = Rig::connected(Options {
        guard: Duration::from_millis(200),
        ..Options::default()
    })
    .await;
    let input = rig.command("x.cline.control.send_input", None, json!({"text": "hello"}));
    rig.submit(&input);
    let sent = rig.hub.command("session.send_input").await;
    let accepted = rig.next().await.value.clone();
    assert_eq!(accepted["type"], CONTROL_ACCEPTED);
    assert_eq!(accepted["cause"], input["id"]);
    // A reply after the guard does not decide again; it still settles the outcome.
    rig.hub.reply(&sent, None);
    assert_eq!(rig.next().await.value["type"], "x.cline.input.sent");
    assert_eq!(rig.log().iter().filter(|e| e["cause"] == input["id"]).count(), 2);
}

#[tokio::test]
async fn a_hub_that_never_answers_register_leaves_the_tap_unconnected_and_commands_busy() {
    let mut rig = Rig::start(Options::default()).await;
    rig.hub.set_register(Register::Silent);
    rig.hub.command("client.register").await;
    rig.hook("agent_start");
    rig.drain();
    let cancel = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&cancel);
    let nack = rig.next_of(CONTROL_REJECTED).await;
    assert_eq!(nack["data"]["reason"], "busy");
    // It keeps trying (every reconnect interval), without a second register answered.
    rig.hub.command("client.register").await;
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_hooks_are_untouched() {
    let mut rig = Rig::start(Options {
        token: "not-the-token",
        ..Options::default()
    })
    .await;
    let events = rig.hook("agent_start");
    assert_eq!(types(&events), [SESSION_STARTED, RUN_STARTED]);
    rig.drain();
    let cancel = rig.command(CONTROL_CANCEL, None, json!({"scope": "run"}));
    rig.submit(&cancel);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "busy");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rig.hub.connections(), 0, "every upgrade was refused");
}

#[tokio::test]
async fn a_dropped_socket_dismisses_pending_requests_and_the_resubscribe_resumes() {
    let mut rig = Rig::connected(Options::default()).await;
    let requested = rig.request("approval.requested.approve").await;
    let respond = rig.command(
        CONTROL_ATTENTION_RESPOND,
        requested["id"].as_str(),
        json!({"answer": {"option": "approve"}}),
    );
    rig.submit(&respond);
    rig.hub.command("approval.respond").await;
    rig.hub.drop_connection();
    // In flight when the socket dropped: busy; the request is dismissed.
    let nack = rig.next_of(CONTROL_REJECTED).await;
    assert_eq!(
        (nack["data"]["reason"].clone(), nack["cause"].clone()),
        (json!("busy"), respond["id"].clone())
    );
    let dismissed = rig.next_of(ATTENTION_RESOLVED).await;
    assert_eq!(dismissed["subject"], requested["id"]);
    assert_eq!(dismissed["data"]["resolution"], "dismissed");
    // The tap comes back, resuming after the last sequence it saw (220)...
    let resumed = rig.hub.subscribed().await;
    assert_eq!(resumed["sinceSequence"], 220);
    // ...and the hub re-sends the approval still pending, without a sequence: a new request.
    let mut again = serde_json::from_str::<Value>(&frame("approval.requested.approve")).unwrap();
    again["envelope"].as_object_mut().unwrap().remove("sequence");
    rig.hub.send(&again.to_string());
    let renewed = rig.next_of(ATTENTION_REQUESTED).await;
    assert_ne!(renewed["id"], requested["id"]);
    rig.assert_valid_log();
}

#[tokio::test]
async fn malformed_and_unknown_frames_are_ignored_and_the_connection_kept() {
    let mut rig = Rig::connected(Options::default()).await;
    rig.hub.send("this is not json");
    rig.hub.send(r#"{"kind":"zigzag"}"#);
    rig.hub.send(r#"{"envelope":{}}"#);
    rig.hub.send(
        r#"{"kind":"event","envelope":{"version":"v1","event":"approval.requested","payload":{"approvalId":7}}}"#,
    );
    rig.hub
        .send(r#"{"kind":"event","envelope":{"version":"v1","event":"hub.client.registered","sequence":300}}"#);
    rig.hub.send(&frame("session.pending_prompts"));
    rig.hub
        .send(r#"{"kind":"reply","envelope":{"version":"v1","requestId":"nobody","ok":true}}"#);
    let requested = rig.request("approval.requested.approve").await;
    assert_eq!(requested["type"], ATTENTION_REQUESTED);
    assert_eq!(rig.hub.connections(), 1, "never reconnected");
}

#[tokio::test]
async fn another_protocol_version_degrades_to_observe_only() {
    let mut rig = Rig::connected(Options::default()).await;
    let requested = rig.request("approval.requested.approve").await;
    let mut v2 = serde_json::from_str::<Value>(&frame("approval.resolved.approved")).unwrap();
    v2["envelope"]["version"] = json!("v2");
    rig.hub.set_register(Register::Version("v2".into()));
    rig.hub.send(&v2.to_string());
    // Disconnected: the pending request is dismissed, not answered by a frame it cannot read.
    let dismissed = rig.next_of(ATTENTION_RESOLVED).await;
    assert_eq!(dismissed["subject"], requested["id"]);
    assert_eq!(dismissed["data"]["resolution"], "dismissed");
    // It retries, and a v2 register reply keeps it off: commands are busy, hooks still land.
    rig.hub.command("client.register").await;
    rig.drain();
    let input = rig.command("x.cline.control.send_input", None, json!({"text": "hello"}));
    rig.submit(&input);
    assert_eq!(rig.next_of(CONTROL_REJECTED).await["data"]["reason"], "busy");
    // The hub's frames named the session: its shutdown hook closes the run, and the session's
    // end is the hub's or the reconciler's to say.
    let events = rig.hook("session_shutdown");
    assert_eq!(types(&events), [RUN_CANCELLED]);
}

#[tokio::test]
async fn a_session_scope_cancel_ends_the_session_in_the_record_answer_first() {
    let mut rig = Rig::connected(Options::default()).await;
    rig.drain();
    let end = rig.command(CONTROL_CANCEL, None, json!({"scope": "session", "reason": "stuck"}));
    rig.submit(&end);
    let ack = rig.next().await.value.clone();
    assert_eq!(
        (ack["type"].as_str(), &ack["cause"]),
        (Some(CONTROL_ACCEPTED), &end["id"])
    );
    let cancelled = rig.next().await.value.clone();
    assert_eq!(cancelled["type"], RUN_CANCELLED);
    assert_eq!(
        (&cancelled["data"]["by"], &cancelled["cause"]),
        (&json!("control"), &end["id"])
    );
    let ended = rig.next().await.value.clone();
    assert_eq!(
        (ended["type"].as_str(), &ended["cause"]),
        (Some(SESSION_ENDED), &end["id"])
    );
    assert_eq!(ended["data"]["detected"]["by"], "person");
    // Then nothing runs in it: a cancel and an input are refused before the hub hears them.
    for (ty, data) in [
        (CONTROL_CANCEL, json!({"scope": "run"})),
        ("x.cline.control.send_input", json!({"text": "hello"})),
    ] {
        let command = rig.command(ty, None, data);
        rig.submit(&command);
        let nack = rig.next_of(CONTROL_REJECTED).await;
        assert_eq!(nack["data"]["reason"], "refused");
    }
}

/// The benchmark behind `crates/daemon/bench/hub.sh` (ignored: it reports, it asserts no
/// time): from the stub hub sending `approval.requested` to `attention.requested` appended to
/// the session log and published, over a real loopback WebSocket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run crates/daemon/bench/hub.sh"]
async fn bench_approval_to_attention() {
    const WARMUP: usize = 200;
    const N: usize = 5000;
    let mut rig = Rig::connected(Options::default()).await;
    let template: Value = serde_json::from_str(&frame("approval.requested.approve")).unwrap();
    let mut resolved: Value = serde_json::from_str(&frame("approval.resolved.approved")).unwrap();
    let mut samples = Vec::with_capacity(N);
    for i in 0..WARMUP + N {
        let mut request = template.clone();
        let id = format!("approval_bench_{i}");
        request["envelope"]["payload"]["approvalId"] = json!(id);
        let text = request.to_string();
        let started = std::time::Instant::now();
        rig.hub.send(&text);
        rig.next_of(ATTENTION_REQUESTED).await;
        let took = started.elapsed();
        if i >= WARMUP {
            samples.push(took);
        }
        // Resolve it, so the session holds one pending request at a time.
        resolved["envelope"]["payload"]["approvalId"] = json!(id);
        rig.hub.send(&resolved.to_string());
        rig.next_of(ATTENTION_RESOLVED).await;
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "hub approval.requested -> attention.requested appended, {N} samples: p50 {:?}, p99 {:?}, max {:?}",
        at(0.50),
        at(0.99),
        samples[samples.len() - 1]
    );
}

#[test]
fn a_restarted_daemon_still_dismisses_what_it_left_pending_before_the_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = |dir: &std::path::Path| {
        Sessions::new(
            Journal::new(dir),
            "host".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        )
    };
    let before = Arc::new(sessions(dir.path()));
    before
        .ingest_hook(&hook("agent_start"), &aep_cline::firing::Firing::default())
        .unwrap();
    let event = match cline_hub::frame::parse(&frame("approval.requested.approve")).unwrap() {
        cline_hub::frame::Incoming::Event(e) => e,
        other => panic!("{other:?}"),
    };
    let intake = Intake::new(before.clone(), None);
    aep_cline::hub::tap::approval_requested(&before, &intake, &event, true, None);
    drop((intake, before));
    let after = sessions(dir.path());
    let ended = match after
        .ingest_hook(&hook("session_shutdown"), &aep_cline::firing::Firing::default())
        .unwrap()
    {
        aep_cline::lane::Ingested::Appended { events, .. } => events,
        other => panic!("{other:?}"),
    };
    let ended: Vec<Value> = ended.iter().map(|e| e.value.clone()).collect();
    assert_eq!(types(&ended), [ATTENTION_RESOLVED, RUN_CANCELLED, SESSION_ENDED]);
    assert_eq!(ended[0]["data"]["resolution"], "dismissed");
}

#[tokio::test]
async fn a_hub_session_ends_when_the_hub_says_it_is_over_not_at_its_shutdown_hook() {
    let mut rig = Rig::connected(Options::default()).await;
    // An abort's session_shutdown closes the run; the hub's session goes on (it said it hosts it).
    rig.hub.send(&frame("run.aborted.running"));
    rig.hub.send(&frame("approval.requested.pending"));
    rig.next_of(ATTENTION_REQUESTED).await;
    // The hub settles its own pending approval (approval.resolved {cancelled}); until then it stays.
    assert_eq!(types(&rig.hook("session_shutdown")), [RUN_CANCELLED]);
    let over = json!({"kind": "event", "envelope": {"version": "v1", "event": "session.updated",
        "eventId": "hevt_over", "sessionId": SESSION, "timestamp": 1796007400000u64, "sequence": 900,
        "payload": {"sessionId": SESSION, "snapshot": {"sessionId": SESSION, "status": "idle",
            "endedAt": "2026-11-30T03:00:00.000Z", "exitCode": 0}}}});
    rig.hub.send(&over.to_string());
    // Over: what is still pending is dismissed first (AEP-0002 §7.2), then the session ends.
    let dismissed = rig.next_of(ATTENTION_RESOLVED).await;
    assert_eq!(dismissed["data"]["resolution"], "dismissed");
    let ended = rig.next_of(SESSION_ENDED).await;
    assert_eq!(ended["data"]["reason"], "normal");
    assert_eq!(ended["time"], "2026-11-30T03:00:00.000Z", "when the hub says it ended");
    assert_eq!(ended["data"]["detected"]["by"], "hub");
    assert_eq!(dismissed["time"], ended["time"]);
    assert_eq!(rig.log().last().unwrap()["type"], SESSION_ENDED);
    rig.hub.send(&over.to_string());
    rig.hub.send(&frame("approval.requested.pending"));
    rig.next_of(ATTENTION_REQUESTED).await;
    assert_eq!(
        rig.log().iter().filter(|e| e["type"] == SESSION_ENDED).count(),
        1,
        "ended once"
    );
}

#[test]
fn without_the_control_gate_a_policy_names_only_its_ask_rules_and_answers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("policy.toml");
    let sessions = Arc::new(Sessions::new(
        Journal::new(&dir.path().join("logs")),
        "host".into(),
        CapturePolicy::new(Capture::Metadata),
        Redactor::new(RedactOptions::default()).unwrap(),
        Bus::default(),
    ));
    sessions
        .ingest_hook(&hook("agent_start"), &aep_cline::firing::Firing::default())
        .unwrap();
    let intake = Intake::new(sessions.clone(), None);
    let event = |name: &str| match cline_hub::frame::parse(&frame(name)).unwrap() {
        cline_hub::frame::Incoming::Event(e) => e,
        other => panic!("{other:?}"),
    };
    let read = || -> Vec<Value> {
        std::fs::read_to_string(sessions.journal().path(SESSION))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let mirror = |rules: &str, name: &str| {
        std::fs::write(&policy_file, rules).unwrap();
        let policy = aep_cline::policy::Active::load(&policy_file).unwrap();
        aep_cline::hub::tap::approval_requested(&sessions, &intake, &event(name), false, Some(&policy));
        read()
            .into_iter()
            .rev()
            .find(|e| e["type"] == ATTENTION_REQUESTED)
            .unwrap()
    };
    let approve = mirror(
        "[[rule]]\nname = 'all'\ntool = '*'\nanswer = 'approve'\n",
        "approval.requested.approve",
    );
    assert!(approve["data"].get("cline.policy_rule").is_none(), "{approve}");
    let ask = mirror("[[rule]]\nname = 'people'\nanswer = 'ask'\n", "approval.requested.deny");
    assert_eq!(ask["data"]["cline.policy_rule"], "people");
    assert_eq!(ask["data"]["cline.policy_answer"], "ask");
    let log = read();
    assert!(
        !log.iter().any(|e| e["type"].as_str().unwrap().starts_with("control.")),
        "no command was submitted: {:?}",
        types(&log)
    );
}
