//! `aep-cline fleet` (the console) through the real binary against a real `nats-server` with
//! JetStream: two machines' Events in one stream and their records in the machines bucket
//! read back as machines, sessions, approvals and usage; a command by short id reaching the
//! owning machine's control subject; an offline machine, no daemon listening, a permission
//! the server refuses and a stream or server that is not there, each said in words; bad
//! messages in the stream skipped and counted; `fleet serve`'s page and API behind its one-time
//! sign-in, following the stream live and answering through the owning host, also clicked in
//! headless Chromium.
//!
//! Until the daemon's side of the contract (`AEP_NATS_CONTROL=1`, heartbeats) is merged, the
//! machine records are written here as a daemon writes them ([`record`]) and the control
//! subjects answered by a responder that replies as the daemon's intake does ([`Responders`]):
//! the two spots to swap for real daemons.

use crate::nats::{free_port, Server};
use crate::support::browser::Browser;
use crate::support::console::Console;
use crate::support::daemon::{Sandbox, BIN};
use crate::support::endpoint::request;
use crate::support::wait::{wait_until, wait_until_seen};

use aep_cline::fleet::checkpoint;
use aep_cline::nats_contract::machine::{self, Machine};
use async_nats::jetstream::{self, stream};
use fantoccini::Locator;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const A: &str = "dev-1";
/// A host with a dot: its subject token is escaped (`ci%2Erunner`).
const B: &str = "ci.runner";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// An RFC 3339 time `ago` before now.
fn time_ago(ago: Duration) -> String {
    jiff::Timestamp::try_from(SystemTime::now() - ago).unwrap().to_string()
}

/// One Event of `host`'s session, as a daemon logs it.
fn event(host: &str, session: &str, seq: u64, ty: &str, data: Value) -> Value {
    json!({"aep": "0.1", "id": format!("01JFLEET{}{seq:04}{}", session.len(), &session[session.len() - 5..]).to_uppercase(),
           "type": ty, "time": time_ago(Duration::from_secs(60)),
           "source": aep_core::source::session_source(host, "cline", session), "agent": "cline",
           "session": session, "seq": seq, "epoch": 1, "run": "run-1", "data": data})
}

/// Connects (as `user`, when given).
async fn connect(url: &str, user: Option<&str>) -> async_nats::Client {
    match user {
        Some(u) => async_nats::ConnectOptions::with_user_and_password(u.into(), u.into())
            .connect(url)
            .await
            .unwrap(),
        None => async_nats::connect(url).await.unwrap(),
    }
}

/// `e` as the JetStream sink of the host its `source` names publishes it.
fn message(e: &Value) -> (String, async_nats::HeaderMap, Vec<u8>) {
    let host = aep_cline::fleet::view::host_of(e["source"].as_str().unwrap()).unwrap();
    aep_cline::sinks::nats::message(&host, e).unwrap()
}

