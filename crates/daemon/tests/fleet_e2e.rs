//! The fleet end to end (#24): a real `nats-server` with JetStream and the fleet's users and
//! permissions (docs/fleet.md's, read from the page), two real daemons with their own
//! `AEP_HOST` publishing to one stream (host-a on the REAL Cline 3.0.65 hub with the tap,
//! `AEP_CLINE_HUB_CONTROL=1` and `AEP_NATS_CONTROL=1`; host-b plain, fed the real hook payloads),
//! and every assertion made through the real `aep-cline fleet ... --json` commands: both machines
//! and their sessions listed; the real hub's approval listed with its host and approved by the
//! operator, the real tool run on host-a; a command for host-b (control off) and one by the
//! viewer refused in words; host-b stopped by SIGTERM shown stopped with its sessions; a console
//! run again showing the same view; a nats-server restart losing nothing the daemons logged
//! meanwhile.

use crate::support;

use serde_json::{json, Value};
use std::collections::HashSet;
use std::process::Output;
use std::time::Duration;
use support::cline::ClineSandbox;
use support::console::Console;
use support::daemon::{of, real_payload, types, Daemon, Sandbox};
use support::fake_model::{FakeModel, Script};
use support::hub_client::HubClient;
use support::nats_server::Server;
use support::real_hub::{tapped_sandbox, RealHub};
use support::wait::wait_until_seen_every;

/// host-b's session: the one of the real hook payloads (`cline-hooks/tests/data/hooks-local`).
const B_SESSION: &str = "1796007203184_6l7jh";
const WAIT: Duration = Duration::from_secs(90);

/// `aep-cline fleet ARGS` as `user` (its password is `<user>-secret`).
fn fleet(console: &Sandbox, url: &str, user: &str, args: &[&str]) -> Output {
    let mut all = vec!["fleet"];
    all.extend_from_slice(args);
    let password = format!("{user}-secret");
    console.run(
        &all,
        &[
            ("AEP_NATS_URL", url),
            ("AEP_NATS_USER", user),
            ("AEP_NATS_PASSWORD", &password),
        ],
    )
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `fleet ARGS --json` as the viewer, parsed.
fn view(console: &Sandbox, url: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let o = fleet(console, url, "viewer", &all);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// Runs `fleet ARGS --json` until `done` holds of its answer (the daemons publish and beat on
/// their own time).
/// Each look runs the command: every 500 ms.
fn wait_view(console: &Sandbox, url: &str, args: &[&str], what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until_seen_every(what, WAIT, Duration::from_millis(500), || {
        let now = view(console, url, args);
        if done(&now) {
            Ok(now)
        } else {
            Err(format!("`fleet {}` says {now:#}", args.join(" ")))
        }
    })
}

fn status_of(machines: &Value, host: &str) -> Option<String> {
    machines
        .as_array()?
        .iter()
        .find(|m| m["host"] == host)
        .map(|m| m["status"].as_str().unwrap().to_string())
}

fn session_of<'a>(sessions: &'a Value, host: &str, session: &str) -> Option<&'a Value> {
    sessions
        .as_array()?
        .iter()
        .find(|s| s["host"] == host && s["session"] == session)
}

/// What `fleet sessions` counts of a session, as its daemon's log has it.
fn counts_of_log(log: &[Value]) -> (u64, u64) {
    (
        of(log, "run.started").len() as u64,
        of(log, "tool.requested").len() as u64,
    )
}

fn counts_of_view(s: &Value) -> (u64, u64) {
    (s["runs"].as_u64().unwrap(), s["tool_calls"].as_u64().unwrap())
}

fn daemon_sandbox(sandbox: Sandbox, url: &str, host: &str) -> Sandbox {
    sandbox
        .with_env("AEP_NATS_URL", url)
        .with_env("AEP_HOST", host)
        .with_env("AEP_NATS_USER", &format!("daemon-{}", &host[5..]))
        .with_env("AEP_NATS_PASSWORD", &format!("daemon-{}-secret", &host[5..]))
}

/// Sends `command` to host-a's intake (`POST /control`), as its own endpoint takes it.
fn post_control(daemon: &Daemon, command: &Value) {
    let auth = format!("Bearer {}", daemon.token);
    let (status, body) = support::daemon::http(
        &daemon.addr(),
        "POST",
        "/control",
        &[("authorization", &auth), ("content-type", "application/json")],
        command.to_string().as_bytes(),
    );
    assert_eq!(status, 202, "POST /control: {body}");
}

