//! The guard's answer through the real shim and daemon (#35): what the shim prints on stdout
//! for a hook Cline waits on, with a policy set, with the daemon away under
//! `AEP_CLINE_ENFORCE=closed`, and for every copy of one firing.

use crate::support;

use serde_json::{json, Value};
use support::daemon::{real_payload, types, Sandbox};

const SESSION: &str = "1796007203184_6l7jh";

/// The real 3.0.65 `tool_call` payload, running `command` instead of its `echo hi`.
fn tool_call(command: &str) -> Vec<u8> {
    let mut p: Value = serde_json::from_slice(&real_payload("hooks-local", "tool_call")).unwrap();
    p["tool_call"]["input"] = json!({ "commands": [command] });
    serde_json::to_vec(&p).unwrap()
}

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn policy(sb: &Sandbox) -> Sandbox {
    let path = sb.root.path().join("policy.toml");
    std::fs::write(
        &path,
        "[[rule]]\nname = 'no-rm'\ntool = 'run_commands'\ncommand = 'rm'\nanswer = 'deny'\nreason = 'ask first'\n",
    )
    .unwrap();
    Sandbox {
        root: tempfile::tempdir().unwrap(),
        log_dir: sb.log_dir.clone(),
        state_dir: sb.state_dir.clone(),
        env: vec![("AEP_CLINE_POLICY".into(), path.to_str().unwrap().into())],
        bin: sb.bin.clone(),
    }
}

#[test]
fn a_denied_tool_call_gets_the_soft_deny_on_stdout_and_every_copy_of_the_firing_the_same() {
    let base = Sandbox::new();
    let sb = policy(&base);
    let daemon = sb.start();
    assert_eq!(stdout(&sb.hook(&real_payload("hooks-local", "agent_start"))), "");
    let body = tool_call("rm -rf victim");
    let first = stdout(&sb.hook(&body));
    let control: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first:?}"));
    // The tool fails with its input taken away; the run goes on; the model is told why.
    assert_eq!(control["overrideInput"], Value::Null);
    assert!(control.get("cancel").is_none(), "{control}");
    let words = control["context"].as_str().unwrap();
    assert!(words.contains("\"no-rm\"") && words.contains("ask first"), "{words}");
    // Cline runs the file of every hook folder: each copy is told the same, recorded once.
    assert_eq!(stdout(&sb.hook(&body)), first);
    // A command no rule names is Cline's to run: nothing printed.
    assert_eq!(stdout(&sb.hook(&tool_call("echo fine"))), "");
    let log = sb.log(SESSION);
    let t = types(&log);
    assert_eq!(t.iter().filter(|t| **t == "tool.denied").count(), 1, "{t:?}");
    assert_eq!(t.iter().filter(|t| **t == "tool.requested").count(), 2, "{t:?}");
    // /metrics counts the decision once (its copies were duplicates), at the hook, by its rule.
    let (_, metrics) = support::daemon::http(&daemon.addr(), "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains("aep_cline_policy_decisions_total{rule=\"no-rm\",answer=\"deny\",at=\"hook\"} 1\n"),
        "{metrics}"
    );
    assert_eq!(
        metrics.matches("aep_cline_policy_decisions_total{").count(),
        1,
        "{metrics}"
    );
}

#[test]
fn a_2x_pre_tool_use_is_judged_under_the_3x_tool_name() {
    let base = Sandbox::new();
    let sb = policy(&base);
    let _daemon = sb.start();
    let pre = json!({
        "clineVersion": "3.82.0", "hookName": "PreToolUse", "timestamp": "1796007203320",
        "taskId": "1796007203320", "workspaceRoots": ["/home/dev/proj"],
        "preToolUse": {"toolName": "execute_command", "parameters": {"command": "rm -rf victim", "requires_approval": "false"}}
    });
    let said = stdout(&sb.hook(&serde_json::to_vec(&pre).unwrap()));
    let control: Value = serde_json::from_str(&said).unwrap_or_else(|e| panic!("{e}: {said:?}"));
    assert_eq!(control["cancel"], true, "{control}");
}

#[test]
fn closed_enforcement_stops_tools_when_the_daemon_is_away_and_open_lets_them_run() {
    let sb = Sandbox::new(); // no daemon started
    let body = tool_call("rm -rf victim");
    let closed = stdout(&sb.hook_env(&body, &[("AEP_CLINE_ENFORCE", "closed")]));
    let control: Value = serde_json::from_str(&closed).unwrap_or_else(|e| panic!("{e}: {closed:?}"));
    assert_eq!(control["cancel"], true);
    assert!(control["errorMessage"]
        .as_str()
        .unwrap()
        .contains("AEP_CLINE_ENFORCE=closed"));
    // Only the hooks Cline waits on before a tool are stopped.
    let start = real_payload("hooks-local", "agent_start");
    assert_eq!(stdout(&sb.hook_env(&start, &[("AEP_CLINE_ENFORCE", "closed")])), "");
    // Open (the default) and unset: fail open, as ever.
    assert_eq!(stdout(&sb.hook_env(&body, &[("AEP_CLINE_ENFORCE", "open")])), "");
    assert_eq!(stdout(&sb.hook(&body)), "");
    // A typo names enforcement all the same: read as closed, and said.
    let out = sb.hook_env(&body, &[("AEP_CLINE_ENFORCE", "closd")]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read as closed"),
        "{out:?}"
    );
    assert!(stdout(&out).contains("\"cancel\":true"));
    // Every firing was still kept for the daemon.
    let spooled = std::fs::read_dir(sb.state_dir.join("spool")).unwrap().count();
    assert!(spooled >= 5, "{spooled} spooled");
}

