//! End to end on the real Cline CLI 2.18.0 (`.ci/install-cline.sh` installs it into
//! `target/cline2-cli/`, or `AEP_CLINE2_TEST_CLI` names it): hooks installed by
//! `aep-cline install-hooks` as a user does (no `--hooks-dir`), a real daemon, and real
//! `cline task -y --json` runs against the scripted fake model (`support/fake_cline2.py`).
//!
//! 2.18 starts telemetry clients, so everything (the fake model, the daemon, the CLI) runs inside
//! a private network namespace (`unshare -n`, loopback only: nothing can leave the machine),
//! with telemetry disabled too; `support/cline2_netns.sh` is what runs in it. This needs root
//! (CI runs as root): without it the test fails, saying so, and never skips.

use crate::support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::daemon::{assert_valid_stream, of, project, types, BIN};
use support::wait::wait_until_seen_every;

fn cli() -> PathBuf {
    let path = std::env::var_os("AEP_CLINE2_TEST_CLI")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cline2-cli/node_modules/.bin/cline")
        });
    assert!(
        path.exists(),
        "the Cline 2.18 CLI is not at {}: run `bash .ci/install-cline.sh` (it installs cline@2.18.0 into target/cline2-cli), or set AEP_CLINE2_TEST_CLI",
        path.display()
    );
    path
}

/// Runs `runs` (`scenario:prompt`, one CLI run each; scenario `error429` or `error500`: the model
/// answers every request with that HTTP status) in a fresh sandbox inside `unshare -n`;
/// returns the sandbox and the daemon's session logs, oldest first.
fn in_private_network(runs: &[&str], install: &str) -> (tempfile::TempDir, Vec<Vec<Value>>) {
    in_private_network_with(runs, install, &Setup::default())
}

/// What a test adds to [`in_private_network`]: the daemon's extra environment (`{sandbox}` in a
/// value is the sandbox's root), files made in
/// the sandbox first (`prepare`, given the sandbox's root), the exit codes the runs must have
/// (`None`: 0, or 1 for an `error` scenario) and each run's time limit (`timeout` kills it).
#[derive(Default)]
struct Setup<'a> {
    env: &'a [(&'a str, &'a str)],
    prepare: Option<&'a dyn Fn(&Path)>,
    rc: Option<&'a [&'a str]>,
    run_timeout_s: Option<u32>,
}

fn in_private_network_with(runs: &[&str], install: &str, setup: &Setup<'_>) -> (tempfile::TempDir, Vec<Vec<Value>>) {
    let sandbox = tempfile::Builder::new().prefix("aep-cline-e2e2-").tempdir().unwrap();
    if let Some(prepare) = setup.prepare {
        prepare(sandbox.path());
    }
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support");
    let mut cmd = Command::new("unshare");
    cmd.arg("-n")
        .arg("bash")
        .arg(support.join("cline2_netns.sh"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLINE2", cli())
        .env("AEP", BIN)
        .env("FAKE", support.join("fake_cline2.py"))
        .env("SANDBOX", sandbox.path())
        .env("PORT", "19501")
        .env("RUNS", runs.join("\n"))
        .env("INSTALL", install)
        .env("RUN_TIMEOUT", setup.run_timeout_s.unwrap_or(120).to_string())
        .envs(
            setup
                .env
                .iter()
                .map(|(k, v)| (*k, v.replace("{sandbox}", &sandbox.path().to_string_lossy()))),
        );
    let out = cmd.output().expect("run unshare");
    let said = |name: &str| std::fs::read_to_string(sandbox.path().join(name)).unwrap_or_default();
    assert!(
        out.status.success(),
        "the run in a private network namespace failed (needs root for `unshare -n`): {}\n{}\n--- daemon ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        said("install.out"),
        said("daemon.err")
    );
    for (n, run) in (1..).zip(runs) {
        // 2.18 exits 1 when it gives up on the model.
        let rc: &[&str] = match setup.rc {
            Some(rc) => rc,
            None if run.starts_with("error") => &["1"],
            None => &["0"],
        };
        let got = said(&format!("{n}.rc"));
        assert!(
            rc.contains(&got.trim()),
            "cline run {n} ({run}) exited {got:?}, not one of {rc:?}: {}",
            said(&format!("{n}.stderr"))
        );
    }
    let logs = sandbox.path().join("logs/cline");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&logs)
        .unwrap_or_else(|e| {
            panic!(
                "no logs in {}: {e}; the daemon said\n{}",
                logs.display(),
                said("daemon.err")
            )
        })
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort(); // named by 2.x task ids: epoch ms
    let sessions = files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .collect();
    (sandbox, sessions)
}

/// A process killed (and waited for) when dropped, also when the test fails first.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn terminals(events: &[Value]) -> Vec<&str> {
    types(events)
        .into_iter()
        .filter(|t| matches!(*t, "run.finished" | "run.cancelled" | "run.failed"))
        .collect()
}

