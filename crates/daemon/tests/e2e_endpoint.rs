//! The embedded endpoint on the REAL Cline CLI 3.0.65, offline: a subscriber on the daemon's
//! SSE stream and one on its WebSocket see a Cline session's Events as the daemon logs them.
//! Fails (never skips) when the CLI is missing: `.ci/install-cline.sh` installs it.

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::cline::ClineSandbox;
use support::daemon::{assert_valid_stream, types, Sandbox};
use support::endpoint::{enc, Sse, Ws};
use support::fake_model::{FakeModel, Script};

#[test]
fn a_real_cline_sessions_events_reach_the_endpoints_subscribers() {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    let cline_dir = cline.cline_dir();
    let out = aep.run(&["install-hooks"], &[("CLINE_DIR", cline_dir.to_str().unwrap())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let daemon = aep.start();
    let addr = daemon.addr();
    let sse = Sse::open(
        &addr,
        &format!("/stream?filter={}", enc(&json!({"agent": "cline"}).to_string())),
        &[],
    );
    let (mut ws, _) = Ws::hello(&addr, None, "consumer");
    ws.send(&json!({"type": "subscribe", "id": "runs", "filter": {"type": "run.*"}}));
    ws.recv_until(Duration::from_secs(5), |f| f["type"] == "subscribed");

    let run = cline.run("Run the command and report what it printed.");
    run.assert_success("cline --json");
    let got = sse.events(Duration::from_secs(30), |e| {
        e.iter().any(|x| x["type"] == "run.finished")
    });
    assert_eq!(
        types(&got),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ],
        "{got:#?}"
    );
    assert_valid_stream(&got);
    let session = got[0]["session"].as_str().unwrap();
    assert_eq!(
        got,
        aep.log(session)[..got.len()],
        "what the subscriber saw is what the log holds"
    );
    let runs: Vec<Value> = ws.recv_until(Duration::from_secs(10), |f| f["type"] == "run.finished");
    assert_eq!(types(&runs), ["run.started", "run.finished"]);
    drop(daemon);
}
