//! `aep-cline usage` over the other generation's history, as a user runs it: the task history
//! the real Cline CLI 2.18.0 wrote (`cline-usage/tests/data/cline2/`: two requests of
//! 1000 + 100n prompt tokens, 800 cached, 200 cache misses, 50 + n completion, through the
//! OpenAI-compatible provider), beside a real 3.0.65 session in the same data folder, and the
//! VS Code extension's copy of it in an editor's global storage.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cline-usage/tests/data")
        .join(name)
}

fn usage(env: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-cline"));
    cmd.arg("usage")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("aep-cline runs")
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// a-cmd's two requests: 2100 input (every input token once), of which 200 + 300 uncached
/// (the misses) and 1600 cached; 101 output.
fn a_cmd_tokens() -> Value {
    json!({"input": 2100, "uncached_input": 500, "cache_read": 1600, "cache_write": 400, "output": 101, "total": 2201})
}

#[test]
fn a_2x_cli_history_is_reported_by_the_table_not_by_clines_cost() {
    let v = json_of(&usage(
        &[("CLINE_DATA_DIR", &data("cline2/a-cmd"))],
        &["session", "--json", "--timezone", "UTC"],
    ));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    let row = &rows[0];
    assert_eq!(row["key"], "1796103184924");
    assert_eq!(row["workspace"], "/home/dev/proj");
    assert_eq!(row["model_calls"], 2);
    assert_eq!(row["tokens"], a_cmd_tokens());
    assert_eq!(row["models"][0]["provider"], "openai-compatible");
    // Cline recorded totalCost 0.009795 at the prices it was configured with; fake-model has
    // no list price, so: no price, never Cline's number and never 0. Cline's is shown beside,
    // labelled as Cline's.
    assert_eq!(row["cost_usd"], Value::Null);
    assert_eq!(row["cline_cost_usd"], 0.009795);
    let table = usage(
        &[("CLINE_DATA_DIR", &data("cline2/a-cmd"))],
        &["session", "--timezone", "UTC"],
    );
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.contains("Cline's own record (2.x totalCost)") && l.ends_with("$0.009795")),
        "{table}"
    );
    assert!(
        v["histories"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["kind"] == "Cline 2.x CLI"),
        "{v}"
    );
    assert_eq!(v["prices"]["litellm"], "1.110.2");
    assert!(v["prices"]["source"].as_str().unwrap().contains("litellm 1.110.2"));

    // The failing model's task: three HTTP 500s, no call.
    let v = json_of(&usage(
        &[("CLINE_DATA_DIR", &data("cline2/d-error500"))],
        &["session", "--json"],
    ));
    assert_eq!(v["rows"][0]["model_calls"], 0, "{v}");
    assert_eq!(v["totals"]["tokens"]["total"], 0);
}

#[test]
fn both_generations_in_one_data_folder_add_up() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&data("captured"), dir.path());
    copy_dir(&data("cline2/c-cmdfail"), dir.path());
    let v = json_of(&usage(
        &[("CLINE_DATA_DIR", dir.path())],
        &["session", "--json", "--timezone", "UTC"],
    ));
    let keys: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["1796101551589_u7fdi", "1796103200033"]);
    // 3.x: 246 in (200 cached) / 90 out; 2.x: as above.
    assert_eq!(
        v["totals"]["tokens"],
        json!({"input": 2346, "uncached_input": 546, "cache_read": 1800, "cache_write": 400, "output": 191, "total": 2537})
    );
    assert_eq!(v["totals"]["model_calls"], 4);
}

#[test]
fn the_extensions_history_is_read_from_each_editor_or_the_named_folder() {
    let home = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let cursor = home
        .path()
        .join(".config/Cursor/User/globalStorage/saoudrizwan.claude-dev");
    copy_dir(&data("cline2/a-cmd"), &cursor);
    let env = [("HOME", home.path()), ("CLINE_DATA_DIR", empty.path())];

    // Found in the editor's global storage.
    let v = json_of(&usage(&env, &["session", "--json"]));
    assert_eq!(v["rows"][0]["tokens"], a_cmd_tokens(), "{v}");
    assert!(v["histories"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["kind"] == "Cursor" && h["path"] == json!(cursor)));

    // `--extension-dir none` reads no editor's.
    let v = json_of(&usage(&env, &["session", "--json", "--extension-dir", "none"]));
    assert!(v["rows"].as_array().unwrap().is_empty(), "{v}");

    // An explicit folder, instead of the editors'.
    let elsewhere = tempfile::tempdir().unwrap();
    copy_dir(&data("cline2/c-cmdfail"), elsewhere.path());
    let v = json_of(&usage(
        &env,
        &[
            "session",
            "--json",
            "--extension-dir",
            elsewhere.path().to_str().unwrap(),
        ],
    ));
    let keys: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["1796103200033"]);

    // A named folder that holds no history is said, once, and the report still runs.
    let out = usage(
        &env,
        &[
            "session",
            "--json",
            "--extension-dir",
            "/nonexistent/saoudrizwan.claude-dev",
        ],
    );
    let v = json_of(&out);
    assert_eq!(v["problems"].as_array().unwrap().len(), 1, "{v}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("/nonexistent/saoudrizwan.claude-dev").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_truncated_task_is_named_once_and_left_out() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&data("cline2/a-cmd"), dir.path());
    copy_dir(&data("cline2/c-cmdfail"), &dir.path().join("other"));
    // Two tasks in one history: c-cmdfail's task folder beside a-cmd's, its history item added.
    std::fs::rename(
        dir.path().join("other/tasks/1796103200033"),
        dir.path().join("tasks/1796103200033"),
    )
    .unwrap();
    let ui = dir.path().join("tasks/1796103184924/ui_messages.json");
    let text = std::fs::read(&ui).unwrap();
    std::fs::write(&ui, &text[..text.len() - 10]).unwrap();
    let out = usage(&[("CLINE_DATA_DIR", dir.path())], &["session", "--json"]);
    let v = json_of(&out);
    let rows = v["rows"].as_array().unwrap();
    let calls: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| (r["key"].as_str().unwrap(), r["model_calls"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [("1796103184924", 0), ("1796103200033", 2)],
        "the whole task is left out, never half of it"
    );
    assert_eq!(v["problems"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        v["totals"]["tokens"],
        a_cmd_tokens(),
        "c-cmdfail made the same two requests"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("ui_messages.json").count(), 1, "{stderr}");
}

#[test]
fn the_help_names_the_histories_and_the_price_snapshot() {
    let out = Command::new(env!("CARGO_BIN_EXE_aep-cline"))
        .args(["usage", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "taskHistory.json",
        "saoudrizwan.claude-dev",
        "--extension-dir",
        "litellm 1.110.2",
    ] {
        assert!(help.contains(needle), "{needle} not in:\n{help}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_aep-cline"))
        .args(["stream", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("litellm 1.110.2"));
}
