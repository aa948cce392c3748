//! An app on Cline's SDK other than the CLI, for real: `@cline/core` 0.0.86 (what the CLI 3.x, the
//! VS Code extension 4.x, JetBrains and the desktop app share) on Node.js 22, driven by a host of
//! ours that runs one session as `vscode` or `jetbrains` ([`support::sdk_host`]). The SDK finds
//! the hook files `install-hooks` wrote and writes its own store; the daemon records the session,
//! names its app on `session.started` (`cline.app`), and ends it when the app is gone; `show`,
//! `sessions` and `usage` name the app and read the store where the SDK's variables put it.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use support::cline::ClineSandbox;
use support::daemon::{assert_valid_stream, of, types, Sandbox, COMPLETED_RUN};
use support::fake_model::{FakeModel, Script};
use support::wait::wait_until_seen;

const PROMPT: &str = "Run the command and report what it printed.";

/// A fake model reporting other counts on every call, a Cline home set up for it, and an
/// aep-cline sandbox whose hook files are installed there.
fn rig() -> (FakeModel, ClineSandbox, Sandbox) {
    let model = FakeModel::start(Script::default().counted());
    let cline = ClineSandbox::new(&model);
    let aep = Sandbox::new();
    aep.install_hooks_for(&cline);
    (model, cline, aep)
}

/// The one session whose log holds `session.ended`, and its Events.
fn ended_session(aep: &Sandbox) -> (String, Vec<Value>) {
    let dir = aep.log_dir.join("cline");
    wait_until_seen("the SDK host's session to end", Duration::from_secs(30), || {
        let files: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        let [file] = files.as_slice() else {
            return Err(format!("the session logs: {files:?}"));
        };
        let session = file.file_stem().unwrap().to_str().unwrap().to_string();
        let events = aep.log(&session);
        if types(&events).contains(&"session.ended") {
            Ok((session, events))
        } else {
            Err(format!("{:?}", types(&events)))
        }
    })
}

fn text(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `usage session --json --no-cache` with `env`: the row of `session`.
fn usage_row(aep: &Sandbox, env: &[(&str, &str)], session: &str) -> Value {
    let out = aep.run(&["usage", "session", "--json", "--no-cache"], env);
    let report: Value = serde_json::from_str(&text(&out)).expect("usage --json is JSON");
    report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["key"] == session).cloned())
        .unwrap_or_else(|| panic!("usage has no row of {session}: {report:#}"))
}

#[test]
fn a_vs_code_session_on_clines_sdk_is_recorded_named_and_ended_when_the_app_is_gone() {
    let (model, cline, aep) = rig();
    let daemon = aep.start();
    let (_, said) = support::sdk_host::run(&cline, support::sdk_host::command(&cline, &model, "vscode", PROMPT));
    assert_eq!(said["source"], "vscode", "{said}");
    assert_eq!(said["status"], "completed", "{said}");

    // Its hooks reached the daemon: the whole run, the app named, the usage exact. The host
    // has exited, so the session ends on the app's exit, as a CLI's does.
    let (session, events) = ended_session(&aep);
    assert_eq!(said["sessionId"], session.as_str(), "the log is the SDK's session");
    assert_eq!(types(&events), COMPLETED_RUN, "{events:#?}");
    let started = &of(&events, "session.started")[0]["data"];
    assert_eq!(started["cline.app"], "vscode", "{started}");
    assert_eq!(started["gen_ai.request.model"], "fake-model", "{started}");
    let reported = model.reported();
    assert_eq!(reported.len(), 2, "one tool call, then the answer");
    let input: u64 = reported.iter().map(|r| r.prompt).sum();
    let output: u64 = reported.iter().map(|r| r.completion).sum();
    let finished = &of(&events, "run.finished")[0]["data"];
    assert_eq!(finished["gen_ai.usage.input_tokens"], input, "{finished}");
    assert_eq!(finished["gen_ai.usage.output_tokens"], output, "{finished}");
    assert_valid_stream(&events);

    // Every view says which app: `show`, `sessions --json`, and `usage` from the SDK's store.
    let shown = text(&aep.run(&["show", &session], &[]));
    assert!(shown.contains("app VS Code"), "{shown}");
    let listed: Value = serde_json::from_str(&text(&aep.run(&["sessions", "--json"], &[]))).unwrap();
    let listed = listed
        .as_array()
        .and_then(|l| l.iter().find(|s| s["session"] == session.as_str()).cloned())
        .unwrap_or_else(|| panic!("sessions --json lists no {session}: {listed:#}"));
    assert_eq!(listed["app"], "vscode", "{listed:#}");
    let cline_dir = cline.cline_dir();
    let row = usage_row(&aep, &[("CLINE_DIR", cline_dir.to_str().unwrap())], &session);
    assert_eq!(row["app"], "vscode", "{row:#}");
    assert_eq!(row["model_calls"], 2, "{row:#}");
    drop(daemon);
}

#[test]
fn a_jetbrains_session_whose_store_clines_variables_moved_is_read_where_the_sdk_wrote_it() {
    // CLINE_SESSION_DATA_DIR puts the session folders straight under it (no `sessions/`), the
    // database staying in the data folder: the hooks inherit it, the daemon and `usage` read there.
    let (model, cline, aep) = rig();
    let daemon = aep.start();
    let moved = cline.root().join("elsewhere");
    let mut cmd = support::sdk_host::command(&cline, &model, "jetbrains", PROMPT);
    cmd.env("CLINE_SESSION_DATA_DIR", &moved);
    let (_, said) = support::sdk_host::run(&cline, cmd);
    let (session, events) = ended_session(&aep);
    assert_eq!(said["sessionId"], session.as_str());
    let manifest = moved.join(&session).join(format!("{session}.json"));
    assert!(manifest.is_file(), "the SDK wrote {}", manifest.display());
    assert!(
        !Path::new(&cline.cline_dir())
            .join("data/sessions")
            .join(&session)
            .exists(),
        "and not in the default place"
    );
    let started = &of(&events, "session.started")[0]["data"];
    assert_eq!(started["cline.app"], "jetbrains", "{started}");
    let finished = &of(&events, "run.finished")[0]["data"];
    let output: u64 = model.reported().iter().map(|r| r.completion).sum();
    assert_eq!(
        finished["gen_ai.usage.output_tokens"], output,
        "read from the moved store: {finished}"
    );
    let shown = text(&aep.run(&["show", &session], &[]));
    assert!(shown.contains("app JetBrains"), "{shown}");
    let cline_dir = cline.cline_dir();
    let env = [
        ("CLINE_DIR", cline_dir.to_str().unwrap()),
        ("CLINE_SESSION_DATA_DIR", moved.to_str().unwrap()),
    ];
    let row = usage_row(&aep, &env, &session);
    assert_eq!(row["app"], "jetbrains", "{row:#}");
    drop(daemon);
}
