//! A machine speaks only for itself (docs/fleet.md, "Subjects" and "The console"), against a
//! real `nats-server` with docs/fleet.md's users and permissions verbatim: two real daemons
//! (host-b with a pending approval from its hub, a stub one with real frames; host-a plain),
//! and host-a's NATS user trying the campaign's three attacks on host-b: resolving host-b's
//! approval, making a session with an approval appear under host-b, and placing host-b's
//! session at `seq` 10^15 so that its later Events look like redeliveries. Each is tried under
//! host-b's subjects (the server refuses the publish) and under host-a's own (the console
//! refuses an Event whose `source` names another host than its subject); host-b's own user
//! placing its session at 10^15 is refused as an impossible position. Read back through
//! `aep-cline fleet ... --json` as the viewer: host-b's approval stays, no fake session, host-b's
//! next real approval shows (also in `fleet show`), host-a's session is host-a's; and `fleet serve`, following the
//! stream meanwhile, counts the refusals in `/api/position` and says each reason as it comes.

use crate::nats::{vendor_hook, Server, WAIT};
use crate::support;
use crate::support::console::Console;
use support::daemon::{real_payload, Sandbox};
use support::nats_server::fleet_conf_file;
use support::stub_hub::{real_frame, StubHub};
use support::wait::wait_until_seen_every;

use aep_cline::nats_contract::subject;
use aep_cline::sinks::nats::message;
use async_nats::jetstream;
use serde_json::{json, Value};
use std::time::Duration;

/// host-b's session, as its hooks' real payloads name it.
const SESSION: &str = "1796007217803_dxv4z";
/// host-a's session.
const A_SESSION: &str = "1796007203184_aaaaa";
const TOKEN: &str = "0123456789abcdef0123456789abcdef-stub";

/// A client as one of docs/fleet.md's users (password `<user>-secret`); the server's errors
/// (permission violations) are sent to `errors`.
async fn connect(url: &str, user: &str, errors: std::sync::mpsc::Sender<String>) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(user.into(), format!("{user}-secret"))
        .event_callback(move |event| {
            let errors = errors.clone();
            async move {
                if let async_nats::Event::ServerError(e) = &event {
                    let _ = errors.send(e.to_string());
                }
            }
        })
        .connect(url)
        .await
        .unwrap()
}

/// Publishes `event` into the stream as `host`'s sink would, under `host`'s subjects: whether
/// the server stored it.
async fn publish_as(js: &jetstream::Context, host: &str, event: &Value) -> bool {
    let (subject, headers, payload) = message(host, event).unwrap();
    match js.publish_with_headers(subject, headers, payload.into()).await {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    }
}

/// `aep-cline fleet ARGS --json` as the read-only viewer: its JSON and its stderr.
fn fleet_json(url: &str, args: &[&str]) -> (Value, String) {
    let console = Sandbox::new();
    let mut all = args.to_vec();
    all.push("--json");
    let o = console.run(
        &all,
        &[
            ("AEP_NATS_URL", url),
            ("AEP_NATS_USER", "viewer"),
            ("AEP_NATS_PASSWORD", "viewer-secret"),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "fleet {args:?}: {err}");
    (
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {err}")),
        err,
    )
}

/// `fleet approvals` as (host, session, request id), once `done` says it is complete.
fn wait_approvals(
    url: &str,
    what: &str,
    done: impl Fn(&[(String, String, String)]) -> bool,
) -> Vec<(String, String, String)> {
    // Each look runs the command: every 300 ms.
    wait_until_seen_every(what, WAIT, Duration::from_millis(300), || {
        let (list, err) = fleet_json(url, &["fleet", "approvals"]);
        let all: Vec<(String, String, String)> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let s = |k: &str| a[k].as_str().unwrap_or_default().to_string();
                (s("host"), s("session"), s("id"))
            })
            .collect();
        if done(&all) {
            Ok(all)
        } else {
            Err(format!("it lists {all:?}\n{err}"))
        }
    })
}

