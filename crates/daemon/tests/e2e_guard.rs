//! Guardrails where the tool call is decided (#35), on the REAL Cline CLI 3.0.65 in its default
//! mode: `cline --json "prompt"` in act mode with auto-approve on, in the local backend (no hub,
//! so no approval ever reaches the policy). The daemon answers the `tool_call` hook, which
//! Cline waits on before every tool, with the control that carries out its decision.

use crate::support;

use serde_json::Value;
use std::time::Duration;
use support::cline::ClineSandbox;
use support::daemon::{http, types, Daemon, Sandbox};
use support::fake_model::{FakeModel, Script, MODEL_ID};
use support::real_hub::{tapped_sandbox, RealHub};
use support::tmux::Tmux;

/// A deny rule for `rm`, an approve rule for `touch`, as a newcomer would write them.
const POLICY: &str = r#"
[[rule]]
name = "no-rm"
tool = "run_commands"
command = "rm"
answer = "deny"
reason = "deleting files needs a person"

[[rule]]
name = "touch"
tool = "run_commands"
command = "touch *"
answer = "approve"
"#;

struct Rig {
    model: FakeModel,
    cline: ClineSandbox,
    aep: Sandbox,
    _daemon: Daemon,
}

impl Rig {
    fn new(script: Script, env: &[(&str, &str)]) -> Rig {
        Rig::with_policy(script, env, POLICY)
    }

    fn with_policy(script: Script, env: &[(&str, &str)], text: &str) -> Rig {
        let model = FakeModel::start(script);
        let cline = ClineSandbox::new(&model);
        let mut aep = Sandbox::new();
        let policy = aep.root.path().join("policy.toml");
        std::fs::write(&policy, text).unwrap();
        aep = aep.with_env("AEP_CLINE_POLICY", policy.to_str().unwrap());
        for (k, v) in env {
            aep = aep.with_env(k, v);
        }
        aep.install_hooks_for(&cline);
        let daemon = aep.start();
        Rig {
            model,
            cline,
            aep,
            _daemon: daemon,
        }
    }

    /// The log of the one session with a tool call, once its run has ended.
    fn log(&self) -> Vec<Value> {
        let session = support::wait::wait_until("a session with a tool call", Duration::from_secs(30), || {
            self.aep.session_with("tool.requested")
        });
        self.aep
            .wait_log(&session, "the run's end", Duration::from_secs(30), |events| {
                events.iter().any(|e| {
                    matches!(
                        e["type"].as_str(),
                        Some("run.finished" | "run.failed" | "run.cancelled")
                    )
                })
            })
    }
}