#[test]
fn real_cline_2_18_runs_the_installed_hooks_into_one_valid_session_per_task() {
    let (sandbox, sessions) = in_private_network(
        &["cmd:Run the command. CMD:echo hi", "cmdfail:Run a command that fails."],
        "",
    );
    let install = std::fs::read_to_string(sandbox.path().join("install.out")).unwrap();
    assert!(install.contains("covers  Cline 2.x: "), "{install}");
    assert_eq!(
        sessions.len(),
        2,
        "one session per task: {:?}",
        sessions.iter().map(|s| types(s)).collect::<Vec<_>>()
    );

    for (events, tool_end) in sessions.iter().zip(["tool.completed", "tool.failed"]) {
        let kinds = types(events);
        eprintln!("2.18 session: {kinds:?}");
        assert_valid_stream(events);
        let session = events[0]["session"].as_str().unwrap();
        assert!(
            session.bytes().all(|b| b.is_ascii_digit()),
            "the 2.x task id is the session: {session}"
        );
        assert_eq!(&kinds[..2], ["session.started", "run.started"]);
        assert_eq!(events[0]["data"]["client"]["version"], "3.82.0");
        let run = events[1]["run"].as_str().unwrap();
        assert_eq!(
            terminals(events),
            ["run.finished"],
            "one terminal, and the trailing TaskCancel cancels nothing"
        );
        let requested = of(events, "tool.requested");
        let ended = of(events, tool_end);
        assert_eq!((requested.len(), ended.len()), (1, 1), "{kinds:?}");
        assert_eq!(ended[0]["cause"], requested[0]["id"], "paired by tool name and order");
        for e in [requested[0], ended[0], of(events, "run.finished")[0]] {
            assert_eq!(e["run"], run, "{e}");
        }
        assert_eq!(requested[0]["subject"], "execute_command");
        assert!(of(events, "run.cancelled").is_empty());
        assert_eq!(kinds.last(), Some(&"session.ended"), "the CLI exited: the session ends");
        let ended = of(events, "session.ended")[0];
        assert_eq!(ended["data"]["reason"], "normal");
        assert_eq!(
            ended["data"]["detected"]["by"], "cline_store",
            "2.18's own record: {ended}"
        );
        assert_eq!(
            project(events),
            (true, 0),
            "a consumer's projection: ended, no run open"
        );
        assert!(kinds.contains(&"x.cline.notification.sent"));
        // Each firing is one record.
        let deliveries: Vec<&str> = events.iter().filter_map(|e| e["clinehook"].as_str()).collect();
        let mut runs = deliveries.clone();
        runs.dedup(); // a firing's Events are one unit...
        let once: std::collections::HashSet<&&str> = runs.iter().collect();
        assert_eq!(once.len(), runs.len(), "...recorded once: {deliveries:?}");
    }
    let failed = of(&sessions[1], "tool.failed")[0];
    assert_eq!(
        failed["data"]["error"]["type"], "exit_code",
        "success: true, but it exited 2"
    );

    // `aep-cline validate` agrees.
    let mut logs: Vec<PathBuf> = std::fs::read_dir(sandbox.path().join("logs/cline"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    logs.sort();
    let out = Command::new(BIN).arg("validate").args(&logs).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The owner's local view: a daemon on the same state (now outside the namespace: it talks to
    // nobody) reads each task's title and folder from 2.18's own taskHistory.json; the logs, at
    // capture `metadata`, hold neither.
    let folder = sandbox.path().join("proj").to_str().unwrap().to_string();
    let env = |cmd: &mut Command| {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", sandbox.path().join("home"))
            .env("CLINE_DIR", sandbox.path().join("home/.cline"))
            .env("AEP_CLINE_STATE_DIR", sandbox.path().join("state"))
            .env("AEP_LOG_DIR", sandbox.path().join("logs"));
    };
    let mut daemon = Command::new(BIN);
    // After `env`, which clears the environment: a port of its own, never the default 8789.
    env(daemon.arg("daemon"));
    daemon.env("AEP_LISTEN", "127.0.0.1:0");
    let mut daemon = Stopped(daemon.stderr(std::process::Stdio::null()).spawn().unwrap());
    let session = sessions[0][0]["session"].as_str().unwrap();
    // Each look runs `aep-cline show`: every 200 ms.
    let shown = wait_until_seen_every(
        "`show` to give the session's title",
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(200),
        || {
            let mut show = Command::new(BIN);
            env(show.args(["show", session]));
            let out = show.output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.contains("title ") {
                return Ok(text);
            }
            assert!(daemon.0.try_wait().unwrap().is_none(), "the daemon exited");
            Err(format!("it shows:\n{text}"))
        },
    );
    assert!(shown.contains("title     Run the command. CMD:echo hi\n"), "{shown}");
    assert!(shown.contains(&format!("folder    {folder}\n")), "{shown}");
    drop(daemon);
    for events in &sessions {
        let text = serde_json::to_string(events).unwrap();
        assert!(!text.contains("Run the command") && !text.contains(&folder), "{text}");
    }

    // `aep-cline stream` on the same runs' `--json` output: a run with its terminal.
    for n in 1..=2 {
        let out = Command::new(BIN)
            .args(["stream", "--json-summary"])
            .arg(sandbox.path().join(format!("{n}.stdout.jsonl")))
            .output()
            .unwrap();
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["finish_reason"], "completed", "{summary}");
        assert_eq!(summary["model"]["id"], "fake-model");
        assert_eq!(
            summary["session"],
            sessions[n - 1][0]["session"],
            "the stream and the hooks share the task id"
        );
        assert!(summary["cost_note"].as_str().unwrap().contains("aep-cline usage"));
    }

    // `aep-cline usage` over the history these runs left: exactly what the fake model reported.
    // Its turn n reports prompt 1000 + 100n (cache included: the OpenAI-compatible provider),
    // completion 50 + n, 800 cached and 200 cache misses.
    let out = Command::new(BIN)
        .args(["usage", "session", "--json", "--extension-dir", "none", "--cline-dir"])
        .arg(sandbox.path().join("home/.cline"))
        .env_remove("CLINE_DATA_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "one row per task: {report}");
    for events in &sessions {
        let session = events[0]["session"].as_str().unwrap();
        let row = rows.iter().find(|r| r["key"] == session).expect("the task's row");
        let calls = row["model_calls"].as_u64().unwrap();
        assert!(calls >= 2, "a tool call, then the completion: {row}");
        let turns = 0..calls;
        let expected = serde_json::json!({
            "input": turns.clone().map(|n| 1000 + 100 * n).sum::<u64>(),
            "output": turns.map(|n| 50 + n).sum::<u64>(),
            "cache_read": 800 * calls,
            "cache_write": 200 * calls,
        });
        for class in ["input", "output", "cache_read", "cache_write"] {
            assert_eq!(row["tokens"][class], expected[class], "{class} of {session}: {row}");
        }
        // Live, the run's terminal carries the same calls, read from the task's folder (the
        // daemon once read only 3.x's store: a 2.x session showed no tokens anywhere).
        let finished = of(events, "run.finished");
        let data = &finished[0]["data"];
        assert_eq!(data["cline.usage"]["model_calls"], calls, "{session}: {data}");
        assert_eq!(
            data["gen_ai.usage.output_tokens"], expected["output"],
            "{session}: {data}"
        );
    }
    // And `sessions` (read from the logs) shows them.
    let out = Command::new(BIN)
        .args(["sessions", "--all", "--json"])
        .env("AEP_LOG_DIR", sandbox.path().join("logs"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    for row in listed.as_array().expect("a list of sessions") {
        assert!(
            row["output_tokens"].as_u64().unwrap_or(0) > 0,
            "tokens for every 2.x session: {row}"
        );
        assert_eq!(row["state"], "ended", "a completed task is over, never idle: {row}");
    }
}

#[test]
fn real_cline_2_18_runs_global_and_project_hooks_and_each_firing_is_recorded_once() {
    let (sandbox, sessions) = in_private_network(&["cmd:Run the command. CMD:echo again"], "--project proj");
    let install = std::fs::read_to_string(sandbox.path().join("install.out")).unwrap();
    assert!(
        install.contains("covers  Cline 3.x and 2.x: ") && install.contains(".clinerules/hooks"),
        "{install}"
    );
    assert!(
        install.contains("covers  Cline 3.x: "),
        "the global hooks too: {install}"
    );
    assert_eq!(sessions.len(), 1);
    let events = &sessions[0];
    assert_valid_stream(events);
    let kinds: Vec<&str> = types(events)
        .into_iter()
        .filter(|t| *t != "x.cline.notification.sent")
        .collect();
    assert_eq!(
        kinds,
        [
            "session.started",
            "run.started",
            "x.cline.prompt.submitted",
            "tool.requested",
            "tool.completed",
            "run.finished",
            "session.ended"
        ],
        "two folders ran every hook; each firing is one record"
    );
    assert_eq!(terminals(events), ["run.finished"]);
}

#[test]
fn real_cline_2_18_model_failures_are_failed_runs_said_why_first_and_ended() {
    // 2.18 retries three times (2, 4, 8 s), then gives up: `ask: api_req_failed`, exit 1, and its
    // `Notification {source: api_req_failed}` and `TaskCancel` hooks, though nobody cancelled.
    let (sandbox, sessions) = in_private_network(&["error429:Say hello.", "error500:Say hello."], "");
    assert_eq!(
        sessions.len(),
        2,
        "one session per task: {:?}",
        sessions.iter().map(|s| types(s)).collect::<Vec<_>>()
    );
    for (events, (status, kind)) in sessions.iter().zip([(429, "rate_limit_error"), (500, "server_error")]) {
        let kinds = types(events);
        eprintln!("2.18 failing session ({status}): {kinds:?}");
        assert_valid_stream(events);
        assert_eq!(terminals(events), ["run.failed"], "never run.cancelled: {kinds:?}");
        let failed = of(events, "run.failed")[0];
        assert_eq!(failed["data"]["reason"], "api_req_failed", "{failed}");
        assert_eq!(
            failed["data"]["error"],
            serde_json::json!({"type": kind, "status": status}),
            "the provider's error type and HTTP status: {failed}"
        );
        // Why, then the terminal, then the end.
        let why = events
            .iter()
            .position(|e| e["type"] == "x.cline.notification.sent" && e["data"]["source"] == "api_req_failed")
            .unwrap_or_else(|| panic!("the Notification that said why: {kinds:?}"));
        let terminal = kinds.iter().position(|t| *t == "run.failed").unwrap();
        assert!(why < terminal, "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"session.ended"), "{kinds:?}");
        let ended = of(events, "session.ended")[0];
        assert_eq!(ended["data"]["reason"], "error", "{ended}");
        assert_eq!(
            ended["data"]["detected"]["by"], "cline_store",
            "2.18's own record: {ended}"
        );
        assert!(
            ended["time"].as_str() < ended["data"]["detected"]["at"].as_str(),
            "when it ended, not when the daemon found out: {ended}"
        );
        assert_eq!(
            project(events),
            (true, 0),
            "a consumer's projection: ended, no run open"
        );
    }
    let out = Command::new(BIN)
        .args(["sessions", "--all", "--json"])
        .env("AEP_LOG_DIR", sandbox.path().join("logs"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = listed.as_array().expect("a list of sessions");
    assert_eq!(rows.len(), 2, "{listed}");
    for row in rows {
        assert_eq!(
            (row["state"].as_str(), row["failures"].as_u64()),
            (Some("ended"), Some(1)),
            "{row}"
        );
    }
}

/// A deny rule in 2.18's auto-approve mode (`cline task -y`, #35): the daemon answers the real
/// `PreToolUse` hook with `cancel`, judged under the 3.x tool name (`execute_command` as
/// `run_commands`): `rm -rf victim` never runs. 2.18 then waits at `resume_task` forever
/// (docs/cline-vendor-facts.md), so the daemon ends the CLI as two SIGTERMs do (#46): the run
/// ends by itself, well within its 30 s, with the reason in its output.
#[test]
fn real_cline_2_18_a_deny_rule_stops_rm_rf_in_auto_approve_mode() {
    let prepare = |root: &Path| {
        std::fs::write(
            root.join("policy.toml"),
            "[[rule]]\nname = \"no-rm\"\ntool = \"run_commands\"\ncommand = \"rm\"\nanswer = \"deny\"\nreason = \"deleting needs a person\"\n",
        )
        .unwrap();
        let victim = root.join("proj/victim/inner");
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("keep.txt"), "precious").unwrap();
    };
    let setup = Setup {
        env: &[("AEP_CLINE_POLICY", "{sandbox}/policy.toml")],
        prepare: Some(&prepare),
        // The daemon's signals end it (2.18 exits 1 on its second SIGTERM, 143 if the first
        // ended it); `timeout` (124, 137) would mean it was left waiting.
        rc: Some(&["1", "143"]),
        run_timeout_s: Some(30),
    };
    let (sandbox, sessions) = in_private_network_with(&["cmd:CMD:rm -rf victim"], "", &setup);
    assert!(
        sandbox.path().join("proj/victim/inner/keep.txt").exists(),
        "the denied command ran on 2.18: {}",
        std::fs::read_to_string(sandbox.path().join("daemon.err")).unwrap_or_default()
    );
    let [log] = sessions.as_slice() else {
        panic!("one session expected, got {}", sessions.len())
    };
    let requested = log
        .iter()
        .find(|e| e["type"] == "tool.requested")
        .unwrap_or_else(|| panic!("{:?}", types(log)));
    assert_eq!(requested["data"]["cline.policy_rule"], "no-rm", "{requested}");
    assert_eq!(requested["data"]["cline.enforced_at"], "hook");
    let denied = of(log, "tool.denied");
    assert_eq!(denied.len(), 1, "{:?}", types(log));
    assert_eq!(denied[0]["data"]["rule"], "no-rm");
    assert!(of(log, "tool.completed").is_empty(), "{:?}", types(log));
    let ended = log
        .iter()
        .find(|e| {
            matches!(
                e["type"].as_str(),
                Some("run.cancelled" | "run.failed" | "run.finished")
            )
        })
        .unwrap_or_else(|| panic!("the run never ended: {:?}", types(log)));
    // A guard stopped it (not a user, not a shutdown), caused by the denial, with what the run
    // used so far read from 2.18's task folder (#46: it once showed tokens `-`).
    assert_eq!(ended["type"], "run.cancelled", "{ended}");
    assert_eq!(
        (&ended["data"]["by"], &ended["data"]["rule"]),
        (&json!("policy"), &json!("no-rm")),
        "{ended}"
    );
    assert_eq!(ended["cause"], denied[0]["id"], "{ended}");
    assert!(
        ended["data"]["gen_ai.usage.output_tokens"].as_u64() > Some(0),
        "no tokens: {ended}"
    );
    // What the person running it reads: the rule and its reason, in 2.18's own output.
    let output = std::fs::read_to_string(sandbox.path().join("1.stdout.jsonl")).unwrap_or_default();
    assert!(
        output.contains("no-rm") && output.contains("deleting needs a person"),
        "the reason is not in 2.18's output: {output}"
    );
    assert_valid_stream(log);
}
