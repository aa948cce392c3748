//! The daemon's side of the fleet (docs/fleet.md, "Heartbeats and control over NATS"), through
//! the real binary against a real `nats-server` with JetStream: the machine record in the
//! bucket (written, updated, `stopped` after SIGTERM, left to age after SIGKILL, a dead server
//! counted and caught up with, a shutdown that never hangs on it), and control over NATS under
//! the server's own permissions (daemons, an operator for one host, a read-only viewer): the
//! operator's commands decided by the intake with the ack as the reply, the viewer's and the
//! operator's for another host refused by the server before any daemon sees them, a host with
//! control off answering nobody.

use crate::nats::{free_port, health, runtime, vendor_hook, Server, SESSION, WAIT};
use crate::support;
use support::nats_server::fleet_conf_file;
use support::wait::{wait_until, wait_until_seen, wait_until_seen_async, wait_until_seen_every};

use aep_cline::nats_contract::machine::{self, Machine};
use async_nats::jetstream;
use serde_json::{json, Value};
use std::time::Duration;
use support::daemon::Sandbox;
use support::endpoint::command;

/// A host's record in the bucket and its revision; `None` while there is none.
fn record(url_user: (&str, Option<(&str, &str)>), host: &str) -> Option<(Machine, u64)> {
    runtime().block_on(async {
        let client = connect(url_user.0, url_user.1, None).await.ok()?;
        let kv = jetstream::new(client).get_key_value(machine::BUCKET).await.ok()?;
        let entry = kv.entry(machine::key(host)).await.ok()??;
        Some((serde_json::from_slice(&entry.value).unwrap(), entry.revision))
    })
}

fn wait_record(
    url_user: (&str, Option<(&str, &str)>),
    host: &str,
    what: &str,
    done: impl Fn(&Machine, u64) -> bool,
) -> (Machine, u64) {
    // Each look connects anew: every 200 ms.
    wait_until_seen_every(what, WAIT, Duration::from_millis(200), || {
        match record(url_user, host) {
            Some((m, rev)) if done(&m, rev) => Ok((m, rev)),
            now => Err(format!("the record is {now:?}")),
        }
    })
}

/// A client, as `user` when given; the server's errors (permission violations) go to `errors`.
async fn connect(
    url: &str,
    user: Option<(&str, &str)>,
    errors: Option<std::sync::mpsc::Sender<String>>,
) -> Result<async_nats::Client, async_nats::ConnectError> {
    let options = match user {
        Some((u, p)) => async_nats::ConnectOptions::with_user_and_password(u.into(), p.into()),
        None => async_nats::ConnectOptions::new(),
    };
    options
        .event_callback(move |event| {
            let errors = errors.clone();
            async move {
                if let (Some(errors), async_nats::Event::ServerError(e)) = (errors, &event) {
                    let _ = errors.send(e.to_string());
                }
            }
        })
        .connect(url)
        .await
}

