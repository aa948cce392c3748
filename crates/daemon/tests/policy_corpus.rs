//! The hostile corpus (crates/cline-policy/tests/corpus) through the live hook (#44): every
//! case fired as Cline fires a `tool_call`, through the real shim to the real daemon running
//! the corpus's policy, and what the shim prints and the log audits must be the case's answer.
//! `cline-policy`'s own test decides the same cases in the library (`policy test --cases`).

use crate::support;

use cline_policy::{cases, Answer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use support::daemon::{real_payload, Sandbox};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cline-policy/tests/corpus")
}

fn corpus() -> Vec<cases::Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| cases::parse(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect()
}

/// A session per workspace: the hooks tell the daemon the workspace, as Cline's do.
fn session_of(workspace: &str) -> String {
    format!(
        "1796007203184_ws{:x}",
        workspace.len() * 7919 + workspace.bytes().map(usize::from).sum::<usize>()
    )
}

fn payload(case: &cases::Case, call: &str) -> Vec<u8> {
    let mut p: Value = serde_json::from_slice(&real_payload("hooks-local", "tool_call")).unwrap();
    p["sessionContext"]["rootSessionId"] = json!(session_of(&case.workspace));
    p["workspaceRoots"] = json!([case.workspace]);
    p["workspaceInfo"]["rootPath"] = json!(case.workspace);
    p["tool_call"] = json!({ "id": call, "name": case.tool, "input": case.input });
    p.as_object_mut().unwrap().remove("preToolUse");
    serde_json::to_vec(&p).unwrap()
}

#[test]
fn every_case_of_the_corpus_gets_its_answer_through_the_live_hook() {
    let base = Sandbox::new();
    let policy = std::fs::read_to_string(corpus_dir().join("policy.toml")).unwrap();
    let path = base.root.path().join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    let sb = base.with_env("AEP_CLINE_POLICY", path.to_str().unwrap());
    let _daemon = sb.start();
    let cases = corpus();
    assert!(cases.len() >= 70, "{}", cases.len());
    let mut printed = HashMap::new();
    // The call id each case was answered live under.
    let mut live = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        // On a loaded machine the shim may give up on the daemon and spool the firing (Cline
        // would then run the tool: fail-open); the case is then fired again as a new call (a
        // copy of the same firing would be answered as the spooled one was: undecided).
        let (call, out) = (0..20)
            .map(|attempt| {
                let call = format!("call_corpus_{n}_{attempt}");
                let out = sb.hook(&payload(case, &call));
                (call, out)
            })
            .find(|(_, out)| !String::from_utf8_lossy(&out.stderr).contains("spooled"))
            .expect("the daemon answered the hook within 20 firings");
        assert!(out.status.success());
        printed.insert(call.clone(), String::from_utf8(out.stdout).unwrap());
        live.push(call);
    }
    // What the log audits of each call: its rule and answer on its tool.requested.
    let mut audited: HashMap<String, (Option<String>, Option<String>)> = HashMap::new();
    let mut workspaces: Vec<&str> = cases.iter().map(|c| c.workspace.as_str()).collect();
    workspaces.sort();
    workspaces.dedup();
    for ws in workspaces {
        for e in sb.log(&session_of(ws)) {
            if e["type"] == "tool.requested" {
                let call = e["data"]["tool"]["call_id"].as_str().unwrap_or_default().to_string();
                let rule = e["data"]["cline.policy_rule"].as_str().map(str::to_string);
                let answer = e["data"]["cline.policy_answer"].as_str().map(str::to_string);
                audited.insert(call, (rule, answer));
            }
        }
    }
    let mut wrong = Vec::new();
    for (case, call) in cases.iter().zip(&live) {
        let stdout = &printed[call];
        let (rule, answer) = audited.get(call).cloned().unwrap_or_default();
        let answer = answer.unwrap_or_else(|| "ask".into());
        let told = !stdout.trim().is_empty();
        // What Cline is told: the soft deny's context for the model, or the cancel's words.
        let words = serde_json::from_str::<Value>(stdout)
            .ok()
            .and_then(|c| {
                c.get("context")
                    .or_else(|| c.get("errorMessage"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let holds = answer == case.expect.as_str()
            && case.rule.as_ref().is_none_or(|r| rule.as_ref() == Some(r))
            && told == (case.expect == Answer::Deny)
            && (!told || case.rule.as_ref().is_none_or(|r| words.contains(&format!("{r:?}"))));
        if !holds {
            wrong.push(format!(
                "line {} {} {}: audited {answer} {rule:?}, printed {stdout:?}; expected {} {:?}",
                case.at, case.tool, case.input, case.expect, case.rule
            ));
        }
    }
    println!(
        "live hook: {} of {} cases answered as written",
        cases.len() - wrong.len(),
        cases.len()
    );
    assert!(
        wrong.is_empty(),
        "{} of {} wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