/// The stub hub asks host-b for approval `nth`; returns its `attention.requested` Event.
fn ask(hub: &StubHub, sandbox: &Sandbox, nth: usize) -> Value {
    let mut approval = real_frame("approval.requested.approve");
    approval["envelope"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["approvalId"] = json!(format!("appr-{nth}"));
    approval["envelope"]["sequence"] = json!(100 + nth);
    hub.send(&approval.to_string());
    let events = sandbox.wait_log(SESSION, "host-b's approval in its log", WAIT, |e| {
        e.iter().filter(|x| x["type"] == "attention.requested").count() > nth
    });
    events
        .into_iter()
        .filter(|e| e["type"] == "attention.requested")
        .nth(nth)
        .unwrap()
}

/// An Event as host-b's daemon would log it, from `template` (one of its own).
fn as_host_b(template: &Value, id: &str, ty: &str, session: &str, seq: u64) -> Value {
    let mut e = template.clone();
    e["id"] = json!(id);
    e["type"] = json!(ty);
    e["session"] = json!(session);
    e["seq"] = json!(seq);
    e["source"] = json!(aep_core::source::session_source("host-b", "cline", session));
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_speaks_only_for_itself_whatever_it_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let conf = fleet_conf_file(dir.path());
    let server = Server::start(&["-c", conf.to_str().unwrap()]);
    let url = server.url();
    let hub = StubHub::start(TOKEN).await;
    let daemon_box = |host: &str, user: &str| {
        Sandbox::new()
            .with_env("AEP_NATS_URL", &url)
            .with_env("AEP_NATS_USER", user)
            .with_env("AEP_NATS_PASSWORD", &format!("{user}-secret"))
            .with_env("AEP_HOST", host)
            .with_env("RUST_LOG", "warn")
    };
    let b = daemon_box("host-b", "daemon-b")
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let a = daemon_box("host-a", "daemon-a");
    let (_daemon_b, daemon_a) = (b.start(), a.start());
    hub.subscribed().await;
    for hook in ["agent_start", "tool_call"] {
        assert!(b.hook(&real_payload("hooks-cancel", hook)).status.success());
    }
    let request = ask(&hub, &b, 0);
    vendor_hook(&daemon_a, A_SESSION, 0);
    let real = wait_approvals(&url, "host-b's approval in the console", |all| !all.is_empty());
    let request_id = request["id"].as_str().unwrap().to_string();
    assert_eq!(real, [("host-b".into(), SESSION.into(), request_id.clone())]);
    // A page following the stream while the attacks come, as the viewer.
    let said = dir.path().join("serve.stderr");
    let console = Console::start_with(
        &url,
        &[("AEP_NATS_USER", "viewer"), ("AEP_NATS_PASSWORD", "viewer-secret")],
        std::fs::File::create(&said).unwrap().into(),
    );
    let cookie = console.sign_in();

    let (errors_to, errors) = std::sync::mpsc::channel();
    let attacker = connect(&url, "daemon-a", errors_to.clone()).await;
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(attacker);
    // (1) host-b's approval resolved; (2) a session with an approval under host-b; (3) host-b's
    // session placed at 10^15.
    let mut resolved = as_host_b(
        &request,
        "01JSPOOFRESOLVED00000000001",
        "attention.resolved",
        SESSION,
        90,
    );
    resolved["subject"] = json!(request_id);
    resolved["data"] = json!({"outcome": "approved", "by": "spoof"});
    let fake = as_host_b(
        &request,
        "01JSPOOFFAKESESSION00000001",
        "attention.requested",
        "fake-session",
        1,
    );
    let far = as_host_b(
        &request,
        "01JSPOOFFARAHEAD0000000001",
        "x.note",
        SESSION,
        1_000_000_000_000_000,
    );
    let far = {
        let mut far = far;
        far["data"] = json!({});
        far
    };
    for (n, attack) in [&resolved, &fake, &far].into_iter().enumerate() {
        // Under host-b's subjects: the server refuses daemon-a's user.
        assert!(
            !publish_as(&js, "host-b", attack).await,
            "attack {n} stored under host-b"
        );
        // Under its own, claiming host-b in the body: stored, and the console's to refuse.
        let mut own = attack.clone();
        own["id"] = json!(format!("{}-OWN", attack["id"].as_str().unwrap()));
        assert!(
            publish_as(&js, "host-a", &own).await,
            "attack {n} under host-a's own subject"
        );
    }
    let refused: Vec<String> = errors.try_iter().collect();
    // The grant is `aep.host-a.>`: every subject under `aep.host-b.` is refused.
    let under_b = subject::of_host("host-b").trim_end_matches('>').to_string();
    assert!(
        refused
            .iter()
            .any(|e| e.contains("Permissions Violation for Publish") && e.contains(&under_b)),
        "{refused:?}"
    );
    // host-b's own user places its session far ahead: stored (its own subject), refused by the
    // console as a position no daemon reaches.
    let own_b = connect(&url, "daemon-b", errors_to).await;
    let mut far_b = far.clone();
    far_b["id"] = json!("01JFARAHEADBYHOSTB000000001");
    assert!(publish_as(&jetstream::new(own_b), "host-b", &far_b).await);

    // host-b's next real Events still show: its next approval.
    let next = ask(&hub, &b, 1);
    let all = wait_approvals(&url, "host-b's next approval", |all| all.len() >= 2);
    let mut want = vec![
        ("host-b".to_string(), SESSION.to_string(), request_id.clone()),
        ("host-b".into(), SESSION.into(), next["id"].as_str().unwrap().into()),
    ];
    let mut got = all.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "the approval stays, nothing fake, the next one shows");

    let (sessions, err) = fleet_json(&url, &["fleet", "sessions"]);
    let listed: Vec<(String, String)> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["host"].as_str().unwrap().into(),
                s["session"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    assert_eq!(
        listed_sorted,
        [
            ("host-a".to_string(), A_SESSION.to_string()),
            ("host-b".into(), SESSION.into())
        ],
        "a normal two-host run: each session under its own host, and no fake one"
    );
    assert!(
        err.contains("3 Events of another host than their subject's")
            && err.contains("1 Events at an impossible position"),
        "said on stderr: {err}"
    );
    // host-b's session in detail, read from its subject: its own Events, not the far one.
    let (shown, _) = fleet_json(&url, &["fleet", "show", SESSION, "--host", "host-b"]);
    let ids: Vec<&str> = shown["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&request_id.as_str()) && ids.contains(&next["id"].as_str().unwrap()),
        "{shown:#}"
    );
    assert!(!ids.iter().any(|id| id.contains("FARAHEAD")), "{shown:#}");
    // The page that followed: the same refusals counted, and said as they came.
    let position = console.wait_for("/api/position", &cookie, |p| {
        p["counts"]["foreign"] == 3 && p["counts"]["impossible"] == 1
    });
    let approvals = console.api("/api/approvals", &cookie);
    assert_eq!(
        approvals["approvals"].as_array().unwrap().len(),
        2,
        "{approvals:#} {position:#}"
    );
    let stderr = std::fs::read_to_string(&said).unwrap();
    assert!(
        stderr.contains(r#"skipped an Event published under host "host-a" whose source names host "host-b""#)
            && stderr.contains("at an impossible position"),
        "{stderr}"
    );
    let (machines, _) = fleet_json(&url, &["fleet", "machines"]);
    let hosts: Vec<&str> = machines
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["host-a", "host-b"]);
}