/// #46: the soft deny. In Cline's default mode a deny rule fails the tool alone: `rm -rf victim`
/// does nothing, the run goes on to its end (no `run_aborted`), the model's next request
/// carries the rule's words, and the log says which rule refused the call.
#[test]
fn a_deny_rule_fails_rm_rf_and_the_run_goes_on_in_clines_default_auto_approve_mode() {
    let rig = Rig::new(Script::command("rm -rf victim"), &[]);
    let victim = rig.cline.workspace().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    std::fs::write(victim.join("inner/keep.txt"), "precious").unwrap();
    let run = rig.cline.run("please CMD:rm -rf victim");
    assert!(
        victim.join("inner/keep.txt").exists(),
        "the denied command ran: victim is gone\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.stdout_lines.join("\n"),
        run.stderr
    );
    let result = run.run_result();
    assert_eq!(result["finishReason"], "completed", "{result}");
    assert!(
        !run.records().iter().any(|r| r["type"] == "run_aborted"),
        "the run was aborted: {:?}",
        run.stdout_lines
    );
    // The model was told, with the failed call, which rule refused it and why.
    let requests = rig.model.chat_requests();
    let told = requests.iter().skip(1).map(|r| r.to_string()).collect::<String>();
    assert!(
        told.contains("policy rule \\\"no-rm\\\"") && told.contains("deleting files needs a person"),
        "the model's next request does not carry the rule: {told}"
    );
    let log = rig.log();
    let t = types(&log);
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(requested["data"]["cline.policy_rule"], "no-rm", "{requested}");
    assert_eq!(requested["data"]["cline.policy_answer"], "deny");
    assert_eq!(requested["data"]["cline.policy_stop"], "tool");
    assert_eq!(requested["data"]["cline.enforced_at"], "hook");
    let denied = log
        .iter()
        .find(|e| e["type"] == "tool.denied")
        .unwrap_or_else(|| panic!("no tool.denied in {t:?}"));
    assert_eq!(denied["data"]["by"], "policy");
    assert_eq!(denied["data"]["rule"], "no-rm");
    assert_eq!(denied["cause"], requested["id"], "tool.denied resolves its request");
    assert!(!t.contains(&"tool.completed") && !t.contains(&"tool.failed"), "{t:?}");
    assert!(t.contains(&"run.finished"), "the run ends as it did: finished, {t:?}");
    assert_eq!(denied["data"]["cline.policy_reason"], "deleting files needs a person");
    assert!(denied["data"]["cline.policy_line"].as_u64().is_some(), "{denied}");
    support::daemon::assert_valid_stream(&log);
    // Every view says which rule refused the call, and why; none says a shutdown ended it.
    let session = log[0]["session"].as_str().unwrap();
    let text = |args: &[&str]| {
        let out = rig.aep.run(args, &[]);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let list = text(&["sessions"]);
    assert!(
        list.contains("denied by no-rm"),
        "the sessions list has no marker:\n{list}"
    );
    let shown = text(&["show", session]);
    for said in ["no-rm", "deleting files needs a person", "denied"] {
        assert!(shown.contains(said), "`show` does not say {said:?}:\n{shown}");
    }
    assert!(!shown.contains("shutdown"), "`show` says a shutdown ended it:\n{shown}");
    let json: Value = serde_json::from_str(&text(&["show", session, "--json"])).unwrap();
    assert_eq!(json["summary"]["denied"], 1, "{}", json["summary"]);
    assert_eq!(json["summary"]["denied_by"], "no-rm");
}

/// #46: `stop = "run"` ends the run as before, and the log says a guard ended it:
/// `run.cancelled {by: "policy", rule}` caused by the denial, never `by: "shutdown"`.
#[test]
fn stop_run_ends_the_run_cancelled_by_policy() {
    let policy = POLICY.replace(
        "reason = \"deleting files needs a person\"",
        "reason = \"deleting files needs a person\"\nstop = \"run\"",
    );
    let rig = Rig::with_policy(Script::command("rm -rf victim"), &[], &policy);
    let victim = rig.cline.workspace().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "precious").unwrap();
    let run = rig.cline.run("please CMD:rm -rf victim");
    assert!(
        victim.join("keep.txt").exists(),
        "the denied command ran: {}",
        run.stderr
    );
    assert_eq!(run.run_result()["finishReason"], "aborted");
    let log = rig.log();
    let denied = log.iter().find(|e| e["type"] == "tool.denied").unwrap();
    let ended = log
        .iter()
        .find(|e| {
            matches!(
                e["type"].as_str(),
                Some("run.cancelled" | "run.failed" | "run.finished")
            )
        })
        .unwrap();
    assert_eq!(ended["type"], "run.cancelled", "{ended}");
    assert_eq!(ended["data"]["by"], "policy", "{ended}");
    assert_eq!(ended["data"]["rule"], "no-rm", "{ended}");
    assert_eq!(ended["cause"], denied["id"], "caused by the denial (AEP-0002 §5.3)");
    support::daemon::assert_valid_stream(&log);
}

#[test]
fn an_approved_command_runs_and_the_rule_is_named_on_its_request() {
    let rig = Rig::new(Script::command("touch ran.txt"), &[]);
    let run = rig.cline.run("please CMD:touch ran.txt");
    run.assert_success("cline --json");
    assert!(
        rig.cline.workspace().join("ran.txt").exists(),
        "the approved command did not run"
    );
    let log = rig.log();
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(requested["data"]["cline.policy_rule"], "touch", "{requested}");
    assert_eq!(requested["data"]["cline.policy_answer"], "approve");
    assert!(types(&log).contains(&"tool.completed"));
}