#[test]
fn the_machine_record_is_written_updated_said_stopped_after_sigterm_and_left_to_age_after_a_kill() {
    let server = Server::start(&[]);
    let url = server.url();
    let a = Sandbox::new()
        .with_env("AEP_NATS_URL", &url)
        .with_env("AEP_HOST", "host-a")
        .with_env("RUST_LOG", "warn");
    // A global install's record, as `install-hooks` leaves it: one folder with our hook file,
    // one emptied since.
    let (ours, emptied) = (a.root.path().join("hooks"), a.root.path().join("emptied"));
    std::fs::create_dir_all(&ours).unwrap();
    std::fs::create_dir_all(&emptied).unwrap();
    std::fs::create_dir_all(&a.state_dir).unwrap();
    std::fs::write(
        ours.join("TaskStart"),
        "#!/bin/sh\n# aep-cline-hook: written by `aep-cline install-hooks`\nexec x hook\n",
    )
    .unwrap();
    std::fs::write(
        a.state_dir.join("hook-folders"),
        format!("{}\n{}\n", ours.display(), emptied.display()),
    )
    .unwrap();
    let daemon = a.start();
    vendor_hook(&daemon, SESSION, 0);
    let (first, rev) = wait_record((&url, None), "host-a", "the record appears", |m, _| {
        m.state == "running"
    });
    assert_eq!(first.host, "host-a");
    assert_eq!(first.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(first.hooks, vec![ours.display().to_string()]);
    assert!(!first.control, "control over NATS is off by default");
    assert_eq!(first.hub, None, "the hub tap is off");
    assert_eq!(first.sinks["relay"], "off");
    assert_eq!(first.spool, machine::Spool::default());
    // It is written again, later, and says the sink is connected once it is.
    let (later, _) = wait_record((&url, None), "host-a", "the record is written again", |m, r| {
        r > rev && m.time > first.time && m.sinks["nats"] == "ok"
    });
    assert_eq!(later.started, first.started);
    let h = health(&daemon);
    assert!(h["nats"]["heartbeat"]["writes"].as_u64().unwrap() >= 2, "{}", h["nats"]);
    assert_eq!(h["nats"]["heartbeat"]["failures"], 0, "{}", h["nats"]);
    assert!(h["nats"]["control"].is_null(), "{}", h["nats"]);

    let (status, _) = daemon.stop();
    assert!(status.success());
    let (stopped, _) = record((&url, None), "host-a").expect("the last record");
    assert_eq!(stopped.state, "stopped", "{stopped:?}");
    assert!(stopped.time >= later.time);

    // A daemon killed writes nothing more: its record stays `running` and ages.
    let b = Sandbox::new()
        .with_env("AEP_NATS_URL", &url)
        .with_env("AEP_HOST", "host-b")
        .with_env("RUST_LOG", "warn");
    let mut killed = b.start();
    // A living witness beside it: its beats show the time in which the killed one wrote nothing.
    let w = Sandbox::new()
        .with_env("AEP_NATS_URL", &url)
        .with_env("AEP_HOST", "host-w")
        .with_env("RUST_LOG", "warn");
    let witness = w.start();
    wait_record((&url, None), "host-b", "host-b's record", |m, _| m.state == "running");
    wait_record((&url, None), "host-w", "the witness's record", |m, _| {
        m.state == "running"
    });
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let (last, rev) = record((&url, None), "host-b").unwrap();
    // Two beats' time, by three of the witness's writes after the kill.
    let mut beat = record((&url, None), "host-w").unwrap().0.time;
    for _ in 0..3 {
        let (m, _) = wait_record((&url, None), "host-w", "the witness's next beat", |m, _| m.time > beat);
        beat = m.time;
    }
    drop(witness);
    let (now, now_rev) = record((&url, None), "host-b").unwrap();
    assert_eq!(
        (now_rev, now.state.as_str(), now.time.as_str()),
        (rev, "running", last.time.as_str())
    );
}

#[test]
fn a_dead_server_is_counted_caught_up_with_and_never_holds_the_shutdown() {
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let sandbox = Sandbox::new()
        .with_env("AEP_NATS_URL", &url)
        .with_env("AEP_HOST", "host-a")
        .with_env("RUST_LOG", "warn");
    let daemon = sandbox.start();
    vendor_hook(&daemon, SESSION, 0);
    wait_until_seen("a heartbeat failure counted", WAIT, || {
        let nats = health(&daemon)["nats"].clone();
        match nats["heartbeat"]["failures"].as_u64().unwrap_or(0) {
            0 => Err(nats.to_string()),
            _ => Ok(()),
        }
    });
    let h = health(&daemon);
    assert!(
        h["nats"]["heartbeat"]["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot"),
        "{}",
        h["nats"]
    );

    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::spawn(port, dir.path().join("js"), Vec::new());
    wait_record((&url, None), "host-a", "the record once the server is up", |m, _| {
        m.state == "running"
    });
    wait_until_seen("the heartbeat's error cleared", WAIT, || {
        let nats = health(&daemon)["nats"].clone();
        if nats["heartbeat"]["last_error"].is_null() {
            Ok(())
        } else {
            Err(nats.to_string())
        }
    });

    // The server dies; a clean shutdown still ends (the last record is given a bounded try).
    server.kill();
    let mut daemon = daemon;
    daemon.signal("-TERM");
    let status = wait_until(
        "the daemon to stop with the server dead",
        Duration::from_secs(30),
        || daemon.child.try_wait().unwrap(),
    );
    assert!(status.success());
}

/// A daemon of `host` as docs/fleet.md's `user`, with control over NATS on or off.
fn fleet_daemon(url: &str, dir: &std::path::Path, host: &str, user: &str, control: bool) -> Sandbox {
    Sandbox::new()
        .with_env("AEP_NATS_URL", url)
        .with_env("AEP_NATS_USER", user)
        .with_env("AEP_NATS_PASSWORD", &format!("{user}-secret"))
        .with_env("AEP_HOST", host)
        .with_env("AEP_NATS_CONTROL", if control { "1" } else { "0" })
        .with_env("AEP_CLINE_HUB_CONTROL", if control { "1" } else { "0" })
        // No hub runs: the tap keeps looking for one, and ending a session needs none.
        .with_env("AEP_CLINE_HUB_DISCOVERY", dir.join("hub.json").to_str().unwrap())
        .with_env("AEP_MAX_EVENT", "65536")
        .with_env("RUST_LOG", "warn")
}

/// A command over NATS: the reply, or the request's error.
fn request(
    url: &str,
    user: (&str, &str),
    host: &str,
    payload: Vec<u8>,
    timeout: Duration,
) -> (Result<Value, async_nats::RequestErrorKind>, Vec<String>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let reply = runtime().block_on(async {
        let client = connect(url, Some(user), Some(tx)).await.unwrap();
        let asked = client
            .send_request(
                machine::control_subject(host),
                async_nats::Request::new()
                    .payload(payload.into())
                    .timeout(Some(timeout)),
            )
            .await;
        let reply = asked
            .map(|m| serde_json::from_slice(&m.payload).expect("the reply is JSON"))
            .map_err(|e| e.kind());
        // A refused publish is said by the server asynchronously: let it arrive.
        let _ = client.flush().await;
        reply
    });
    (reply, rx.try_iter().collect())
}

#[test]
fn commands_over_nats_go_through_the_intake_and_the_servers_permissions_decide_who_may_send_them() {
    let dir = tempfile::tempdir().unwrap();
    let conf = fleet_conf_file(dir.path());
    let server = Server::start(&["-c", conf.to_str().unwrap()]);
    let url = server.url();
    let host_box = |host: &str, user: &str, control: bool| fleet_daemon(&url, dir.path(), host, user, control);
    let (a, b) = (
        host_box("host-a", "daemon-a", true),
        host_box("host-b", "daemon-b", false),
    );
    let (daemon_a, daemon_b) = (a.start(), b.start());
    vendor_hook(&daemon_a, SESSION, 0);
    vendor_hook(&daemon_b, SESSION, 0);
    // The daemons' users may keep their records; the viewer reads them.
    let viewer = ("viewer", "viewer-secret");
    let (ra, _) = wait_record((&url, Some(viewer)), "host-a", "host-a's record", |m, _| m.control);
    let (rb, _) = wait_record((&url, Some(viewer)), "host-b", "host-b's record", |m, _| {
        m.state == "running"
    });
    assert!(ra.control && !rb.control, "{ra:?} {rb:?}");
    wait_until_seen("host-a to take commands over NATS", WAIT, || {
        let nats = health(&daemon_a)["nats"].clone();
        if nats["control"]["subscribed"] == true {
            Ok(())
        } else {
            Err(nats.to_string())
        }
    });

    let operator = ("operator", "operator-secret");
    let ask = |user, host, c: &Value| request(&url, user, host, c.to_string().into_bytes(), Duration::from_secs(20));
    // Accepted by the intake: ending the session (the hub control gate is on); the reply is
    // the ack Event the log holds.
    let end = command(
        "control.cancel",
        SESSION,
        json!({"scope": "session", "reason": "from the console"}),
    );
    let (reply, errors) = ask(operator, "host-a", &end);
    let ack = reply.expect("the ack as the reply");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        (ack["type"].as_str(), ack["cause"].as_str()),
        (Some("control.accepted"), end["id"].as_str())
    );
    let log = a.wait_log(SESSION, "the session ended by the command", WAIT, |l| {
        l.iter().any(|e| e["type"] == "session.ended")
    });
    assert!(log.contains(&ack), "the reply is the logged ack: {ack}");
    // The same command again: the recorded ack, byte for byte (AEP-0004 §3), decided once.
    let (again, _) = ask(operator, "host-a", &end);
    assert_eq!(again.unwrap(), ack);
    // Rejected by the intake: the session has ended.
    let cancel = command("control.cancel", SESSION, json!({"scope": "run"}));
    let (reply, _) = ask(operator, "host-a", &cancel);
    let nack = reply.unwrap();
    assert_eq!(
        (nack["type"].as_str(), nack["data"]["reason"].as_str()),
        (Some("control.rejected"), Some("refused"))
    );
    assert!(a.log(SESSION).contains(&nack));
    // No command at all: refused in words, nothing logged.
    let before = a.log(SESSION).len();
    for (payload, needle) in [
        (b"not json".to_vec(), "not JSON"),
        (b"[1]".to_vec(), "JSON object"),
        (vec![b' '; 100_000], "AEP_MAX_EVENT"),
        (
            json!({"type": "run.started", "id": "x", "source": "s", "session": SESSION})
                .to_string()
                .into_bytes(),
            "not a command",
        ),
        (
            command("control.cancel", "nobody", json!({})).to_string().into_bytes(),
            "host-a",
        ),
    ] {
        let (reply, _) = request(&url, operator, "host-a", payload, Duration::from_secs(20));
        let reply = reply.unwrap();
        assert_eq!(reply["type"], "control.rejected", "{reply}");
        assert!(
            reply["data"]["detail"].as_str().unwrap().contains(needle),
            "{needle}: {reply}"
        );
    }
    assert_eq!(
        a.log(SESSION).len(),
        before,
        "a request that is no command leaves no Event"
    );
    let seen = health(&daemon_a)["nats"]["control"].clone();
    assert_eq!(
        (
            seen["requests"].as_u64(),
            seen["acked"].as_u64(),
            seen["refused"].as_u64()
        ),
        (Some(8), Some(3), Some(5)),
        "{seen}"
    );

    // Refused by the server: the viewer may send no command, the operator none to host-b.
    for (user, host) in [(viewer, "host-a"), (operator, "host-b")] {
        let (reply, errors) = request(&url, user, host, end.to_string().into_bytes(), Duration::from_secs(3));
        assert_eq!(
            reply.unwrap_err(),
            async_nats::RequestErrorKind::TimedOut,
            "{user:?} → {host}"
        );
        let subject = machine::control_subject(host);
        assert!(
            errors
                .iter()
                .any(|e| e.contains("Permissions Violation for Publish") && e.contains(&subject)),
            "{user:?} → {host}: {errors:?}"
        );
    }
    assert_eq!(
        health(&daemon_a)["nats"]["control"]["requests"],
        8,
        "the daemon never saw the refused ones"
    );
    // Host-b takes no commands over NATS: nobody answers its subject.
    let (reply, _) = request(
        &url,
        ("operator-b", "operator-b-secret"),
        "host-b",
        end.to_string().into_bytes(),
        Duration::from_secs(20),
    );
    assert_eq!(reply.unwrap_err(), async_nats::RequestErrorKind::NoResponders);
    assert!(health(&daemon_b)["nats"]["control"].is_null());
    drop((daemon_a, daemon_b));

    // A daemon whose user may not take its host's commands nor keep its record (host-b's user
    // on host-c) says so in /healthz, in the server's words.
    let c = host_box("host-c", "daemon-b", true);
    let daemon_c = c.start();
    wait_until_seen("host-c's permission errors in /healthz", WAIT, || {
        let nats = health(&daemon_c)["nats"].clone();
        let said = |part: &str, what: &str| nats[part]["last_error"].as_str().is_some_and(|e| e.contains(what));
        if said("control", "Permissions Violation for Subscription")
            && nats["control"]["subscribed"] == false
            && said("heartbeat", "Permissions Violation for Publish")
        {
            Ok(())
        } else {
            Err(nats.to_string())
        }
    });
    assert!(
        record((&url, Some(viewer)), "host-c").is_none(),
        "no record under another host's key"
    );
}