/// The id of every Event in stream `AEP`, read as the viewer with the official client.
async fn stream_ids(url: &str) -> HashSet<String> {
    let client = async_nats::ConnectOptions::with_user_and_password("viewer".into(), "viewer-secret".into())
        .connect(url)
        .await
        .unwrap();
    let stream = async_nats::jetstream::new(client).get_stream("AEP").await.unwrap();
    let last = stream.get_info().await.unwrap().state.last_sequence;
    let mut ids = HashSet::new();
    for seq in 1..=last {
        if let Ok(m) = stream.get_raw_message(seq).await {
            let ce: Value = serde_json::from_slice(&m.payload).unwrap();
            ids.insert(ce["id"].as_str().unwrap().to_string());
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_daemons_one_on_the_real_hub_seen_and_commanded_through_the_fleet_console() {
    let conf_dir = tempfile::tempdir().unwrap();
    let conf = support::nats_server::fleet_conf_file(conf_dir.path());
    let mut server = Server::start(&["-c", conf.to_str().unwrap()]);
    let url = server.url();

    // host-a: the real hub with the tap and control over NATS.
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep_a = daemon_sandbox(tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL"), &url, "host-a")
        .with_env("AEP_NATS_CONTROL", "1")
        .with_env("RUST_LOG", "info");
    let hub = RealHub::ensure(&cline);
    let daemon_a = aep_a.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let a_session = client.create_session(&cline.workspace()).await;

    // host-b: plain, fed the real hook payloads of one run.
    let aep_b = daemon_sandbox(Sandbox::new(), &url, "host-b").with_env("RUST_LOG", "warn");
    let daemon_b = aep_b.start();
    for hook in ["agent_start", "tool_call", "tool_result"] {
        let o = aep_b.hook(&real_payload("hooks-local", hook));
        assert!(o.status.success(), "{}", text(&o).1);
    }
    let b_log = aep_b.wait_log(B_SESSION, "host-b's hooks", WAIT, |l| {
        of(l, "tool.completed").len() == 1
    });

    // A real approval waiting on host-a.
    client.start_run(&a_session, "please CMD:echo fleet-approved");
    let a_log = aep_a.wait_log(&a_session, "the approval", WAIT, |l| {
        !of(l, "attention.requested").is_empty()
    });
    let request = of(&a_log, "attention.requested")[0].clone();
    let console = Sandbox::new();

    // 1. Both machines online, each machine's sessions.
    let machines = wait_view(&console, &url, &["machines"], "both machines online", |m| {
        status_of(m, "host-a").as_deref() == Some("online") && status_of(m, "host-b").as_deref() == Some("online")
    });
    let a_record = &machines
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["host"] == "host-a")
        .unwrap()["record"];
    assert_eq!(a_record["control"], true, "{machines:#}");
    let b_record = &machines
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["host"] == "host-b")
        .unwrap()["record"];
    assert_eq!(b_record["control"], false, "{machines:#}");
    let sessions = wait_view(&console, &url, &["sessions"], "each machine's session", |s| {
        session_of(s, "host-a", &a_session).is_some_and(|s| s["state"] == "waiting")
            && session_of(s, "host-b", B_SESSION).is_some_and(|s| counts_of_view(s) == counts_of_log(&b_log))
    });
    assert_eq!(
        sessions.as_array().unwrap().len(),
        2,
        "one session per machine, none mixed up: {sessions:#}"
    );
    let on_b = view(&console, &url, &["sessions", "--host", "host-b"]);
    assert_eq!(on_b.as_array().unwrap().len(), 1, "{on_b:#}");
    assert_eq!(on_b[0]["session"], B_SESSION);

    // 2. The approval listed with its host; approved by the operator: the real tool runs on host-a.
    let approvals = wait_view(&console, &url, &["approvals"], "the approval", |a| {
        a.as_array().is_some_and(|a| a.len() == 1)
    });
    assert_eq!(approvals[0]["host"], "host-a", "{approvals:#}");
    assert_eq!(approvals[0]["id"], request["id"], "{approvals:#}");
    assert_eq!(approvals[0]["session"], a_session.as_str());
    let short = approvals[0]["short"].as_str().unwrap().to_string();
    // What it asks: asked of host-a over its control subject, by one who may command it; the
    // viewer is told why not; nothing of it is in the stream.
    assert!(approvals[0].get("detail").is_none(), "not asked: not shown");
    let o = fleet(&console, &url, "operator", &["approvals", "--detail", "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let asked: Value = serde_json::from_str(&out).unwrap();
    let commands = asked[0]["detail"]["commands"].as_array().cloned().unwrap_or_default();
    assert!(
        commands
            .iter()
            .any(|c| c.as_str().is_some_and(|c| c.contains("echo fleet-approved"))),
        "the operator sees the command: {asked:#}"
    );
    let o = fleet(&console, &url, "operator", &["approvals", "--detail"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("on host-a asks") && out.contains("echo fleet-approved"),
        "{out}"
    );
    let o = fleet(&console, &url, "viewer", &["approvals", "--detail", "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let refused: Value = serde_json::from_str(&out).unwrap();
    assert!(refused[0].get("detail").is_none(), "{refused:#}");
    assert!(
        refused[0]["detail_unavailable"]
            .as_str()
            .is_some_and(|w| w.contains("refused to let this user command host-a")),
        "the viewer is told why: {refused:#}"
    );
    // The console's "What it asks": the same question, by the console's NATS user.
    for (user, asks) in [("operator", true), ("viewer", false)] {
        let password = format!("{user}-secret");
        let page = Console::start_with(
            &url,
            &[("AEP_NATS_USER", user), ("AEP_NATS_PASSWORD", &password)],
            std::process::Stdio::null(),
        );
        let cookie = page.sign_in();
        page.wait_for("/api/approvals", &cookie, |v| {
            v["approvals"].as_array().is_some_and(|a| a.len() == 1)
        });
        let path = format!(
            "/api/asks?host=host-a&session={a_session}&request={}",
            request["id"].as_str().unwrap()
        );
        let (status, _, body) = page.get(&path, &cookie);
        if asks {
            assert_eq!(status, 200, "{body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            assert!(v["lines"].as_str().unwrap().contains("$ echo fleet-approved"), "{v:#}");
        } else {
            assert_eq!(status, 502, "{body}");
            assert!(body.contains("refused to let this user command host-a"), "{body}");
        }
        let (status, _, body) = page.get(
            &format!("/api/asks?host=host-b&session={a_session}&request=nope"),
            &cookie,
        );
        assert_eq!(status, 409, "no such approval: {body}");
    }
    let o = fleet(&console, &url, "operator", &["approve", &short]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.starts_with("accepted: approve"), "{out}");
    let a_log = aep_a.wait_log(&a_session, "the approved run's end", WAIT, |l| {
        !of(l, "run.finished").is_empty()
    });
    assert_eq!(
        of(&a_log, "tool.completed").len(),
        1,
        "the approved tool ran on host-a: {:?}",
        types(&a_log)
    );
    let accepted = of(&a_log, "control.accepted");
    assert_eq!(accepted.len(), 1, "{:?}", types(&a_log));
    let answered = of(&a_log, "attention.answered");
    assert_eq!(
        answered[0]["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    assert_eq!(answered[0]["cause"], accepted[0]["cause"], "the fleet's command");
    wait_view(&console, &url, &["approvals"], "no approval pending", |a| {
        a.as_array().is_some_and(|a| a.is_empty())
    });
    let sessions = wait_view(&console, &url, &["sessions"], "host-a's run counted", |s| {
        session_of(s, "host-a", &a_session)
            .is_some_and(|s| counts_of_view(s) == counts_of_log(&aep_a.log(&a_session)) && s["state"] != "waiting")
    });

    // 3. Refused in words: host-b takes no commands (its operator may publish there: nobody
    // answers); the viewer may command nobody (the server refuses before any daemon sees it).
    let o = fleet(&console, &url, "operator-b", &["send", B_SESSION, "go on"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no daemon answers on aep-control.host-b") && err.contains("AEP_NATS_CONTROL=1"),
        "{err}"
    );
    let o = fleet(&console, &url, "viewer", &["send", &a_session, "hello"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the NATS server refused to let this user command host-a")
            && err.contains("Permissions Violation"),
        "{err}"
    );
    // The operator of host-a may not command host-b either.
    let o = fleet(&console, &url, "operator", &["send", B_SESSION, "go on"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("refused to let this user command host-b"), "{err}");
    let a_log = aep_a.log(&a_session);
    assert!(
        of(&a_log, "control.accepted").len() == 1 && of(&a_log, "control.rejected").is_empty(),
        "no refused command reached host-a: {:?}",
        types(&a_log)
    );

    // 4. host-b stopped with SIGTERM: `stopped`, its session still listed, commands not sent.
    let (status, stderr) = daemon_b.stop();
    assert!(status.success(), "{stderr}");
    let machines = wait_view(&console, &url, &["machines"], "host-b stopped", |m| {
        status_of(m, "host-b").as_deref() == Some("stopped")
    });
    assert_eq!(status_of(&machines, "host-a").as_deref(), Some("online"));
    let on_b = view(&console, &url, &["sessions", "--host", "host-b"]);
    assert_eq!(on_b.as_array().unwrap().len(), 1, "{on_b:#}");
    assert_eq!(counts_of_view(&on_b[0]), counts_of_log(&b_log));
    let o = fleet(&console, &url, "operator-b", &["send", B_SESSION, "go on"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("machine host-b is stopped"), "{err}");

    // 5. A console run again (a new process: its view rebuilt from the stream) shows the same.
    let first = view(&console, &url, &["sessions"]);
    assert_eq!(view(&console, &url, &["sessions"]), first, "the same sessions");
    assert_eq!(
        session_of(&first, "host-a", &a_session),
        session_of(&sessions, "host-a", &a_session),
        "host-a's session as before host-b stopped"
    );

    // nats-server killed; host-a runs and approves meanwhile (through its own endpoint); the
    // server back on the same store: every Event logged meanwhile reaches the stream, and the
    // console's counts match the logs.
    server.kill();
    let before = aep_a.log(&a_session).len();
    client.start_run(&a_session, "again CMD:echo during-the-outage");
    let a_log = aep_a.wait_log(&a_session, "the second approval", WAIT, |l| {
        of(l, "attention.requested").len() == 2
    });
    let second = of(&a_log, "attention.requested")[1]["id"].clone();
    post_control(
        &daemon_a,
        &json!({"aep": "0.1", "id": "CMD-outage", "type": "control.attention.respond",
                "time": "2026-12-01T00:00:00Z", "source": "aep://e2e/agent/console", "agent": "console",
                "session": a_session, "subject": second, "data": {"answer": {"option": "approve"}}}),
    );
    let a_log = aep_a.wait_log(&a_session, "the second run's end", WAIT, |l| {
        of(l, "run.finished").len() == 2
    });
    assert!(a_log.len() > before);
    server.restart();
    let want = counts_of_log(&a_log);
    assert_eq!(want.0, 2, "{:?}", types(&a_log));
    let sessions = wait_view(&console, &url, &["sessions"], "the outage's Events", |s| {
        session_of(s, "host-a", &a_session).is_some_and(|s| counts_of_view(s) == want)
    });
    assert_eq!(
        counts_of_view(session_of(&sessions, "host-b", B_SESSION).unwrap()),
        counts_of_log(&b_log)
    );
    assert!(view(&console, &url, &["approvals"]).as_array().unwrap().is_empty());
    let stored = stream_ids(&url).await;
    for (host, log) in [("host-a", &a_log), ("host-b", &b_log)] {
        let missing: Vec<&Value> = log
            .iter()
            .filter(|e| !stored.contains(e["id"].as_str().unwrap()))
            .collect();
        assert!(
            missing.is_empty(),
            "{host}'s Events missing from the stream: {missing:?}"
        );
    }
    let machines = wait_view(&console, &url, &["machines"], "host-a beating again", |m| {
        status_of(m, "host-a").as_deref() == Some("online")
    });
    assert_eq!(
        status_of(&machines, "host-b").as_deref(),
        Some("stopped"),
        "kept across the restart"
    );

    let (_, stderr) = daemon_a.stop();
    assert!(stderr.contains("hub tap connected"), "{stderr}");
    drop(hub);
}