/// The gap the hub tap left (#35): a run Cline's hub hosts, with the tap on and answering
/// (`AEP_CLINE_HUB_CONTROL=1`), in the CLI's default auto-approve: Cline never asks the hub, so
/// the tap's policy never sees the tool. The hub's session says it auto-approves, and the hook
/// decides: `rm -rf victim` does not run.
#[test]
fn a_deny_rule_stops_rm_rf_in_a_run_clines_hub_hosts_while_the_tap_answers() {
    let model = FakeModel::start(Script::command("rm -rf victim"));
    let cline = ClineSandbox::new(&model);
    // The hooks first: the hub reads the hook files when it starts.
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL").with_env("RUST_LOG", "info");
    let hub = RealHub::ensure(&cline);
    let policy = aep.root.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let aep = aep.with_env("AEP_CLINE_POLICY", policy.to_str().unwrap());
    let daemon = aep.start();
    support::wait::wait_until("the hub tap to connect", Duration::from_secs(30), || {
        let (_, body) = http(&daemon.addr(), "GET", "/healthz", &[], b"");
        let health: Value = serde_json::from_str(&body).ok()?;
        (health["hub"]["connected"] == true).then_some(())
    });
    let victim = cline.workspace().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    std::fs::write(victim.join("inner/keep.txt"), "precious").unwrap();
    let mut cmd = hub.command(&[
        "--json",
        "-P",
        "openai-compatible",
        "-m",
        MODEL_ID,
        "please CMD:rm -rf victim",
    ]);
    cmd.env("CLINE_SESSION_BACKEND_MODE", "hub")
        .current_dir(cline.workspace());
    let run = cline.run_command(cmd, Duration::from_secs(120));
    if !victim.join("inner/keep.txt").exists() {
        if let Some(s) = aep.session_with("tool.requested") {
            eprintln!("{s}: {:?}", aep.log(&s));
        }
        let (_, stderr) = daemon.stop();
        panic!(
            "the denied command ran through the hub: victim is gone\n--- cline stderr ---\n{}\n--- daemon ---\n{stderr}",
            run.stderr
        );
    }
    let session = support::wait::wait_until("a session with a tool call", Duration::from_secs(30), || {
        aep.session_with("tool.requested")
    });
    let log = aep.wait_log(&session, "the denial", Duration::from_secs(30), |events| {
        events.iter().any(|e| e["type"] == "tool.denied")
    });
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(requested["data"]["cline.policy_rule"], "no-rm", "{requested}");
    assert_eq!(requested["data"]["cline.enforced_at"], "hook");
    assert!(!types(&log).contains(&"tool.completed"), "{:?}", types(&log));
    let (_, stderr) = daemon.stop();
    assert!(stderr.contains("hub tap connected"), "the tap was on: {stderr}");
}