/// Why a rule matched quotes the command: at capture `metadata` (the default) neither the log
/// nor the daemon's own log holds it; at `full` the tool.requested says why.
#[test]
fn why_a_rule_matched_is_content_kept_only_where_the_capture_allows() {
    for (capture, kept) in [("metadata", false), ("full", true)] {
        let base = Sandbox::new();
        let sb = policy(&base)
            .with_env("AEP_CAPTURE", capture)
            .with_env("RUST_LOG", "info");
        let daemon = sb.start();
        sb.hook(&real_payload("hooks-local", "agent_start"));
        let said = stdout(&sb.hook(&tool_call("rm -rf SECRET-PLACE")));
        assert!(said.contains("\"overrideInput\":null"), "{said}");
        let log = sb.log(SESSION);
        let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
        assert_eq!(requested["data"]["cline.policy_rule"], "no-rm");
        let text: String = log.iter().map(|e| e.to_string()).collect();
        assert_eq!(text.contains("SECRET-PLACE"), kept, "capture {capture}: {text}");
        assert_eq!(requested["data"].get("cline.policy_why").is_some(), kept, "{requested}");
        let (_, stderr) = daemon.stop();
        assert!(stderr.contains("guard: decided at the hook"), "{stderr}");
        assert!(
            !stderr.contains("SECRET-PLACE"),
            "the daemon's log holds the command: {stderr}"
        );
    }
}

/// #44: a call that is its session's first hook (no `agent_start` seen) is audited on its own
/// `tool.requested`, not on the `session.started` planned before it.
#[test]
fn the_audit_of_a_sessions_first_hook_lands_on_its_tool_requested() {
    let base = Sandbox::new();
    let sb = policy(&base);
    let _daemon = sb.start();
    let control = stdout(&sb.hook(&tool_call("rm -rf victim")));
    assert!(control.contains("\"overrideInput\":null"), "{control}");
    let log = sb.log(SESSION);
    let started = log.iter().find(|e| e["type"] == "session.started").unwrap();
    assert!(started["data"].get("cline.policy_rule").is_none(), "{started}");
    let requested = log.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!(requested["data"]["cline.policy_rule"], "no-rm", "{requested}");
    assert_eq!(requested["data"]["cline.policy_answer"], "deny");
}

/// A policy with an `ask` rule (#46): `git push` waits for a person, at most 5 s.
fn asking(sb: &Sandbox) -> Sandbox {
    let path = sb.root.path().join("policy.toml");
    std::fs::write(
        &path,
        "[[rule]]\nname = 'push-asks'\ntool = 'run_commands'\ncommand = 'git push *'\nanswer = 'ask'\n\
         reason = 'pushes need a person'\ntimeout = '5s'\non_timeout = 'deny'\n",
    )
    .unwrap();
    Sandbox {
        root: tempfile::tempdir().unwrap(),
        log_dir: sb.log_dir.clone(),
        state_dir: sb.state_dir.clone(),
        env: vec![("AEP_CLINE_POLICY".into(), path.to_str().unwrap().into())],
        bin: sb.bin.clone(),
    }
}

/// The shim of a held call, in a thread of its own (it waits for the answer). On a loaded
/// machine the shim may give up on the daemon's first answer (its 200 ms) and spool the firing:
/// the call then runs unguarded (open); fired again, as Cline's other hook folders fire it, the
/// same delivery waits on the same request.
fn held(sb: &Sandbox, body: Vec<u8>) -> std::thread::JoinHandle<std::process::Output> {
    held_env(sb, body, &[])
}

fn held_env(sb: &Sandbox, body: Vec<u8>, env: &[(&str, &str)]) -> std::thread::JoinHandle<std::process::Output> {
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let sb = Sandbox {
        root: tempfile::tempdir().unwrap(),
        log_dir: sb.log_dir.clone(),
        state_dir: sb.state_dir.clone(),
        env: sb.env.clone(),
        bin: sb.bin.clone(),
    };
    std::thread::spawn(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        (0..20)
            .map(|_| sb.hook_env(&body, &env))
            .find(|out| !String::from_utf8_lossy(&out.stderr).contains("spooled"))
            .expect("the daemon answered the hook within 20 firings")
    })
}

/// The request a held call waits on, once the log has it.
fn request_of(sb: &Sandbox, n: usize) -> String {
    support::wait::wait_until(
        "the held call's request in the log",
        std::time::Duration::from_secs(20),
        || {
            let log = sb.log(SESSION);
            let requests: Vec<&Value> = log.iter().filter(|e| e["type"] == "attention.requested").collect();
            requests.get(n).map(|r| r["id"].as_str().unwrap().to_string())
        },
    )
}

