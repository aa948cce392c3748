//! The spool is bounded (AEP_CLINE_SPOOL_MAX): with no daemon, the shim spools hooks until the
//! bound, then keeps the oldest and says on stderr that a hook was not kept (still exiting 0,
//! printing nothing on stdout); `aep-cline doctor` fails on a full spool and the daemon's log
//! warns about it at start, then the daemon ingests what was kept.

mod support;

use support::daemon::{real_payload, Sandbox};

#[test]
fn a_full_spool_keeps_the_oldest_and_says_so() {
    let payload = real_payload("hooks-cancel", "tool_call");
    let max = payload.len() * 3 + payload.len() / 2;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_SPOOL_MAX", &max.to_string())
        .with_env("RUST_LOG", "info");
    let limit = [("AEP_CLINE_SPOOL_MAX", max.to_string())];
    let shim = |body: &[u8]| {
        let mut cmd = std::process::Command::new(support::daemon::BIN);
        cmd.arg("hook")
            .env("HOME", sandbox.root.path())
            .env("AEP_LOG_DIR", &sandbox.log_dir)
            .env("AEP_CLINE_STATE_DIR", &sandbox.state_dir)
            .env(limit[0].0, &limit[0].1)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), body).unwrap();
        child.wait_with_output().unwrap()
    };
    let start = shim(&real_payload("hooks-cancel", "agent_start"));
    assert!(start.status.success());
    let mut refused = None;
    for i in 0..5 {
        // A firing is known by its payload: each of these is another firing.
        let mut call: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        call["timestamp"] = serde_json::json!(format!("2026-11-30T02:53:2{i}.000Z"));
        let out = shim(call.to_string().as_bytes());
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "the shim never fails Cline"
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if err.contains("the spool is full") {
            refused = Some(err);
            break;
        }
    }
    let refused = refused.expect("the bound was reached");
    assert!(
        refused.contains("the oldest hooks are kept") && refused.contains("AEP_CLINE_SPOOL_MAX"),
        "{refused}"
    );
    let kept = sandbox.spooled();
    assert!((2..=4).contains(&kept), "{kept} kept");
    let oldest = std::fs::read_dir(sandbox.state_dir.join("spool"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .min()
        .unwrap();
    assert!(
        std::fs::read_to_string(oldest).unwrap().contains("agent_start"),
        "the first hook is kept"
    );

    let out = sandbox.run(&["doctor"], &[("AEP_CLINE_SPOOL_MAX", &max.to_string())]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("FAIL  spool    the spool is full"), "{report}");

    let daemon = sandbox.start();
    let events = sandbox.wait_for_events("1796007217803_dxv4z", 2 + kept - 1);
    assert_eq!(events.len(), 2 + kept - 1, "every kept hook is ingested: {events:#?}");
    assert_eq!(events[1]["type"], "run.started", "ingested, oldest first");
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("the spool was near its bound"), "{stderr}");
}