/// Publishes `events` into the stream the JetStream sink creates, as the sink does.
async fn publish(js: &jetstream::Context, events: &[Value]) {
    js.get_or_create_stream(stream::Config {
        name: "AEP".into(),
        subjects: vec!["aep.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    for e in events {
        let (subject, headers, payload) = message(e);
        js.publish_with_headers(subject, headers, payload.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

/// Writes `host`'s machine record as its daemon does (swap for a real daemon after the merge).
async fn record(js: &jetstream::Context, host: &str, state: &str, heard: Duration) {
    // The bucket's stream as `create_key_value` makes it: that call asks for the account's
    // info first, which async-nats 0.51 cannot parse from nats-server 2.9 (Debian's).
    js.get_or_create_stream(stream::Config {
        name: format!("KV_{}", machine::BUCKET),
        subjects: vec![format!("$KV.{}.>", machine::BUCKET)],
        max_messages_per_subject: 1,
        max_age: machine::KEEP,
        discard: stream::DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let kv = js.get_key_value(machine::BUCKET).await.unwrap();
    let m = Machine {
        host: host.into(),
        version: "0.1.0".into(),
        time: time_ago(heard),
        started: time_ago(Duration::from_secs(3600)),
        state: state.into(),
        control: true,
        sinks: [("nats".to_string(), "ok".to_string())].into(),
        sessions: machine::Sessions {
            live: 1,
            running: 1,
            waiting: 1,
        },
        ..Default::default()
    };
    kv.put(machine::key(host), serde_json::to_vec(&m).unwrap().into())
        .await
        .unwrap();
}

/// Control subjects answered as the daemon's intake answers (swap for real daemons with
/// `AEP_NATS_CONTROL=1` after the merge): `accepted` on `accept`'s hosts, `rejected (refused)`
/// on the others; every command heard is kept.
struct Responders {
    heard: Arc<Mutex<Vec<(String, Value)>>>,
    _runtime: tokio::runtime::Runtime,
}

impl Responders {
    fn start(url: &str, user: Option<&str>, hosts: &[(&str, bool)]) -> Responders {
        let rt = runtime();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let client = rt.block_on(connect(url, user));
        for (host, accept) in hosts {
            let (host, accept, client, heard) = (host.to_string(), *accept, client.clone(), heard.clone());
            let mut sub = rt.block_on(client.subscribe(machine::control_subject(&host))).unwrap();
            rt.spawn(async move {
                while let Some(m) = sub.next().await {
                    let command: Value = serde_json::from_slice(&m.payload).unwrap();
                    heard.lock().unwrap().push((host.clone(), command.clone()));
                    let (ty, data) = if accept {
                        ("control.accepted", json!({}))
                    } else {
                        ("control.rejected", json!({"reason": "refused"}))
                    };
                    let ack = json!({"aep": "0.1", "id": aep_core::id::new_id(), "type": ty, "time": aep_core::id::now_rfc3339(),
                                     "source": aep_core::source::agent_source(&host, "cline"), "agent": "cline",
                                     "session": command["session"], "cause": command["id"], "data": data});
                    client
                        .publish(m.reply.unwrap(), serde_json::to_vec(&ack).unwrap().into())
                        .await
                        .unwrap();
                }
            });
        }
        rt.block_on(client.flush()).unwrap();
        Responders { heard, _runtime: rt }
    }

    fn heard(&self) -> Vec<(String, Value)> {
        self.heard.lock().unwrap().clone()
    }
}

/// `aep-cline fleet ARGS` against `url`.
fn fleet(sandbox: &Sandbox, url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["fleet"];
    all.extend_from_slice(args);
    let mut with = vec![("AEP_NATS_URL", url)];
    with.extend_from_slice(env);
    sandbox.run(&all, &with)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json_of(sandbox: &Sandbox, url: &str, args: &[&str]) -> Value {
    let o = fleet(sandbox, url, args, &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

const S1: &str = "1796007203184_aaaaa";
const S2: &str = "1796007203184_bbbbb";
const S3: &str = "1796007203184_ccccc";
const S4: &str = "1796007203184_ddddd";
const S5: &str = "1796007203184_eeeee";

/// Two machines' sessions (an approval waiting on each), an ended one, a session on a machine
/// gone quiet and one on a machine without control; and what a stream may also hold: a
/// redelivery, a message that is no Event, an Event of no session.
fn fleet_events() -> Vec<Value> {
    let usage = |input: u64, cost: Option<f64>| {
        let mut d = json!({"gen_ai.usage.input_tokens": input, "gen_ai.usage.output_tokens": 10});
        if let Some(c) = cost {
            d["cost"] = json!({"total": c, "currency": "USD"});
        }
        d
    };
    let ask =
        |tool: &str| json!({"kind": "tool", "prompt": format!("run {tool}?"), "respond_via": ["control", "cline"]});
    let mut a_ask = event(A, S1, 4, "attention.requested", ask("execute_command"));
    a_ask["subject"] = json!("execute_command");
    let mut b_ask = event(B, S2, 4, "attention.requested", ask("write_to_file"));
    b_ask["subject"] = json!("write_to_file");
    vec![
        event(A, S1, 1, "session.started", json!({"cwd": "/home/ana/shop"})),
        event(A, S1, 2, "run.started", json!({"gen_ai.request.model": "m-large"})),
        event(A, S1, 3, "run.finished", usage(1000, Some(0.25))),
        a_ask,
        event(B, S2, 1, "session.started", json!({"cwd": "/srv/ci/build"})),
        event(B, S2, 2, "run.started", json!({"gen_ai.request.model": "m-small"})),
        event(B, S2, 3, "run.finished", usage(500, None)),
        b_ask,
        event(B, S2, 5, "run.started", json!({})),
        event(B, S3, 1, "session.started", json!({})),
        event(B, S3, 2, "session.ended", json!({"reason": "normal"})),
        event("gone", S4, 1, "session.started", json!({})),
        event("quiet", S5, 1, "session.started", json!({})),
        event("quiet", S5, 2, "run.started", json!({})),
    ]
}

#[test]
fn the_console_shows_every_machine_and_commands_the_one_that_owns_the_session() {
    let server = Server::start(&[]);
    let url = server.url();
    let rt = runtime();
    rt.block_on(async {
        let client = connect(&url, None).await;
        let js = jetstream::new(client.clone());
        let events = fleet_events();
        publish(&js, &events).await;
        // A redelivery past the server's dedupe (another message id), a message that is no
        // Event, an Event of no session.
        let again = &events[1];
        let (subject, _, payload) = message(again);
        js.publish(subject, payload.into()).await.unwrap().await.unwrap();
        // On the old layout, without a host: skipped whatever it holds.
        js.publish("aep.cline.x", "not an event".into())
            .await
            .unwrap()
            .await
            .unwrap();
        let mut agentwide = event(A, S1, 9, "x.note", json!({}));
        agentwide.as_object_mut().unwrap().remove("session");
        agentwide["source"] = json!(aep_core::source::agent_source(A, "cline"));
        publish(&js, &[agentwide]).await;
        record(&js, A, "running", Duration::from_secs(2)).await;
        record(&js, B, "running", Duration::from_secs(2)).await;
        record(&js, "gone", "running", Duration::from_secs(120)).await;
        record(&js, "down", "stopped", Duration::from_secs(5)).await;
        record(&js, "quiet", "running", Duration::from_secs(1)).await;
    });
    let sandbox = Sandbox::new();

    // Machines: each state in words, and what the read skipped said on stderr.
    let o = fleet(&sandbox, &url, &["machines", "--json"], &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("skipped 1 messages that are no AEP Event, 1 Events without a session or host"),
        "{err}"
    );
    let machines: Value = serde_json::from_str(&out).unwrap();
    let states: Vec<(&str, &str)> = machines
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["host"].as_str().unwrap(), m["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            (B, "online"),
            (A, "online"),
            ("down", "stopped"),
            ("gone", "offline"),
            ("quiet", "online")
        ]
    );
    assert_eq!(machines[1]["record"]["version"], "0.1.0");
    assert_eq!(
        (machines[1]["sessions_live"].as_u64(), machines[1]["waiting"].as_u64()),
        (Some(1), Some(1))
    );
    // The daemon's count beside the stream's where they differ ("down" says 1 live session
    // and its stream holds none live), and why.
    let o = fleet(&sandbox, &url, &["machines"], &[]);
    let (out, _) = text(&o);
    let down = out.lines().find(|l| l.starts_with("down")).unwrap();
    assert!(down.contains("1 (0 in the stream)"), "{out}");
    let on_a = out.lines().find(|l| l.starts_with(A)).unwrap();
    assert!(!on_a.contains("in the stream"), "the same count said once: {out}");
    assert!(out.contains("began before it published here"), "{out}");
    let o = fleet(&sandbox, &url, &["machines", "--state", "offline"], &[]);
    let (out, _) = text(&o);
    assert!(
        out.starts_with("HOST") && out.contains("gone") && !out.contains(A),
        "{out}"
    );

    // Sessions: one per (host, session), folded once despite the redelivery.
    let sessions = json_of(&sandbox, &url, &["sessions", "--json"]);
    let list = sessions.as_array().unwrap();
    assert_eq!(list.len(), 5, "{sessions:#}");
    let s1 = list.iter().find(|s| s["session"] == S1).unwrap();
    assert_eq!(
        (s1["host"].as_str(), s1["state"].as_str(), s1["runs"].as_u64()),
        (Some(A), Some("waiting"), Some(1))
    );
    assert_eq!(
        (s1["workspace"].as_str(), s1["model"].as_str()),
        (Some("shop"), Some("m-large"))
    );
    let on_b = json_of(&sandbox, &url, &["sessions", "--json", "--host", B]);
    assert_eq!(on_b.as_array().unwrap().len(), 2);
    let ended = json_of(&sandbox, &url, &["sessions", "--json", "--state", "ended"]);
    assert_eq!(ended[0]["session"], S3);
    let table = text(&fleet(&sandbox, &url, &["sessions", "--workspace", "build"], &[])).0;
    assert!(
        table.starts_with("HOST") && table.contains(B) && table.contains(S2) && !table.contains(S1),
        "{table}"
    );

    // One session's detail, fetched from its subject on demand: that host's Events only.
    let shown = json_of(&sandbox, &url, &["show", S1, "--host", A, "--json"]);
    assert_eq!(
        (shown["host"].as_str(), shown["summary"]["session"].as_str()),
        (Some(A), Some(S1))
    );
    let kinds: Vec<&str> = shown["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"run") && kinds.contains(&"approval"), "{shown:#}");
    let o = fleet(&sandbox, &url, &["show", "no-such-session"], &[]);
    assert!(
        !o.status.success() && text(&o).1.contains("no session matches"),
        "{o:?}"
    );

    // Approvals: both machines', with their host.
    let approvals = json_of(&sandbox, &url, &["approvals", "--json"]);
    let hosts: Vec<&str> = approvals
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts.len(), 2);
    assert!(hosts.contains(&A) && hosts.contains(&B));
    let a_short = approvals.as_array().unwrap().iter().find(|a| a["host"] == A).unwrap()["short"]
        .as_str()
        .unwrap()
        .to_string();

    // Usage by host and by model.
    let usage = json_of(&sandbox, &url, &["usage", "host", "--json"]);
    let rows = usage["rows"].as_array().unwrap();
    let row = |key: &str| rows.iter().find(|r| r["key"] == key).unwrap().clone();
    assert_eq!(
        (row(A)["input_tokens"].as_u64(), row(A)["cost"].as_f64()),
        (Some(1000), Some(0.25))
    );
    assert_eq!(
        (row(B)["total_tokens"].as_u64(), row(B)["unpriced_runs"].as_u64()),
        (Some(510), Some(1))
    );
    assert_eq!(usage["totals"]["total_tokens"], 1520);
    let by_model = json_of(&sandbox, &url, &["usage", "model", "--json", "--model", "m-small"]);
    assert_eq!(by_model["rows"][0]["key"], "m-small");
    assert_eq!(by_model["rows"].as_array().unwrap().len(), 1);

    // A console started again shows the same view.
    assert_eq!(json_of(&sandbox, &url, &["sessions", "--json"]), sessions);

    // Commands: by short id to the owning machine only.
    let responders = Responders::start(&url, None, &[(A, true), (B, false)]);
    let o = fleet(&sandbox, &url, &["approve", &a_short], &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains(&format!("accepted: approve {a_short} on {A}")), "{out}");
    let heard = responders.heard();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].0, A);
    let command = &heard[0].1;
    assert_eq!(
        (command["type"].as_str(), command["session"].as_str()),
        (Some("control.attention.respond"), Some(S1))
    );
    assert!(command["subject"].as_str().unwrap().to_lowercase().ends_with(&a_short));
    assert_eq!(command["data"]["answer"]["option"], "approve");

    // Rejected by the machine: exit 1, the reason in words.
    let o = fleet(&sandbox, &url, &["cancel", "bbbbb"], &[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("rejected (refused): cancel the run of"), "{err}");
    assert_eq!(responders.heard()[1].0, B);

    // Not sent: an ambiguous id, a machine offline, a machine with nobody listening.
    for (args, needle) in [
        (&["cancel", "1796007203184"][..], "matches more than one session"),
        (&["send", "ddddd", "go on"], "machine gone is offline"),
        (&["cancel", "eeeee"], "no daemon answers on aep-control.quiet"),
        (&["approve", "zzzzzz"], "no pending approval matches"),
    ] {
        let o = fleet(&sandbox, &url, args, &[]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(responders.heard().len(), 2, "nothing more was sent");
}

/// A NATS configuration with the fleet's roles: a viewer who reads but may not command, an
/// operator who may (the daemons' own user is docs/fleet.md's).
const PERMISSIONS: &str = r#"
authorization {
  users = [
    { user: viewer, password: viewer, permissions: { publish: { deny: ["aep-control.>"] } } }
    { user: operator, password: operator }
  ]
}
"#;

#[test]
fn the_servers_permissions_refuse_a_viewers_command_in_words_and_missing_things_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nats.conf");
    std::fs::write(&conf, PERMISSIONS).unwrap();
    let server = Server::start(&["-c", conf.to_str().unwrap()]);
    let url = server.url();
    let sandbox = Sandbox::new();
    let as_user = |u: &'static str| [("AEP_NATS_USER", u), ("AEP_NATS_PASSWORD", u)];

    // No stream yet: said, with what to check.
    let o = fleet(&sandbox, &url, &["sessions"], &as_user("viewer"));
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no JetStream stream \"AEP\""), "{err}");

    runtime().block_on(async {
        let js = jetstream::new(connect(&url, Some("operator")).await);
        let mut ask = event(A, S1, 1, "attention.requested", json!({"kind": "tool"}));
        ask["subject"] = json!("execute_command");
        publish(&js, &[ask]).await;
        record(&js, A, "running", Duration::from_secs(1)).await;
    });
    let responders = Responders::start(&url, Some("operator"), &[(A, true)]);
    let short = aep_cline::views::summary::short_id(event(A, S1, 1, "x", json!({}))["id"].as_str().unwrap());

    let o = fleet(&sandbox, &url, &["approve", &short], &as_user("viewer"));
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the NATS server refused to let this user command dev-1") && err.contains("Permissions Violation"),
        "{err}"
    );
    assert!(responders.heard().is_empty());
    let o = fleet(&sandbox, &url, &["approve", &short], &as_user("operator"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    assert_eq!(responders.heard().len(), 1);

    // Bad credentials, and no server at all.
    let o = fleet(
        &sandbox,
        &url,
        &["machines"],
        &[("AEP_NATS_USER", "viewer"), ("AEP_NATS_PASSWORD", "wrong")],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("refused the credentials"), "{err}");
    let nobody = format!("nats://127.0.0.1:{}", free_port());
    let o = fleet(&sandbox, &nobody, &["machines"], &[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("cannot connect to NATS") && err.contains("is nats-server running"),
        "{err}"
    );
    let o = std::process::Command::new(BIN)
        .args(["fleet", "machines"])
        .env_remove("AEP_NATS_URL")
        .output()
        .unwrap();
    assert!(text(&o).1.contains("set AEP_NATS_URL"), "{}", text(&o).1);
}

/// [`fleet_events`] in the stream, A and B heard 2 s ago and "gone" 2 min ago in the bucket,
/// and `fleet serve` caught up on them.
fn serve_the_fleet(rt: &tokio::runtime::Runtime, url: &str) -> (jetstream::Context, Console) {
    let js = rt.block_on(async {
        let js = jetstream::new(connect(url, None).await);
        publish(&js, &fleet_events()).await;
        record(&js, A, "running", Duration::from_secs(2)).await;
        record(&js, B, "running", Duration::from_secs(2)).await;
        record(&js, "gone", "running", Duration::from_secs(120)).await;
        js
    });
    (js, Console::start(url))
}

#[test]
fn the_console_page_signs_in_once_follows_the_stream_and_answers_through_the_owning_host() {
    let server = Server::start(&[]);
    let url = server.url();
    let rt = runtime();
    let (js, console) = serve_the_fleet(&rt, &url);

    // Without the sign-in: the page is the sign-in page, the API refuses.
    let (status, _, body) = console.get("/", "");
    assert_eq!(status, 401);
    assert!(body.contains("aep-cline fleet serve"), "{body}");
    for path in ["/api/machines", "/api/sessions", "/api/approvals"] {
        assert_eq!(console.get(path, "").0, 401, "{path}");
        assert_eq!(console.get(path, "aep_cline_fleet=guess").0, 401, "{path}");
    }
    // A wrong code, then the link: once.
    let path = console
        .link
        .trim_start_matches(&format!("http://{}", console.addr))
        .to_string();
    assert_eq!(console.get("/login?code=nope", "").0, 403);
    let (status, head, _) = console.get(&path, "");
    assert_eq!(status, 303, "{head}");
    let set = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("{head}"));
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    let cookie = set.split(';').next().unwrap().to_string();
    assert_eq!(console.get(&path, "").0, 403, "the link works once");
    let (status, _, page) = console.get("/", &cookie);
    assert_eq!(status, 200);
    assert!(page.contains("/assets/fleet.js"), "{page}");

    // What the stream and the bucket hold.
    let machines = console.api("/api/machines", &cookie);
    let states: Vec<(&str, &str)> = machines["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["host"].as_str().unwrap(), m["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [(B, "online"), (A, "online"), ("gone", "offline"), ("quiet", "unknown")]
    );
    assert_eq!(machines["machines"][1]["record"]["version"], "0.1.0");
    let approvals = console.api("/api/approvals", &cookie);
    let list = approvals["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{approvals:#}");
    // /metrics needs no sign-in and names no host: the same fleet, counted.
    let (status, _, metrics) = console.get("/metrics", "");
    assert_eq!(status, 200, "{metrics}");
    for line in [
        "aep_cline_fleet_machines{state=\"online\"} 2",
        "aep_cline_fleet_machines{state=\"offline\"} 1",
        "aep_cline_fleet_machines{state=\"unknown\"} 1",
        "aep_cline_fleet_approvals_waiting 2",
        "aep_cline_fleet_behind_events 0",
    ] {
        assert!(metrics.contains(&format!("{line}\n")), "{line}: {metrics}");
    }
    assert!(!metrics.contains(A) && !metrics.contains("gone"), "{metrics}");
    let on_a = list.iter().find(|a| a["host"] == A).unwrap().clone();
    assert_eq!(
        (on_a["session"].as_str(), on_a["tool"].as_str()),
        (Some(S1), Some("execute_command"))
    );
    assert_eq!(
        console.api(&format!("/api/approvals?host={B}"), &cookie)["approvals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let on_b = console.api(&format!("/api/sessions?host={B}"), &cookie);
    assert_eq!((on_b["total"].as_u64(), on_b["matching"].as_u64()), (Some(5), Some(2)));

    // A session's timeline, read from its subject when asked; one not in the view, in words.
    let t = console.api(&format!("/api/timeline?host={A}&session={S1}"), &cookie);
    let kinds: Vec<(&str, &str)> = t["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [("session", "started"), ("run", "finished"), ("approval", "pending")],
        "{t:#}"
    );
    assert_eq!(
        (t["host"].as_str(), t["summary"]["session"].as_str()),
        (Some(A), Some(S1))
    );
    let (status, _, said) = console.get(&format!("/api/timeline?host={B}&session={S1}"), &cookie);
    assert_eq!(status, 404, "{said}");
    assert!(said.contains("no session"), "{said}");
    assert_eq!(console.get(&format!("/api/timeline?host={A}&session={S1}"), "").0, 401);

    // Followed: an Event and a machine record written after the start show up.
    const S6: &str = "1796007203184_fffff";
    rt.block_on(async {
        let mut ask = event(
            "late",
            S6,
            2,
            "attention.requested",
            json!({"kind": "tool", "respond_via": ["control"]}),
        );
        ask["subject"] = json!("read_file");
        publish(&js, &[event("late", S6, 1, "session.started", json!({})), ask]).await;
        record(&js, "late", "running", Duration::from_secs(0)).await;
    });
    console.wait_for("/api/approvals", &cookie, |v| {
        v["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["host"] == "late" && a["session"] == S6)
    });
    console.wait_for("/api/machines", &cookie, |v| {
        v["machines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["host"] == "late" && m["status"] == "online")
    });

    // Approve: to the owning host's responder, its ack returned; a POST needs the page's Origin.
    let responders = Responders::start(&url, None, &[(A, true), (B, false)]);
    let origin = format!("http://{}", console.addr);
    let body = json!({"host": A, "session": S1, "action": "approve", "request": on_a["id"]}).to_string();
    let post = |headers: &[(&str, &str)]| request(&console.addr, "POST", "/api/act", headers, body.as_bytes());
    let json_type = ("Content-Type", "application/json");
    let (status, _, refused) = post(&[("Cookie", &cookie), json_type]);
    assert_eq!(status, 403, "{refused}");
    let (status, _, refused) = post(&[("Cookie", &cookie), json_type, ("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{refused}");
    assert_eq!(post(&[json_type, ("Origin", &origin)]).0, 401);
    let signed = [("Cookie", cookie.as_str()), ("Origin", origin.as_str())];
    assert_eq!(post(&signed).0, 415, "not JSON");
    for bad in [
        "{",
        r#"{"host": "dev-1", "session": "s", "action": "explode"}"#,
        r#"{"action": "approve"}"#,
    ] {
        let (status, _, said) = request(
            &console.addr,
            "POST",
            "/api/act",
            &[signed[0], signed[1], json_type],
            bad.as_bytes(),
        );
        assert_eq!(status, 400, "{bad}: {said}");
        assert!(said.contains("want {host, session, action"), "{said}");
    }
    assert!(responders.heard().is_empty());
    let (status, _, answer) = post(&[("Cookie", &cookie), json_type, ("Origin", &origin)]);
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (answer["host"].as_str(), answer["ack"]["type"].as_str()),
        (Some(A), Some("control.accepted"))
    );
    let heard = responders.heard();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].0, A);
    assert_eq!(
        (
            heard[0].1["type"].as_str(),
            heard[0].1["subject"].as_str(),
            heard[0].1["data"]["answer"]["option"].as_str()
        ),
        (Some("control.attention.respond"), on_a["id"].as_str(), Some("approve"))
    );
    assert_eq!(answer["command"], heard[0].1["id"]);

    // Not sent, in words: an approval that is not pending, a machine offline.
    let (status, _, said) = request(
        &console.addr,
        "POST",
        "/api/act",
        &[("Cookie", &cookie), json_type, ("Origin", &origin)],
        json!({"host": B, "session": S1, "action": "deny", "request": on_a["id"]})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(status, 409, "{said}");
    assert!(said.contains("no pending approval"), "{said}");
    let (status, _, said) = request(
        &console.addr,
        "POST",
        "/api/act",
        &[("Cookie", &cookie), json_type, ("Origin", &origin)],
        json!({"host": "gone", "session": S4, "action": "cancel"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(status, 409, "{said}");
    assert!(said.contains("machine gone is offline"), "{said}");
    assert_eq!(responders.heard().len(), 1, "nothing more was sent");

    // A cancel the owning daemon accepts says what it did, read from the stream: the run's end
    // when it comes (here a run.cancelled published once the command was heard) ...
    let cancel = json!({"host": A, "session": S1, "action": "cancel"}).to_string();
    let ends = {
        let (heard, js) = (responders.heard.clone(), js.clone());
        let handle = rt.handle().clone();
        std::thread::spawn(move || {
            wait_until("the cancel heard", Duration::from_secs(20), || {
                (heard.lock().unwrap().len() == 2).then_some(())
            });
            handle.block_on(publish(
                &js,
                &[event(A, S1, 900, "run.cancelled", json!({"by": "control"}))],
            ));
        })
    };
    let (status, _, said) = request(
        &console.addr,
        "POST",
        "/api/act",
        &[("Cookie", &cookie), json_type, ("Origin", &origin)],
        cancel.as_bytes(),
    );
    ends.join().unwrap();
    let said: Value = serde_json::from_str(&said).unwrap();
    assert_eq!(
        (status, said["effect"].as_str()),
        (200, Some("run.cancelled")),
        "{said}"
    );
    // ... and, when nothing ends it, that nothing happened and what to do, never a bare "accepted".
    let (status, _, said) = request(
        &console.addr,
        "POST",
        "/api/act",
        &[("Cookie", &cookie), json_type, ("Origin", &origin)],
        cancel.as_bytes(),
    );
    let said: Value = serde_json::from_str(&said).unwrap();
    assert_eq!((status, said["effect"].as_str()), (200, Some("nothing")), "{said}");
    let detail = said["detail"].as_str().unwrap();
    assert!(
        detail.contains("nothing happened") && detail.contains(&format!("aep-cline end {S1}")),
        "{detail}"
    );
}

/// Clicks the button at `xpath`; the page redraws every few seconds, so a button gone stale is
/// found again.
async fn click(browser: &Browser, xpath: &str) {
    for tries in 1.. {
        let clicked = match browser.client.find(Locator::XPath(xpath)).await {
            Ok(button) => button.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => break,
            Err(e) if tries >= 5 => panic!("cannot click {xpath}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The page in headless Chromium: the sign-in link, the approval and the machines drawn from
/// the stream and the bucket, a session's timeline drawn when it is clicked, Approve clicked, the
/// owning host's responder asked and its ack shown.
#[test]
fn the_console_page_in_a_browser_approves_through_the_owning_host_and_shows_its_ack() {
    let server = Server::start(&[]);
    let url = server.url();
    let rt = runtime();
    let (_js, console) = serve_the_fleet(&rt, &url);
    let responders = Responders::start(&url, None, &[(A, true), (B, false)]);
    let request = event(A, S1, 4, "attention.requested", json!({}))["id"].clone();
    rt.block_on(async {
        let browser = Browser::start().await;
        browser.client.goto(&console.link).await.unwrap();
        let shown = browser
            .until(
                "the approval on dev-1 and the machines",
                30,
                &format!(
                    "const ask = [...document.querySelectorAll('#approval-list li')]
                       .find(li => li.textContent.startsWith('{A} ·') && li.textContent.includes('session {S1}'));
                     const machines = [...document.querySelectorAll('#machine-rows tr')]
                       .map(tr => [tr.cells[0].textContent, tr.cells[1].textContent]);
                     return ask && ask.querySelector('button.approve') && machines.length ? machines : null"
                ),
            )
            .await;
        assert_eq!(
            shown,
            json!([[B, "online"], [A, "online"], ["gone", "offline"], ["quiet", "unknown"]])
        );
        assert_eq!(browser.client.current_url().await.unwrap().path(), "/");
        assert!(responders.heard().is_empty());
        // Each session's cost, written as the dashboard writes money.
        let costs = browser
            .until(
                "the sessions' costs",
                30,
                "const head = [...document.getElementById('session-rows').closest('table').querySelectorAll('thead th')].map(th => th.textContent);
                 const at = head.indexOf('Cost');
                 const rows = [...document.querySelectorAll('#session-rows tr')]
                   .map(tr => [tr.cells[0].textContent, tr.cells[1].textContent, tr.cells[at].textContent]);
                 return at >= 0 && rows.length ? rows : null",
            )
            .await;
        let cost_of = |host: &str, session: &str| {
            costs.as_array().unwrap().iter().find(|r| r[0] == host && r[1] == session).map(|r| r[2].clone())
        };
        assert_eq!(cost_of(A, S1), Some(json!("$0.25")), "{costs}");
        assert_eq!(cost_of(B, S2), Some(json!("no price")), "tokens without a price: {costs}");

        // A session clicked: its timeline drawn.
        let session = format!("//tr[td[1]='{A}']//button[.='{S1}']");
        browser
            .client
            .find(Locator::XPath(&session))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let drawn = browser
            .until(
                "the session's timeline",
                30,
                "const items = [...document.querySelectorAll('#timeline li')].map(li => li.textContent);
                 return items.length && !document.getElementById('detail').hidden ? items : null",
            )
            .await;
        let drawn: Vec<&str> = drawn.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(drawn.len(), 3, "{drawn:?}");
        assert!(drawn[2].contains("approval execute_command pending"), "{drawn:?}");

        let approve = format!("//li[div[@class='what' and starts-with(., '{A} ·')]]//button[@class='approve']");
        click(&browser, &approve).await;
        let said = browser
            .until(
                "the ack on the page",
                30,
                &format!(
                    "return [...document.querySelectorAll('#feedback p.ok')].map(p => p.textContent)
                       .find(t => t.startsWith('approve') && t.endsWith('on {A}: accepted'))"
                ),
            )
            .await;
        assert!(said.as_str().is_some(), "{said}");
        browser.close().await;
    });
    let heard = responders.heard();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].0, A);
    assert_eq!(
        (
            heard[0].1["type"].as_str(),
            &heard[0].1["session"],
            &heard[0].1["subject"],
            heard[0].1["data"]["answer"]["option"].as_str()
        ),
        (Some("control.attention.respond"), &json!(S1), &request, Some("approve"))
    );
}

/// `/api/position`: the stream's last sequence, the last one folded in and the difference, right
/// after the catch-up and after Events published while the console follows.
#[test]
fn the_console_says_how_far_it_has_applied_the_stream() {
    let server = Server::start(&[]);
    let url = server.url();
    let rt = runtime();
    let (js, console) = serve_the_fleet(&rt, &url);
    let cookie = console.sign_in();
    assert_eq!(console.get("/api/position", "").0, 401);
    let caught_up = fleet_events().len() as u64;
    let p = console.api("/api/position", &cookie);
    assert_eq!(
        (
            p["stream"].as_str(),
            p["stream_last"].as_u64(),
            p["applied"].as_u64(),
            p["behind"].as_u64()
        ),
        (Some("AEP"), Some(caught_up), Some(caught_up), Some(0)),
        "{p:#}"
    );

    // Live: 300 Events of 30 new sessions on 3 hosts, published while it follows.
    let live: Vec<Value> = (0..300u64)
        .map(|n| {
            let session = format!("1796007203184_live{:02}", n % 30);
            event(
                &format!("live-{}", n % 3),
                &session,
                n / 30 + 1,
                "tool.requested",
                json!({}),
            )
        })
        .collect();
    rt.block_on(publish(&js, &live));
    let total = caught_up + 300;
    let p = console.wait_for("/api/position", &cookie, |p| p["applied"] == total);
    assert_eq!(
        (
            p["stream_last"].as_u64(),
            p["behind"].as_u64(),
            p["counts"]["messages"].as_u64()
        ),
        (Some(total), Some(0), Some(total)),
        "{p:#}"
    );
    let sessions = console.api("/api/sessions", &cookie);
    assert_eq!(sessions["total"].as_u64(), Some(5 + 30), "{sessions:#}");
}

/// `fleet serve` across a restart of nats-server (SIGTERM, then SIGKILL; same port and store):
/// `/api/position` comes back, Events published after each restart appear as new sessions,
/// and the console reads on from where it was (every message read once: no replay from the
/// stream's first message).
#[test]
fn the_console_comes_back_after_the_server_restarts_and_reads_on_from_its_position() {
    let mut server = Server::start(&[]);
    let url = server.url();
    let rt = runtime();
    let (_, console) = serve_the_fleet(&rt, &url);
    let cookie = console.sign_in();
    let mut total = fleet_events().len() as u64;
    for (round, stop) in [
        ("sigterm", Server::terminate as fn(&mut Server)),
        ("sigkill", Server::kill),
    ] {
        stop(&mut server);
        wait_until(
            &format!("/api/position to fail while the server is down ({round})"),
            Duration::from_secs(30),
            || (console.get("/api/position", &cookie).0 == 502).then_some(()),
        );
        server.start_again();
        let session = format!("1796007203184_after{round}");
        let after: Vec<Value> = (1..=3u64)
            .map(|seq| event(A, &session, seq, "tool.requested", json!({})))
            .collect();
        // A fresh client: the test's own gave up on the old server.
        rt.block_on(async { publish(&jetstream::new(connect(&url, None).await), &after).await });
        total += 3;
        let p = wait_until(
            &format!("the console to read on after the {round} restart"),
            Duration::from_secs(60),
            || {
                let (status, _, body) = console.get("/api/position", &cookie);
                let p: Value = serde_json::from_str(&body).ok()?;
                (status == 200 && p["applied"] == total).then_some(p)
            },
        );
        assert_eq!(
            (
                p["stream_last"].as_u64(),
                p["behind"].as_u64(),
                p["counts"]["messages"].as_u64()
            ),
            (Some(total), Some(0), Some(total)),
            "every message read once, none again from the start ({round}): {p:#}"
        );
        let sessions = console.api("/api/sessions", &cookie);
        assert!(
            sessions.to_string().contains(&session),
            "the session published after the {round} restart is listed: {sessions:#}"
        );
    }
}

/// The checkpoint of stream AEP in the console's bucket, once there is one.
async fn checkpoint_of(js: &jetstream::Context) -> Option<checkpoint::Checkpoint> {
    let bucket = js.get_key_value(machine::FLEET_BUCKET).await.ok()?;
    let value = bucket.get(checkpoint::key("AEP")).await.unwrap()?;
    Some(checkpoint::decode(&value).unwrap())
}

/// Puts `value` as stream AEP's checkpoint, over whatever is there.
async fn put_checkpoint(js: &jetstream::Context, value: Vec<u8>) {
    let bucket = js.get_key_value(machine::FLEET_BUCKET).await.unwrap();
    bucket.put(checkpoint::key("AEP"), value.into()).await.unwrap();
}

/// The sessions `fleet sessions --json --all` lists, as (host, session); and its stderr.
fn listed(sandbox: &Sandbox, url: &str) -> (Vec<(String, String)>, String) {
    let o = fleet(sandbox, url, &["sessions", "--json", "--all"], &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let all: Value = serde_json::from_str(&out).unwrap();
    let mut pairs: Vec<(String, String)> = all
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
    pairs.sort();
    (pairs, err)
}

/// `fleet serve` checkpoints its view; a console started later shows the same view from it
/// even once the stream's messages are purged (so it did not replay them) and reads on from
/// the sequence after it; an older checkpoint never replaces a newer one; one that does not
/// read, or covers more than the stream holds, is said and the stream replayed.
#[test]
fn a_console_starts_from_the_checkpoint_and_a_bad_or_older_one_is_not_used() {
    let server = Server::start(&[]);
    let url = server.url();
    let rt = runtime();
    let sandbox = Sandbox::new();
    let (js, console) = serve_the_fleet(&rt, &url);
    let caught_up = fleet_events().len() as u64;
    let written = wait_until_seen(
        "the checkpoint of the caught-up stream",
        Duration::from_secs(60),
        || match rt.block_on(checkpoint_of(&js)) {
            Some(c) if c.seq == caught_up => Ok(c),
            other => Err(format!("no checkpoint: {other:?}")),
        },
    );
    let (replayed, _) = listed(&sandbox, &url);
    assert_eq!(replayed.len(), 5, "{replayed:?}");
    drop(console);

    rt.block_on(async { js.get_stream("AEP").await.unwrap().purge().await.unwrap() });
    let (from_checkpoint, err) = listed(&sandbox, &url);
    assert_eq!(from_checkpoint, replayed, "{err}");
    assert!(err.is_empty(), "{err}");
    let usage = json_of(&sandbox, &url, &["usage", "host", "--json"]);
    let on_a = usage["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == A)
        .cloned();
    assert_eq!(
        on_a.map(|r| (r["input_tokens"].as_u64(), r["cost"].as_f64())),
        Some((Some(1000), Some(0.25))),
        "{usage:#}"
    );

    // An Event after it is read on top.
    const S6: &str = "1796007203184_fffff";
    rt.block_on(publish(&js, &[event("late", S6, 1, "session.started", json!({}))]));
    let (on_top, _) = listed(&sandbox, &url);
    assert_eq!(on_top.len(), 6, "{on_top:?}");
    assert!(on_top.contains(&("late".into(), S6.into())));

    // An older checkpoint (another console behind this one) does not replace it.
    let mut older = aep_cline::fleet::View::new();
    older.stream_seq = 3;
    let value = checkpoint::encode(older.save(), 3, written.stream_created.clone()).unwrap();
    let wrote = rt.block_on(checkpoint::save(&js, "AEP", 3, value)).unwrap();
    assert_eq!(wrote, checkpoint::Wrote::Newer(caught_up));
    assert_eq!(rt.block_on(checkpoint_of(&js)).unwrap().seq, caught_up);

    // Bad ones: said, and the stream (now S6's Event only) replayed.
    let mut past = aep_cline::fleet::View::new();
    past.stream_seq = 1000;
    let past = checkpoint::encode(past.save(), 1000, written.stream_created.clone()).unwrap();
    let other = checkpoint::encode(older.save(), 3, "another time".into()).unwrap();
    for (value, why) in [
        (b"garbage".to_vec(), "it is not gzip"),
        (past, "covers the stream up to sequence 1000, past its last (15)"),
        (other, "created at another time"),
    ] {
        rt.block_on(put_checkpoint(&js, value));
        let (sessions, err) = listed(&sandbox, &url);
        assert_eq!(sessions, [("late".to_string(), S6.to_string())], "{why}: {err}");
        assert!(
            err.contains("not using the checkpoint in the bucket aep-cline-fleet") && err.contains(why),
            "{why}: {err}"
        );
    }
}

#[test]
fn the_console_refuses_to_serve_beyond_loopback_without_a_tls_proxy() {
    for (args, needle) in [
        (
            &["--listen", "0.0.0.0:0"][..],
            "refusing to serve the console on 0.0.0.0:0: it is not a loopback address",
        ),
        (
            &["--listen", "0.0.0.0:0", "--behind-proxy", "http://fleet.example"],
            "give the https:// URL",
        ),
    ] {
        let mut all = vec!["fleet", "serve"];
        all.extend_from_slice(args);
        let o = std::process::Command::new(BIN)
            .args(&all)
            .env("AEP_NATS_URL", "nats://127.0.0.1:1")
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(needle) && err.contains("--behind-proxy"), "{err}");
    }
    // With the proxy named, it goes on (and here finds no server).
    let o = std::process::Command::new(BIN)
        .args([
            "fleet",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--behind-proxy",
            "https://fleet.example",
        ])
        .env("AEP_NATS_URL", format!("nats://127.0.0.1:{}", free_port()))
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is nats-server running") && !err.contains("refusing"),
        "{err}"
    );
}
