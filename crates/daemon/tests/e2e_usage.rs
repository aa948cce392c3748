//! Live usage on the REAL Cline CLI 3.0.65, offline: each run's terminal carries the tokens
//! the fake model reported for that run's calls, exactly (read by the daemon from Cline's own
//! session store), subagents counted into the run that spawned them, and each of a session's
//! runs its own share. The fake model reports different counts on every call
//! ([`Script::counted`]), so a share taken from the wrong calls cannot add up.

use crate::support;

use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use support::cline::ClineSandbox;
use support::daemon::{assert_valid_stream, of, Sandbox};
use support::fake_model::{FakeModel, Reported, Script};
use support::hub_client::HubClient;
use support::real_hub::{tapped_sandbox, RealHub};
use support::wait::wait_until_seen;

struct Rig {
    model: FakeModel,
    cline: ClineSandbox,
    aep: Sandbox,
}

impl Rig {
    fn new(script: Script) -> Self {
        let model = FakeModel::start(script);
        let cline = ClineSandbox::new(&model);
        let aep = Sandbox::new();
        aep.install_hooks_for(&cline);
        Rig { model, cline, aep }
    }

    /// The one session's log once `done` holds of it.
    fn log_until(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> (String, Vec<Value>) {
        let dir = self.aep.log_dir.join("cline");
        wait_until_seen(what, Duration::from_secs(30), || {
            let files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                .unwrap_or_default();
            if let [file] = files.as_slice() {
                let session = file.file_stem().unwrap().to_str().unwrap().to_string();
                let events = self.aep.log(&session);
                if done(&events) {
                    return Ok((session, events));
                }
            }
            Err(format!("the session logs: {files:?}"))
        })
    }
}

/// `(input, output, cache read)` as Cline counts them: OpenAI's prompt tokens include the
/// cached ones, as Cline's `inputTokens` includes its cache reads.
fn sum(calls: &[Reported]) -> (u64, u64, u64) {
    calls
        .iter()
        .fold((0, 0, 0), |(i, o, c), r| (i + r.prompt, o + r.completion, c + r.cached))
}

fn tokens(data: &Value) -> (u64, u64, u64) {
    (
        data["gen_ai.usage.input_tokens"]
            .as_u64()
            .expect("gen_ai.usage.input_tokens"),
        data["gen_ai.usage.output_tokens"]
            .as_u64()
            .expect("gen_ai.usage.output_tokens"),
        data["cline.usage"]["cache_read"]
            .as_u64()
            .expect("cline.usage.cache_read"),
    )
}

fn ended(events: &[Value]) -> bool {
    !of(events, "session.ended").is_empty()
}

#[test]
fn a_real_run_carries_exactly_the_tokens_the_model_reported() {
    let rig = Rig::new(Script::default().counted());
    let daemon = rig.aep.start();
    rig.cline
        .run("Run the command and report what it printed.")
        .assert_success("cline --json");
    let (_, events) = rig.log_until("session.ended", ended);
    let reported = rig.model.reported();
    assert_eq!(reported.len(), 2, "one tool call, then the answer");
    let finished = of(&events, "run.finished");
    let data = &finished[0]["data"];
    assert_eq!(tokens(data), sum(&reported), "{data}");
    let (input, output, read) = sum(&reported);
    assert_eq!(
        data["cline.usage"],
        serde_json::json!({"uncached_input": input - read, "cache_read": read, "cache_write": 0, "output": output,
                           "model_calls": 2, "source": "store",
                           "cost_note": data["cline.usage"]["cost_note"]})
    );
    assert!(data.get("cost").is_none(), "fake-model has no price: no cost, never 0");
    // The session's own total, and the model on session.started.
    assert_eq!(tokens(&of(&events, "session.ended")[0]["data"]), sum(&reported));
    let started = &of(&events, "session.started")[0]["data"];
    assert_eq!(started["gen_ai.request.model"], "fake-model");
    assert_eq!(started["cline.provider"], "openai-compatible");
    assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn a_store_moved_by_the_sdks_variables_is_read_where_the_app_writes_it_and_names_its_app() {
    // The apps on Cline's SDK may put the session folders and the database elsewhere
    // (CLINE_SESSION_DATA_DIR, CLINE_DB_DATA_DIR): the hooks inherit them, and the usage is
    // read there; the session file's `source` names the app.
    let rig = Rig::new(Script::default().counted());
    let daemon = rig.aep.start();
    let sessions = rig.cline.root().join("elsewhere/sessions");
    let db = rig.cline.root().join("elsewhere/db");
    let mut cmd = rig
        .cline
        .json_run_command("Run the command and report what it printed.");
    cmd.env("CLINE_SESSION_DATA_DIR", &sessions)
        .env("CLINE_DB_DATA_DIR", &db);
    rig.cline
        .run_command(cmd, Duration::from_secs(120))
        .assert_success("cline --json");
    let (session, events) = rig.log_until("session.ended", ended);
    assert!(
        sessions.join(&session).join(format!("{session}.json")).is_file(),
        "Cline wrote it there"
    );
    assert!(db.join("sessions.db").is_file());
    assert!(
        !rig.cline.cline_dir().join("data/sessions").join(&session).exists(),
        "and not in the default place"
    );
    let finished = of(&events, "run.finished");
    assert_eq!(
        tokens(&finished[0]["data"]),
        sum(&rig.model.reported()),
        "{:#}",
        finished[0]
    );
    let started = &of(&events, "session.started")[0]["data"];
    assert_eq!(started["cline.app"], "cli", "{started}");
    assert_eq!(started["gen_ai.request.model"], "fake-model");
    // `show` names the app; `usage` reads the same store when given the same variables.
    let out = rig.aep.run(&["show", &session], &[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("app Cline CLI"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let cline_dir = rig.cline.cline_dir();
    let env = [
        ("CLINE_DIR", cline_dir.to_str().unwrap()),
        ("CLINE_SESSION_DATA_DIR", sessions.to_str().unwrap()),
        ("CLINE_DB_DATA_DIR", db.to_str().unwrap()),
    ];
    let out = rig.aep.run(&["usage", "session", "--json", "--no-cache"], &env);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&session), "usage finds the moved store: {text}");
    drop(daemon);
}

#[test]
fn a_private_model_priced_by_aep_cline_prices_gets_its_cost() {
    let mut rig = Rig::new(Script::default().counted());
    let prices = rig.aep.root.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"data": [{"id": "acme/fake-model", "pricing": {"prompt": "0.000001", "completion": "0.000002", "input_cache_read": "0.0000005"}}]}"#,
    )
    .unwrap();
    rig.aep = rig.aep.with_env("AEP_CLINE_PRICES", prices.to_str().unwrap());
    let daemon = rig.aep.start();
    rig.cline
        .run("Run the command and report what it printed.")
        .assert_success("cline --json");
    let (_, events) = rig.log_until("session.ended", ended);
    let (input, output, read) = sum(&rig.model.reported());
    let want = (input - read) as f64 * 1e-6 + read as f64 * 5e-7 + output as f64 * 2e-6;
    let cost = &of(&events, "run.finished")[0]["data"]["cost"];
    assert_eq!(cost["currency"], "USD", "{cost}");
    let total = cost["total"].as_f64().expect("a cost from AEP_CLINE_PRICES");
    assert!((total - want).abs() < 1e-12, "{total} != {want}");
    // `usage` in a shell without AEP_CLINE_PRICES prices as the running daemon does, and says so.
    let cline_dir = rig.cline.cline_dir();
    let env = [("CLINE_DIR", cline_dir.to_str().unwrap())];
    let out = rig.aep.run(&["usage", "session", "--json", "--no-cache"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["prices"]["from"], "the running daemon's AEP_CLINE_PRICES",
        "{}",
        v["prices"]
    );
    assert_eq!(v["prices"]["file"], prices.to_str().unwrap());
    let usd = v["rows"][0]["cost_usd"]
        .as_f64()
        .expect("priced with the daemon's table");
    assert!((usd - want).abs() < 1e-9, "{usd} != {want}");
    let out = rig.aep.run(&["usage", "session", "--no-cache"], &env);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(the running daemon's AEP_CLINE_PRICES) over the bundled table"),
        "{text}"
    );
    drop(daemon);

    // A prices file the daemon cannot use stops it at start, saying which and why.
    std::fs::write(&prices, "{\"data\": 7}").unwrap();
    let out = rig.aep.run(
        &["daemon"],
        &[
            ("AEP_CLINE_PRICES", prices.to_str().unwrap()),
            ("AEP_LISTEN", "127.0.0.1:0"),
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot use the prices file") && err.contains("prices.json"),
        "{err}"
    );
}

#[test]
fn a_run_that_spawns_a_subagent_counts_the_subagents_tokens_once() {
    let rig = Rig::new(Script::spawning().counted());
    let daemon = rig.aep.start();
    rig.cline
        .run("Spawn a helper to say hi.")
        .assert_success("cline --json");
    let (_, events) = rig.log_until("session.ended", ended);
    let reported = rig.model.reported();
    let (lead, sub): (Vec<Reported>, Vec<Reported>) = reported.iter().partition(|r| r.lead);
    assert_eq!((lead.len(), sub.len()), (2, 1), "{reported:?}");
    let finished = of(&events, "run.finished");
    assert_eq!(finished.len(), 2, "the subagent's run and the lead's");
    let (child, parent): (Vec<&Value>, Vec<&Value>) = finished
        .iter()
        .partition(|e| e["data"]["cline.usage"]["delegated"] == true);
    // The lead's run: its own calls and the subagent's.
    let data = &parent[0]["data"];
    assert_eq!(tokens(data), sum(&reported), "{data}");
    let (si, so, _) = sum(&sub);
    assert_eq!(
        data["cline.usage"]["subagents"],
        serde_json::json!({"input": si, "output": so, "model_calls": 1})
    );
    // The subagent's run: its own calls, outside gen_ai.usage so no sum counts them twice.
    let own = &child[0]["data"];
    assert!(own.get("gen_ai.usage.input_tokens").is_none(), "{own}");
    assert_eq!(own["cline.usage"]["model_calls"], 1);
    assert_eq!(own["cline.usage"]["output"], so);
    let total: u64 = finished
        .iter()
        .filter_map(|e| e["data"]["gen_ai.usage.output_tokens"].as_u64())
        .sum();
    assert_eq!(total, sum(&reported).1, "summing the runs counts every call once");
    assert_eq!(tokens(&of(&events, "session.ended")[0]["data"]), sum(&reported));
    assert_valid_stream(&events);
    drop(daemon);
}

/// Cline's CLI cannot resume a session in `--json` mode (`--id` makes it interactive), so a
/// session with two runs is the hub's: two `run.start`s on one session, hooks run by the hub
/// with the sandbox's environment (its `CLINE_DIR`), the daemon's hub tap on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_hub_mode_each_run_of_one_session_reports_its_own_share() {
    let model = FakeModel::start(Script::default().counted());
    let cline = ClineSandbox::new(&model);
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB");
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session_with(&cline.workspace(), true).await;
    let mut shares = Vec::new();
    for n in 0..2 {
        let before = model.reported().len();
        client.start_run(&session, &format!("run {n} CMD:echo run{n}"));
        aep.wait_log(&session, "the run's end", Duration::from_secs(60), |l| {
            of(l, "run.finished").len() > n
        });
        shares.push(model.reported()[before..].to_vec());
    }
    let log = aep.log(&session);
    let finished = of(&log, "run.finished");
    assert_eq!((shares[0].len(), shares[1].len()), (2, 2), "{shares:?}");
    assert_eq!(tokens(&finished[0]["data"]), sum(&shares[0]), "{}", finished[0]["data"]);
    assert_eq!(
        tokens(&finished[1]["data"]),
        sum(&shares[1]),
        "the second run's own calls only"
    );
    assert_ne!(sum(&shares[0]), sum(&shares[1]));
    assert_valid_stream(&log);
    drop(daemon);
    drop(hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_hub_mode_a_run_that_spawns_a_subagent_counts_its_tokens_once() {
    let model = FakeModel::start(Script::spawning().counted());
    let cline = ClineSandbox::new(&model);
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB");
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session_spawning(&cline.workspace(), true, true).await;
    client.start_run(&session, "Spawn a helper to say hi.");
    let log = aep.wait_log(&session, "both runs' ends", Duration::from_secs(60), |l| {
        of(l, "run.finished").len() == 2
    });
    let reported = model.reported();
    let sub: Vec<Reported> = reported.iter().copied().filter(|r| !r.lead).collect();
    assert_eq!((reported.len(), sub.len()), (3, 1), "{reported:?}");
    let finished = of(&log, "run.finished");
    let lead = finished
        .iter()
        .find(|e| e["data"]["cline.usage"]["delegated"] != true)
        .unwrap();
    assert_eq!(tokens(&lead["data"]), sum(&reported), "{}", lead["data"]);
    assert_eq!(lead["data"]["cline.usage"]["subagents"]["output"], sum(&sub).1);
    let total: u64 = finished
        .iter()
        .filter_map(|e| e["data"]["gen_ai.usage.output_tokens"].as_u64())
        .sum();
    assert_eq!(total, sum(&reported).1, "summing the runs counts every call once");
    assert_valid_stream(&log);
    drop(daemon);
    drop(hub);
}

#[test]
fn a_budget_the_daemon_cannot_use_stops_it_at_start_saying_what_to_write() {
    let aep = Sandbox::new();
    for (budget, says) in [
        ("run=two", "run=two is not an amount; write a number of USD"),
        (
            "week=3",
            "\"week\" is not a budget; the budgets are run, session and day",
        ),
        ("day=-1", "day=-1 is negative"),
        (
            "run",
            "is not budget=amount; write for example AEP_CLINE_BUDGET=run=2.00,session=10,day=50",
        ),
    ] {
        let out = aep.run(
            &["daemon"],
            &[("AEP_CLINE_BUDGET", budget), ("AEP_LISTEN", "127.0.0.1:0")],
        );
        assert!(!out.status.success(), "{budget}: the daemon started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.contains("AEP_CLINE_BUDGET"),
            "{budget}: {err}"
        );
        assert!(aep.discovery().is_none(), "{budget}: a discovery file was written");
    }
}
