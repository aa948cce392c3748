//! The hook pipeline through the real binary: the shim, the daemon, the session logs, and
//! every way they can be fed badly or die.

use crate::support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::daemon::{assert_valid_stream, http, real_payload, types, Sandbox};

const SESSION: &str = "1796007203184_6l7jh";

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[test]
fn a_real_run_through_the_shim_lands_in_one_valid_session_log() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    for hook in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        let out = sb.hook(&real_payload("hooks-local", hook));
        assert!(out.status.success());
        assert!(out.stdout.is_empty(), "the shim never prints on stdout");
        assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let events = sb.log(SESSION);
    assert_eq!(
        types(&events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    assert_eq!(events[3]["cause"], events[2]["id"]);
    assert_eq!(events[3]["run"], events[1]["run"]);
    assert_eq!(events[4]["run"], events[1]["run"]);
    assert!(events.iter().all(|e| e["agent"] == "cline" && e["session"] == SESSION));
    assert_eq!(seqs(&events), [0, 1, 2, 3, 4]);
    assert_valid_stream(&events);
    // Nothing above the default ceiling: no content, only digests.
    assert!(events.iter().all(|e| e["capture"] == "metadata"));
    assert!(!serde_json::to_string(&events).unwrap().contains("echo hi"));
    let (status, _) = daemon.stop();
    assert!(status.success());
    assert!(sb.discovery().is_none(), "a clean stop removes the discovery file");
}

#[test]
fn the_discovery_file_is_owner_only_and_hooks_need_its_token() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let daemon = sb.start();
    let mode = std::fs::metadata(sb.state_dir.join("daemon.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let body = real_payload("hooks-local", "agent_start");
    let (status, text) = http(&daemon.addr(), "POST", "/hook", &[], &body);
    assert_eq!(status, 401, "{text}");
    let (status, _) = http(
        &daemon.addr(),
        "POST",
        "/hook",
        &[("Authorization", "Bearer nope")],
        &body,
    );
    assert_eq!(status, 401);
    assert!(sb.log(SESSION).is_empty());
    let (status, text) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
    assert_eq!(status, 200);
    let health: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(health["ok"], true);
}

#[test]
fn bad_input_gets_a_clear_4xx_and_never_a_partial_line() {
    let sb = Sandbox::new().with_env("AEP_CLINE_MAX_BODY", "4096");
    let daemon = sb.start();
    let auth = format!("Bearer {}", daemon.token);
    let post = |body: &[u8]| http(&daemon.addr(), "POST", "/hook", &[("Authorization", &auth)], body);
    for (body, needle) in [
        (&b"{not json"[..], "not JSON"),
        (b"[1,2]", "not a JSON object"),
        (b"\"agent_start\"", "not a JSON object"),
        (b"{\"taskId\":\"t\"}", "no hookName"),
        (
            b"{\"hookName\":\"agent_start\"}",
            "neither sessionContext.rootSessionId nor taskId",
        ),
        (
            b"{\"hookName\":\"tool_call\",\"taskId\":\"t\",\"sessionContext\":{\"rootSessionId\":[\"AKIA-x\"]}}",
            "field `sessionContext.rootSessionId`",
        ),
        (b"", "not JSON"),
    ] {
        let (status, text) = post(body);
        assert_eq!(status, 400, "{}: {text}", String::from_utf8_lossy(body));
        let err: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(err["error"], "invalid-hook");
        assert!(err["detail"].as_str().unwrap().contains(needle), "{text}");
        assert!(!text.contains("AKIA"), "a refusal never echoes payload content: {text}");
    }
    let big = format!(
        "{{\"hookName\":\"tool_result\",\"taskId\":\"big\",\"pad\":\"{}\"}}",
        "x".repeat(8192)
    );
    let (status, _) = post(big.as_bytes());
    assert_eq!(status, 413);
    assert!(sb.log("big").is_empty());
    assert!(sb.log("t").is_empty());
    // An unknown hook is not refused: it becomes a vendor event.
    let (status, text) = post(br#"{"hookName":"some_future_hook","taskId":"t","unknownField":{"a":1}}"#);
    assert_eq!(status, 200, "{text}");
    let events = sb.log("t");
    assert_eq!(types(&events), ["session.started", "x.cline.some.future.hook"]);
    assert_valid_stream(&events);
    // The shim on a refused payload: exit 0, nothing on stdout, a line on stderr, nothing spooled.
    let out = sb.hook(b"this is not a hook");
    assert!(out.status.success() && out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused"));
    assert_eq!(sb.spooled(), 0);
    drop(daemon);
}

#[test]
fn with_no_daemon_the_shim_spools_and_the_next_daemon_ingests_in_order() {
    let sb = Sandbox::new();
    for hook in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        let out = sb.hook(&real_payload("hooks-local", hook));
        assert!(out.status.success() && out.stdout.is_empty());
    }
    assert_eq!(sb.spooled(), 4);
    assert!(sb.log(SESSION).is_empty());
    let daemon = sb.start();
    let events = sb.log(SESSION);
    assert_eq!(
        types(&events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    assert_eq!(sb.spooled(), 0);
    assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn a_dead_daemon_costs_the_shim_no_more_than_its_budget_and_loses_nothing() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    sb.hook(&real_payload("hooks-local", "agent_start"));
    // Killed without cleanup: the discovery file still names a port nobody listens on.
    daemon.signal("-KILL");
    drop(daemon);
    assert!(sb.discovery().is_some());
    let out = sb.hook(&real_payload("hooks-local", "tool_call"));
    assert!(out.status.success() && out.stdout.is_empty());
    assert_eq!(sb.spooled(), 1);
    let daemon = sb.start();
    let events = sb.log(SESSION);
    assert_eq!(types(&events), ["session.started", "run.started", "tool.requested"]);
    assert_eq!(
        events[2]["run"], events[1]["run"],
        "the restarted daemon continued the run from the log"
    );
    assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn a_hung_daemon_does_not_block_the_shim_and_a_hook_it_took_is_not_recorded_twice() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    sb.hook(&real_payload("hooks-local", "agent_start"));
    daemon.signal("-STOP");
    let started = Instant::now();
    let out = sb.hook(&real_payload("hooks-local", "tool_call"));
    // Generous bound: the point is that the shim returns at all while the daemon is frozen.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.status.success() && out.stdout.is_empty());
    assert_eq!(sb.spooled(), 1);
    // Its socket's timeout ran out (EAGAIN): said as the wait it is, not as `os error 11`.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the daemon did not answer within") && said.contains("spooled") && !said.contains("os error"),
        "{said}"
    );
    daemon.signal("-CONT");
    // The daemon now answers the request it had accepted, then drains the spool: one copy.
    sb.wait_spool_empty(Duration::from_secs(30));
    let events = sb.wait_for_events(SESSION, 3);
    assert_eq!(types(&events), ["session.started", "run.started", "tool.requested"]);
    // And across a restart too: the delivery ids are in the log.
    let (status, _) = daemon.stop();
    assert!(status.success());
    let daemon = sb.start();
    sb.hook(&real_payload("hooks-local", "tool_result"));
    assert_eq!(
        types(&sb.log(SESSION)),
        ["session.started", "run.started", "tool.requested", "tool.completed"]
    );
    drop(daemon);
}

#[test]
fn sequence_numbers_stay_monotonic_across_restarts() {
    let sb = Sandbox::new();
    let mut all = Vec::new();
    for hook in ["agent_start", "tool_call", "tool_result", "agent_end"] {
        let daemon = sb.start();
        sb.hook(&real_payload("hooks-local", hook));
        let (status, _) = daemon.stop();
        assert!(status.success());
        all = sb.log(SESSION);
    }
    assert_eq!(seqs(&all), [0, 1, 2, 3, 4]);
    assert_eq!(all.iter().filter(|e| e["type"] == "session.started").count(), 1);
    assert_valid_stream(&all);
}

#[test]
fn capture_ceiling_and_category_overrides_apply() {
    let sb = Sandbox::new().with_env("AEP_CAPTURE", "metadata,tool=redacted");
    let daemon = sb.start();
    for hook in ["agent_start", "tool_call", "tool_result"] {
        sb.hook(&real_payload("hooks-local", hook));
    }
    let events = sb.log(SESSION);
    assert_eq!(events[1]["capture"], "metadata");
    assert_eq!(events[2]["capture"], "redacted");
    assert_eq!(events[2]["data"]["args_redacted"], json!({"commands": ["echo hi"]}));
    assert!(events[3]["data"]["result_redacted"].is_object() || events[3]["data"]["result_redacted"].is_string());
    assert_valid_stream(&events);
    drop(daemon);
}

#[test]
fn a_bad_setting_stops_the_daemon_with_a_message_naming_it() {
    let sb = Sandbox::new();
    for (key, value) in [
        ("AEP_CAPTURE", "loud"),
        ("AEP_LISTEN", "nowhere"),
        ("AEP_REDACT_PII", "maybe"),
    ] {
        let out = sb.run(&["daemon"], &[(key, value)]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{key}: {err}");
    }
}

#[test]
fn a_log_that_cannot_be_written_is_retried_from_the_spool_without_loss() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    // `cline` becomes a file where the log folder should be: the session cannot even be loaded.
    std::fs::remove_dir(sb.log_dir.join("cline")).unwrap();
    std::fs::write(sb.log_dir.join("cline"), "not a folder").unwrap();
    let out = sb.hook(&real_payload("hooks-local", "agent_start"));
    assert!(out.status.success() && out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HTTP 500"), "{err}");
    assert_eq!(sb.spooled(), 1);
    std::fs::remove_file(sb.log_dir.join("cline")).unwrap();
    // The daemon retries the spool every second.
    let events = sb.wait_for_events(SESSION, 2);
    assert_eq!(types(&events), ["session.started", "run.started"]);

    // Now the session is loaded and the append itself fails: a folder stands where the log was.
    let log = sb.log_dir.join("cline").join(format!("{SESSION}.jsonl"));
    let aside = sb.log_dir.join("aside.jsonl");
    std::fs::rename(&log, &aside).unwrap();
    std::fs::create_dir(&log).unwrap();
    let out = sb.hook(&real_payload("hooks-local", "tool_call"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 500"));
    assert_eq!(sb.spooled(), 1);
    std::fs::remove_dir(&log).unwrap();
    std::fs::rename(&aside, &log).unwrap();
    let events = sb.wait_for_events(SESSION, 3);
    assert_eq!(types(&events), ["session.started", "run.started", "tool.requested"]);
    // Planned afresh from the log: no position was burnt by the failed attempt.
    assert_eq!(events[2]["seq"], 2);
    assert_eq!(events[2]["run"], events[1]["run"]);
    assert_valid_stream(&events);
    drop(daemon);
}
