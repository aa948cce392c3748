//! The spool is bounded (AEP_CLINE_SPOOL_MAX): with no daemon, the shim spools hooks until the
//! bound, then keeps the oldest and says on stderr that a hook was not kept (still exiting 0,
//! printing nothing on stdout); `aep-cline doctor` fails on a full spool and the daemon's log
//! warns about it at start, then the daemon ingests what was kept. A hook not kept is counted
//! (`lost`) where `doctor`, `/healthz` and the daemon's log say it after the spool drained.

use crate::support;

use std::path::Path;
use support::daemon::{real_payload, Sandbox};

/// The shim, with no daemon, and `limit` on its environment or its process.
fn shim(sandbox: &Sandbox, body: &[u8], max: usize, fsize: Option<u64>) -> std::process::Child {
    let mut cmd = match fsize {
        Some(bytes) => {
            let mut c = std::process::Command::new("prlimit");
            c.arg(format!("--fsize={bytes}")).arg(support::daemon::BIN);
            c
        }
        None => std::process::Command::new(support::daemon::BIN),
    };
    cmd.arg("hook")
        .env("HOME", sandbox.root.path())
        .env("AEP_LOG_DIR", &sandbox.log_dir)
        .env("AEP_CLINE_STATE_DIR", &sandbox.state_dir)
        .env("AEP_CLINE_SPOOL_MAX", max.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), body).unwrap();
    child
}

/// Another firing of the same hook (a firing is known by its payload).
fn firing(payload: &[u8], i: usize) -> Vec<u8> {
    let mut call: serde_json::Value = serde_json::from_slice(payload).unwrap();
    call["timestamp"] = serde_json::json!(format!("2026-11-30T02:53:{:02}.{:03}Z", i / 1000 % 60, i % 1000));
    call.to_string().into_bytes()
}

/// What the spool holds on disk, file by file.
fn spool_bytes(state_dir: &Path) -> u64 {
    aep_cline::lane::spool::pending(state_dir)
        .iter()
        .map(|f| f.metadata().unwrap().len())
        .sum()
}

fn lost_lines(state_dir: &Path) -> usize {
    std::fs::read_to_string(state_dir.join("lost")).map_or(0, |t| t.lines().count())
}

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
        .filter(|p| p.extension().is_some_and(|x| x == "firing"))
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
    // The spool drained; the loss is still told.
    assert_eq!(lost_lines(&sandbox.state_dir), 1);
    let (_, health) = support::daemon::http(&daemon.addr(), "GET", "/healthz", &[], b"");
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["spool"]["lost"], 1, "{health}");
    let out = sandbox.run(&["doctor"], &[]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("warn  spool    1 hooks were lost") && report.contains("to clear this warning"),
        "{report}"
    );
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("the spool was near its bound"), "{stderr}");
    assert!(stderr.contains("hooks were lost"), "{stderr}");
}

#[test]
fn concurrent_shims_never_overshoot_the_bound_and_every_refused_hook_is_counted() {
    let sandbox = Sandbox::new();
    let payload = real_payload("hooks-cancel", "tool_call");
    // Room for about five spool files (a file is its head line and the body).
    let max = payload.len() * 5 + payload.len() / 2;
    let shims: Vec<_> = (0..24)
        .map(|i| shim(&sandbox, &firing(&payload, i), max, None))
        .collect();
    let mut refused = 0;
    for child in shims {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "the shim never fails Cline"
        );
        if String::from_utf8_lossy(&out.stderr).contains("the hook is lost") {
            refused += 1;
        }
    }
    let (kept, bytes) = (sandbox.spooled(), spool_bytes(&sandbox.state_dir));
    assert!(
        bytes <= max as u64,
        "{kept} files of {bytes} bytes overshoot the bound of {max}"
    );
    assert_eq!(kept + refused, 24);
    assert!((3..=5).contains(&kept), "{kept} kept");
    assert_eq!(
        lost_lines(&sandbox.state_dir),
        refused,
        "each refused hook counted once"
    );
}

#[test]
fn a_failed_spool_write_leaves_no_temporary_file_and_the_daemon_removes_stale_ones() {
    let sandbox = Sandbox::new();
    let payload = real_payload("hooks-local", "agent_start");
    // The shim may write files of 300 bytes at most: the spool file cannot be written whole.
    let out = shim(&sandbox, &payload, 1 << 30, Some(300)).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "the shim never fails Cline: {err}"
    );
    assert!(err.contains("the hook is lost"), "{err}");
    let spool = aep_cline::lane::spool::dir(&sandbox.state_dir);
    let names: Vec<String> = std::fs::read_dir(&spool)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    assert_eq!(lost_lines(&sandbox.state_dir), 1);

    // A writer that died mid-write left one: the daemon removes it once it is a minute old.
    let stale = spool.join(".00000000000000000001-0000000001-x.firing.tmp");
    let fresh = spool.join(".00000000000000000002-0000000001-y.firing.tmp");
    for tmp in [&stale, &fresh] {
        std::fs::write(tmp, b"{").unwrap();
    }
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let daemon = sandbox.start();
    assert!(!stale.exists(), "removed at the start-up drain");
    assert!(fresh.exists(), "a writer may still be writing it");
    drop(daemon);
}