/// #46: an `ask` rule holds the hook while a person answers, where Cline asks nobody: answered
/// `approve` from the terminal the call goes on (the shim prints nothing); `deny` fails it with
/// the rule's words; nobody in time, the rule's `on_timeout` answers. Every step audited as a hub
/// approval is, and other hooks go on meanwhile.
#[test]
fn an_ask_rule_holds_the_hook_until_a_person_answers() {
    let base = Sandbox::new();
    let sb = asking(&base);
    let _daemon = sb.start();
    assert_eq!(stdout(&sb.hook(&real_payload("hooks-local", "agent_start"))), "");
    let person = |verb: &str, request: &str| {
        let out = sb.run(&[verb, &request[20..].to_lowercase()], &[]);
        assert!(
            out.status.success(),
            "{verb}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let call = |n: u32| {
        let mut p: Value = serde_json::from_slice(&tool_call(&format!("git push origin feature-{n}"))).unwrap();
        p["tool_call"]["id"] = json!(format!("call_ask_{n}"));
        serde_json::to_vec(&p).unwrap()
    };
    // Approved by a person.
    let waiting = held(&sb, call(1));
    let request = request_of(&sb, 0);
    // Meanwhile another hook of the session is answered at once.
    assert_eq!(stdout(&sb.hook(&tool_call("echo meanwhile"))), "");
    assert!(!waiting.is_finished(), "the held call was answered before anyone did");
    person("approve", &request);
    assert_eq!(stdout(&waiting.join().unwrap()), "", "approved: Cline goes on");
    // Denied by a person: the rule's words, the call fails alone.
    let waiting = held(&sb, call(2));
    let request = request_of(&sb, 1);
    person("deny", &request);
    let control: Value = serde_json::from_str(&stdout(&waiting.join().unwrap())).unwrap();
    assert_eq!(control["overrideInput"], Value::Null, "{control}");
    assert!(
        control["context"].as_str().unwrap().contains("\"push-asks\""),
        "{control}"
    );
    // Nobody answers: at 5 s the rule's on_timeout denies.
    let waiting = held(&sb, call(3));
    let request = request_of(&sb, 2);
    let control: Value = serde_json::from_str(&stdout(&waiting.join().unwrap())).unwrap();
    assert!(
        control["context"]
            .as_str()
            .unwrap()
            .contains("nobody answered within 5 s"),
        "{control}"
    );
    let log = sb.log(SESSION);
    let asked: Vec<&Value> = log.iter().filter(|e| e["type"] == "attention.requested").collect();
    assert_eq!(asked.len(), 3);
    for a in &asked {
        assert_eq!(a["data"]["cline.policy_rule"], "push-asks", "{a}");
        assert_eq!(a["data"]["cline.policy_answer"], "ask");
        assert_eq!(a["data"]["cline.policy_timeout"]["after_s"], 5);
        assert!(a["data"]["expires_at"].is_string());
    }
    let of = |ty: &str| log.iter().filter(|e| e["type"] == ty).count();
    assert_eq!(
        (
            of("attention.answered"),
            of("attention.resolved"),
            of("attention.timeout")
        ),
        (2, 2, 1)
    );
    let denied: Vec<&Value> = log.iter().filter(|e| e["type"] == "tool.denied").collect();
    assert_eq!(denied.len(), 2, "the person's deny and the timeout's");
    let timeout = log.iter().find(|e| e["type"] == "attention.timeout").unwrap();
    assert_eq!(timeout["subject"], request.as_str());
    assert!(
        denied.iter().any(|d| d["cause"] == timeout["id"]),
        "the timeout's deny is caused by it"
    );
    support::daemon::assert_valid_stream(&log);
}

/// #46: a call held while the daemon goes away follows `AEP_CLINE_ENFORCE`, as any hook the
/// daemon cannot answer: open lets it run, closed stops it.
#[test]
fn a_held_call_whose_daemon_goes_away_follows_enforce() {
    for (enforce, stopped) in [("open", false), ("closed", true)] {
        let base = Sandbox::new();
        let sb = asking(&base);
        let daemon = sb.start();
        sb.hook(&real_payload("hooks-local", "agent_start"));
        let waiting = held_env(
            &sb,
            tool_call("git push origin feature"),
            &[("AEP_CLINE_ENFORCE", enforce)],
        );
        request_of(&sb, 0);
        // Held: the shim waits on the request (not gone spooling it).
        support::wait::wait_until(
            "the shim to wait on the request",
            std::time::Duration::from_secs(20),
            || {
                std::thread::sleep(std::time::Duration::from_millis(300));
                (!waiting.is_finished()).then_some(())
            },
        );
        drop(daemon);
        let out = waiting.join().unwrap();
        let said = stdout(&out);
        assert_eq!(
            said.contains("\"cancel\":true"),
            stopped,
            "{enforce}: {said:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("held for a person's answer"),
            "{out:?}"
        );
    }
}