/// A JetStream API request as `user`'s client: the server's JSON answer, or `None` when the
/// server refused the publish (no answer comes; the refusal is in the client's errors).
async fn js_api(client: &async_nats::Client, subject: &str, body: Value) -> Option<Value> {
    let asked = client
        .send_request(
            subject.to_string(),
            async_nats::Request::new()
                .payload(body.to_string().into())
                .timeout(Some(Duration::from_secs(2))),
        )
        .await;
    let reply = asked.ok().map(|m| serde_json::from_slice(&m.payload).unwrap());
    let _ = client.flush().await;
    reply
}

/// The campaign's attack with docs/fleet.md's permissions verbatim: daemon-a's user stores a
/// command inside its grant and the viewer has JetStream deliver it to host-b's control
/// subject (push consumers, acked and not): host-b refuses every delivery unanswered and
/// counts it, and nothing of the command reaches its session. The viewer may neither delete
/// nor take over another user's durable consumer, nor make a durable or a named one of its
/// own, and still reads the fleet (`fleet sessions` as the viewer); a command published
/// straight to a control subject is refused by the server as before.
#[test]
fn a_consumer_pointed_at_a_control_subject_delivers_no_command_and_a_viewer_touches_no_other_users_consumer() {
    let dir = tempfile::tempdir().unwrap();
    let conf = fleet_conf_file(dir.path());
    let server = Server::start(&["-c", conf.to_str().unwrap()]);
    let url = server.url();
    let b = fleet_daemon(&url, dir.path(), "host-b", "daemon-b", true);
    let daemon_b = b.start();
    vendor_hook(&daemon_b, SESSION, 0);
    wait_until_seen("host-b to take commands over NATS", WAIT, || {
        let control = health(&daemon_b)["nats"]["control"].clone();
        (control["subscribed"] == true).then_some(()).ok_or(control.to_string())
    });
    b.wait_log(SESSION, "host-b's session in its log", WAIT, |l| !l.is_empty());
    let viewer = ("viewer", "viewer-secret");
    let (errors_to, errors) = std::sync::mpsc::channel();
    let planted = command(
        "control.cancel",
        SESSION,
        json!({"scope": "session", "reason": "delivered by a consumer"}),
    );
    let rt = runtime();
    rt.block_on(async {
        // daemon-a's user stores the command on a subject inside its grant.
        let a = connect(&url, Some(("daemon-a", "daemon-a-secret")), None)
            .await
            .unwrap();
        let js = jetstream::new(a);
        // The daemons' sinks make the stream as they start: stored once it exists.
        wait_until_seen_async(
            "the stream to store it: inside daemon-a's grant",
            Duration::from_secs(30),
            async || {
                let stored = js
                    .publish("aep.host-a.cline.planted", planted.to_string().into())
                    .await
                    .unwrap()
                    .await;
                stored.map(drop).map_err(|e| {
                    eprintln!("not stored yet ({e}); again");
                    format!("not stored: {e}")
                })
            },
        )
        .await;
        // The viewer points consumers at host-b's control subject.
        let v = connect(&url, Some(viewer), Some(errors_to.clone())).await.unwrap();
        for ack_policy in ["explicit", "none"] {
            let config = json!({"deliver_subject": machine::control_subject("host-b"),
                                "filter_subject": "aep.host-a.cline.planted",
                                "deliver_policy": "all", "ack_policy": ack_policy});
            let made = js_api(
                &v,
                "$JS.API.CONSUMER.CREATE.AEP",
                json!({"stream_name": "AEP", "config": config}),
            )
            .await;
            let made = made.expect("the viewer may make an ephemeral consumer");
            assert!(made["error"].is_null(), "{made}");
        }
    });
    let control = wait_until_seen("host-b to refuse both deliveries", WAIT, || {
        let control = health(&daemon_b)["nats"]["control"].clone();
        (control["deliveries_refused"].as_u64() >= Some(2))
            .then_some(control.clone())
            .ok_or(control.to_string())
    });
    assert_eq!(
        (control["acked"].as_u64(), control["refused"].as_u64()),
        (Some(0), Some(0)),
        "{control}"
    );
    let log = b.log(SESSION);
    assert!(
        !log.iter()
            .any(|e| e["type"] == "control.accepted" || e["type"] == "session.ended" || e["cause"] == planted["id"]),
        "a delivery is no command: {log:#?}"
    );

    rt.block_on(async {
        // Another user's durable: the ingester's.
        let ingest = connect(&url, Some(("ingest", "ingest-secret")), None).await.unwrap();
        let stream = jetstream::new(ingest).get_stream("AEP").await.unwrap();
        let durable = async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("ingest".into()),
            ..Default::default()
        };
        stream
            .create_consumer(durable)
            .await
            .expect("ingest may make its own durable");
        let v = connect(&url, Some(viewer), Some(errors_to)).await.unwrap();
        let takeover = json!({"stream_name": "AEP", "config": {"name": "ingest",
            "deliver_subject": machine::control_subject("host-b"), "deliver_policy": "all", "ack_policy": "none"}});
        for (subject, body) in [
            ("$JS.API.CONSUMER.DELETE.AEP.ingest", json!({})),
            ("$JS.API.CONSUMER.MSG.NEXT.AEP.ingest", json!({"batch": 1})),
            ("$JS.API.CONSUMER.CREATE.AEP.ingest", takeover.clone()),
            (
                "$JS.API.CONSUMER.DURABLE.CREATE.AEP.mine",
                json!({"stream_name": "AEP", "config": {"durable_name": "mine"}}),
            ),
            (
                "$JS.API.CONSUMER.CREATE.AEP.mine",
                json!({"stream_name": "AEP", "config": {"name": "mine"}}),
            ),
        ] {
            assert_eq!(
                js_api(&v, subject, body).await,
                None,
                "{subject}: the server answers nothing"
            );
        }
        // Naming it inside an ephemeral create does not take it over either.
        let named = js_api(&v, "$JS.API.CONSUMER.CREATE.AEP", takeover).await.unwrap();
        assert!(
            !named["error"].is_null(),
            "an ephemeral create cannot name another's consumer: {named}"
        );
        let info = stream
            .consumer_info("ingest")
            .await
            .expect("ingest's durable is still there");
        assert_eq!(
            (
                info.config.deliver_subject.as_deref(),
                info.config.durable_name.as_deref()
            ),
            (None, Some("ingest"))
        );
    });
    let errors: Vec<String> = errors.try_iter().collect();
    for subject in [
        "DELETE.AEP.ingest",
        "MSG.NEXT.AEP.ingest",
        "CREATE.AEP.ingest",
        "DURABLE.CREATE.AEP.mine",
        "CREATE.AEP.mine",
    ] {
        assert!(
            errors.iter().any(|e| e.contains("Permissions Violation for Publish")
                && e.contains(&format!("$JS.API.CONSUMER.{subject}"))),
            "{subject}: {errors:?}"
        );
    }
    // Published straight to host-b's control subject: refused by the server, as before.
    let (reply, errors) = request(
        &url,
        ("daemon-a", "daemon-a-secret"),
        "host-b",
        planted.to_string().into_bytes(),
        Duration::from_secs(3),
    );
    assert_eq!(reply.unwrap_err(), async_nats::RequestErrorKind::TimedOut);
    assert!(
        errors.iter().any(|e| e.contains("Permissions Violation for Publish")),
        "{errors:?}"
    );
    // The viewer's grants still read the fleet.
    let viewer_console = Sandbox::new();
    let o = viewer_console.run(
        &["fleet", "sessions", "--json"],
        &[
            ("AEP_NATS_URL", &url),
            ("AEP_NATS_USER", "viewer"),
            ("AEP_NATS_PASSWORD", "viewer-secret"),
        ],
    );
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && out.contains(SESSION), "{out}\n{err}");
    assert!(
        !b.log(SESSION).iter().any(|e| e["type"] == "session.ended"),
        "host-b's session goes on"
    );
}