/// A budget stops a run without the hub before its tool (#35): the first model call already
/// passed the run's limit (45 output tokens at 0.01 USD, a private price for `fake-model`), and
/// Cline's store, read at the `tool_call` hook, says so: the tool does not run, Cline is told
/// the budget, and the notice is in the log with the stop.
#[test]
fn a_run_budget_passed_by_its_first_model_call_stops_the_tool_after_it_without_the_hub() {
    let prices_dir = tempfile::tempdir().unwrap();
    let prices = prices_dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"data": [{"id": "fake-model", "pricing": {"prompt": "0", "completion": "0.01", "input_cache_read": "0"}}]}"#,
    )
    .unwrap();
    let rig = Rig::new(
        Script::command("touch spent.txt"),
        &[
            ("AEP_CLINE_BUDGET", "run=0.10"),
            ("AEP_CLINE_PRICES", prices.to_str().unwrap()),
        ],
    );
    let run = rig.cline.run("please CMD:touch spent.txt");
    assert!(
        !rig.cline.workspace().join("spent.txt").exists(),
        "the tool ran past the budget\n--- stderr ---\n{}",
        run.stderr
    );
    let log = rig.log();
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    let stop = &requested["data"]["cline.budget_stop"];
    assert_eq!(
        (&stop["name"], &stop["limit"]),
        (&serde_json::json!("run"), &serde_json::json!(0.1)),
        "{requested}"
    );
    assert!(stop["cost"].as_f64().unwrap() >= 0.45, "{stop}");
    let notice = log
        .iter()
        .find(|e| e["type"] == "attention.requested")
        .unwrap_or_else(|| panic!("no notice in {:?}", types(&log)));
    assert_eq!(notice["data"]["budget"]["action"], "stop", "{notice}");
    assert!(!types(&log).contains(&"tool.completed"), "{:?}", types(&log));
    // #46: the budget fails the tool alone (the model is told the budget is spent and answers
    // once more), and its request is resolved by a denial naming the budget.
    let denied = log.iter().find(|e| e["type"] == "tool.denied").unwrap();
    assert_eq!(denied["data"]["rule"], "budget.run", "{denied}");
    assert_eq!(run.run_result()["finishReason"], "completed");
    // The run's terminal does not count the store's cost a second time: the day holds what
    // the store says the run cost, 0.45 USD a model call.
    let calls = rig.model.chat_requests().len() as f64;
    std::thread::sleep(Duration::from_secs(1));
    let (_, body) = http(&rig._daemon.addr(), "GET", "/healthz", &[], b"");
    let health: Value = serde_json::from_str(&body).unwrap();
    let day = health["budget"]["day"]["cost"].as_f64().unwrap();
    assert!(
        (day - 0.45 * calls).abs() < 1e-9,
        "the day counted {day}, the run's {calls} calls cost {}: {}",
        0.45 * calls,
        health["budget"]
    );
    support::daemon::assert_valid_stream(&log);
}

/// The TUI, as a person runs it (`cline -P .. -m .. "prompt"` on a terminal, under tmux): a deny
/// rule stops `rm -rf victim` there too, and the TUI is told why.
#[test]
fn a_deny_rule_stops_rm_rf_in_the_tui() {
    let rig = Rig::new(Script::command("rm -rf victim"), &[]);
    let victim = rig.cline.workspace().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    std::fs::write(victim.join("inner/keep.txt"), "precious").unwrap();
    let mut cmd = rig.cline.command();
    cmd.args(["-P", "openai-compatible", "-m", MODEL_ID, "please CMD:rm -rf victim"]);
    let tmux = Tmux::start(rig.cline.root(), &cmd);
    let session = support::wait::wait_until("the TUI's tool call in the log", Duration::from_secs(90), || {
        rig.aep.session_with("tool.requested")
    });
    let log = rig
        .aep
        .wait_log(&session, "the denial", Duration::from_secs(60), |events| {
            events.iter().any(|e| e["type"] == "tool.denied")
        });
    // What Cline does next is the TUI's: the tool must not have run meanwhile.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        victim.join("inner/keep.txt").exists(),
        "the denied command ran in the TUI; it shows:\n{}",
        tmux.screen()
    );
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(requested["data"]["cline.policy_rule"], "no-rm", "{requested}");
    assert!(!types(&rig.aep.log(&session)).contains(&"tool.completed"));
    eprintln!("the TUI after the denial:\n{}", tmux.screen());
}