#[test]
fn with_the_hub_control_gate_off_every_command_over_nats_is_rejected_unsupported() {
    let server = Server::start(&[]);
    let url = server.url();
    let sandbox = Sandbox::new()
        .with_env("AEP_NATS_URL", &url)
        .with_env("AEP_NATS_CONTROL", "1")
        .with_env("AEP_HOST", "host-a")
        .with_env("RUST_LOG", "warn");
    let daemon = sandbox.start();
    vendor_hook(&daemon, SESSION, 0);
    let (m, _) = wait_record((&url, None), "host-a", "the record", |m, _| m.state == "running");
    assert!(!m.control, "no command is accepted: the record says control is off");
    let end = command("control.cancel", SESSION, json!({"scope": "session"}));
    let reply = runtime().block_on(async {
        let client = connect(&url, None, None).await.unwrap();
        wait_until_seen_async("host-a's control door to answer", WAIT, async || {
            let asked = client
                .request(machine::control_subject("host-a"), end.to_string().into())
                .await;
            match asked {
                Ok(m) => Ok(serde_json::from_slice::<Value>(&m.payload).unwrap()),
                // The door subscribes after the start: until then nobody answers.
                Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => Err(e.to_string()),
                Err(e) => panic!("{e}"),
            }
        })
        .await
    });
    assert_eq!(
        (reply["type"].as_str(), reply["data"]["reason"].as_str()),
        (Some("control.rejected"), Some("unsupported")),
        "{reply}"
    );
    assert!(sandbox.log(SESSION).contains(&reply), "the nack is logged: {reply}");
    assert!(!sandbox.log(SESSION).iter().any(|e| e["type"] == "session.ended"));
}