/// #44: hooks installed `closed`, then their binary removed (`cargo clean`): the real CLI's
/// `rm -rf victim` is stopped by the hook file itself, with words that say why, though no
/// daemon and no shim is there to decide.
#[test]
fn installed_closed_with_the_binary_gone_the_tool_does_not_run() {
    let model = FakeModel::start(Script::command("rm -rf victim"));
    let cline = ClineSandbox::new(&model);
    let mut aep = Sandbox::new();
    let copy = aep.root.path().join("aep-cline-copy");
    std::fs::copy(&aep.bin, &copy).unwrap();
    aep.bin = copy.clone();
    let out = aep.run(
        &["install-hooks", "--enforce", "closed"],
        &[("CLINE_DIR", cline.cline_dir().to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&copy).unwrap();
    let victim = cline.workspace().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "precious").unwrap();
    let run = cline.run("please CMD:rm -rf victim");
    assert!(
        victim.join("keep.txt").exists(),
        "the tool ran with the binary gone\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.stdout_lines.join("\n"),
        run.stderr
    );
    // The payload is kept for the daemon, whenever it runs again.
    let spooled = std::fs::read_dir(aep.state_dir.join("spool")).unwrap().count();
    assert!(spooled > 0, "the hooks were not spooled");
}

/// #46: each of Cline 3.0.65's own tools, denied, does nothing (its input taken away, its check
/// fails before it acts), the run goes on to its end, and the model is told which rule refused.
#[test]
fn each_of_clines_own_tools_denied_does_nothing_and_the_run_goes_on() {
    use std::io::{Read, Write};
    // A web server that counts what reaches it: fetch_web_content must not.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    {
        let hits = hits.clone();
        std::thread::spawn(move || {
            for stream in server.incoming().flatten() {
                hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            }
        });
    }
    let policy = "[[rule]]\nname = \"no-tools\"\ntool = \"{editor,read_files,fetch_web_content,spawn_agent,search_codebase}\"\nanswer = \"deny\"\nreason = \"not this tool\"\n";
    let cases: Vec<(&str, Value, bool)> = vec![
        (
            "editor",
            serde_json::json!({"path": "made.txt", "new_text": "made"}),
            false,
        ),
        (
            "read_files",
            serde_json::json!({"files": [{"path": "secret.txt"}]}),
            false,
        ),
        (
            "fetch_web_content",
            serde_json::json!({"requests": [{"url": format!("http://127.0.0.1:{port}/page"), "prompt": "read it"}]}),
            false,
        ),
        (
            "search_codebase",
            serde_json::json!({"queries": ["NEEDLE-IN-THE-WORKSPACE"]}),
            false,
        ),
        (
            "spawn_agent",
            serde_json::json!({"systemPrompt": support::fake_model::SUBAGENT_PROMPT, "task": "say hi"}),
            true,
        ),
    ];
    for (tool, arguments, spawn) in cases {
        let script = Script {
            tool: tool.to_string(),
            arguments,
            spawn,
            ..Script::default()
        };
        let rig = Rig::with_policy(script, &[], policy);
        let ws = rig.cline.workspace();
        std::fs::write(ws.join("secret.txt"), "THE-SECRET-CONTENT").unwrap();
        std::fs::write(ws.join("haystack.txt"), "NEEDLE-IN-THE-WORKSPACE here").unwrap();
        let run = rig.cline.run("please use the tool");
        assert_eq!(run.run_result()["finishReason"], "completed", "{tool}: {}", run.stderr);
        let later: String = rig
            .model
            .chat_requests()
            .iter()
            .skip(1)
            .map(|r| r.to_string())
            .collect();
        assert!(
            later.contains("\\\"no-tools\\\""),
            "{tool}: the model was not told the rule: {later}"
        );
        match tool {
            "editor" => assert!(!ws.join("made.txt").exists(), "the denied editor made the file"),
            "read_files" => assert!(
                !later.contains("THE-SECRET-CONTENT"),
                "the denied read reached the model"
            ),
            "fetch_web_content" => assert_eq!(
                hits.load(std::sync::atomic::Ordering::SeqCst),
                0,
                "the denied fetch reached the server"
            ),
            "search_codebase" => assert!(
                !later.contains("haystack.txt"),
                "the denied search found the file: {later}"
            ),
            "spawn_agent" => {
                let subagent = rig.model.chat_requests().iter().any(|r| {
                    r["messages"][0]
                        .to_string()
                        .contains(support::fake_model::SUBAGENT_PROMPT)
                });
                assert!(!subagent, "the denied spawn started a subagent");
            }
            _ => unreachable!(),
        }
        let log = rig.log();
        let denied = log
            .iter()
            .find(|e| e["type"] == "tool.denied")
            .unwrap_or_else(|| panic!("{tool}: {:?}", types(&log)));
        assert_eq!(denied["data"]["rule"], "no-tools");
        assert!(types(&log).contains(&"run.finished"), "{tool}: {:?}", types(&log));
        support::daemon::assert_valid_stream(&log);
    }
}
