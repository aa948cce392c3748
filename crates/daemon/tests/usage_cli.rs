//! `aep-cline usage` driven as a user runs it, over real stores: the one the real Cline CLI
//! 3.0.65 wrote in the shared capture, a real spawn_agent run's, and generated stores in
//! Cline's format with known totals (to the token and the cent, priced from a fixed
//! `--prices` file so the expected cents do not move with the bundled table), with bad files
//! among them.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_aep-cline")
}

fn captured(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cline-usage/tests/data")
        .join(name)
}

fn prices() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/usage-prices.json")
}

fn usage(data: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("usage")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLINE_DATA_DIR", data)
        .output()
        .expect("aep-cline runs")
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn the_real_capture_reports_exact_totals() {
    let v = json_of(&usage(
        &captured("captured"),
        &["session", "--json", "--timezone", "UTC"],
    ));
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    let row = &v["rows"][0];
    assert_eq!(row["key"], "1796101551589_u7fdi");
    assert_eq!(row["workspace"], "/home/dev/proj");
    assert_eq!(row["app"], "cli", "the session file's source: the app that ran it");
    assert_eq!(v["totals"]["app"], Value::Null, "the totals row is no one app's");
    assert_eq!(row["running"], 0);
    assert_eq!(
        row["tokens"],
        json!({"input": 246, "uncached_input": 46, "cache_read": 200, "cache_write": 0, "output": 90, "total": 336})
    );
    assert_eq!(row["cost_usd"], Value::Null, "fake-model has no price: null, never 0");
    assert_eq!(v["unpriced"][0]["model"], "fake-model");
    let table = usage(&captured("captured"), &["--timezone", "UTC"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("2026-12-01") && text.contains("no price"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    // Each footnote only with a row it explains: no `+?` row here, a `no price` one.
    assert!(!text.contains("+? = the priced part"), "{text}");
    assert!(text.contains("no price = none of its models has a price"), "{text}");
}

#[test]
fn a_subagents_tokens_are_counted_under_its_parent() {
    let v = json_of(&usage(&captured("spawn"), &["session", "--json", "--breakdown"]));
    let row = &v["rows"][0];
    // aggregateUsage says 2000 / 20: the subagent's 200 / 3 are only in its own file.
    assert_eq!(row["tokens"]["input"], 2200);
    assert_eq!(row["tokens"]["output"], 23);
    assert_eq!(row["model_calls"], 3);
    assert_eq!(
        row["subagents"],
        json!([{"agent": "agent_1796119471188_obbix1", "parent_agent": "agent_1796119470496_wfdzhb", "model_calls": 1,
                "tokens": {"input": 200, "uncached_input": 200, "cache_read": 0, "cache_write": 0, "output": 3, "total": 203}}])
    );
    let table = String::from_utf8_lossy(&usage(&captured("spawn"), &["session", "--breakdown"]).stdout).to_string();
    assert!(table.contains("└"), "{table}");
}

/// One generated session: `calls` model calls of 10,000 input (8,000 cache reads), 1,000 cache
/// writes and 500 output each, at `time_ms` + n seconds.
struct Gen<'a> {
    id: &'a str,
    workspace: &'a str,
    time_ms: i64,
    calls: usize,
    model: &'a str,
    running: bool,
}

fn write_session(data: &Path, g: &Gen) {
    let dir = data.join("sessions").join(g.id);
    std::fs::create_dir_all(&dir).unwrap();
    let started = jiff::Timestamp::from_millisecond(g.time_ms).unwrap().to_string();
    let mut head = json!({"version": 1, "session_id": g.id, "source": "cli", "pid": std::process::id(),
        "started_at": started, "status": if g.running { "running" } else { "completed" },
        "provider": "anthropic", "model": g.model, "cwd": g.workspace, "workspace_root": g.workspace,
        "metadata": {"title": "generated"}});
    if !g.running {
        head["ended_at"] = json!(started);
    }
    std::fs::write(dir.join(format!("{}.json", g.id)), head.to_string()).unwrap();
    let mut messages = vec![json!({"role": "user", "content": [{"type": "text", "text": "go"}], "ts": g.time_ms})];
    for n in 0..g.calls {
        messages.push(json!({"id": format!("m{n}"), "role": "assistant",
            "content": [{"type": "text", "text": "a \"quoted\" answer"}], "ts": g.time_ms + 1000 * n as i64 + 1,
            "modelInfo": {"id": g.model, "provider": "anthropic"},
            "metrics": {"inputTokens": 10_000, "outputTokens": 500, "cacheReadTokens": 8_000, "cacheWriteTokens": 1_000}}));
    }
    let file = json!({"version": 1, "agent": "lead", "sessionId": g.id, "messages": messages, "system_prompt": "x"});
    std::fs::write(dir.join(format!("{}.messages.json", g.id)), file.to_string()).unwrap();
}

/// USD of one generated call at the fixed prices: 2,000 fresh × $3/M + 1,000 writes × $3.75/M
/// + 8,000 reads × $0.30/M + 500 out × $15/M = $0.01965.
const CALL_USD: f64 = 0.01965;
const DAY_MS: i64 = 86_400_000;
/// 2026-12-01T12:00:00Z.
const NOON: i64 = 1_796_126_400_000;

fn generated(sessions: usize, calls: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for k in 0..sessions {
        let id = format!("17961{k:08}_gen{k:02}");
        write_session(
            dir.path(),
            &Gen {
                id: &id,
                workspace: if k % 2 == 0 { "/work/even" } else { "/work/odd" },
                time_ms: NOON + DAY_MS * (k % 3) as i64,
                calls,
                model: "claude-sonnet-4-5-20250929",
                running: false,
            },
        );
    }
    dir
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("not a number: {a}"));
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn a_generated_store_adds_up_to_the_token_and_the_cent() {
    let store = generated(30, 10);
    let p = prices();
    let v = json_of(&usage(
        store.path(),
        &["--json", "--timezone", "UTC", "--prices", p.to_str().unwrap()],
    ));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(
        rows.iter().map(|r| r["key"].as_str().unwrap()).collect::<Vec<_>>(),
        ["2026-12-01", "2026-12-02", "2026-12-03"]
    );
    for r in rows {
        assert_eq!(r["sessions"], 10);
        assert_eq!(r["model_calls"], 100);
        assert_eq!(r["tokens"]["input"], 100 * 11_000);
        assert_eq!(r["tokens"]["uncached_input"], 100 * 3_000);
        assert_eq!(r["tokens"]["output"], 100 * 500);
        close(&r["cost_usd"], 100.0 * CALL_USD);
    }
    close(&v["totals"]["cost_usd"], 300.0 * CALL_USD);
    assert_eq!(v["totals"]["tokens"]["total"], 300 * 11_500);
    assert!(v["problems"].as_array().unwrap().is_empty());

    let by_session = json_of(&usage(
        store.path(),
        &["session", "--json", "--prices", p.to_str().unwrap()],
    ));
    assert_eq!(by_session["rows"].as_array().unwrap().len(), 30);
    close(&by_session["totals"]["cost_usd"], 300.0 * CALL_USD);

    let monthly = json_of(&usage(
        store.path(),
        &[
            "monthly",
            "--json",
            "--timezone",
            "UTC",
            "--prices",
            p.to_str().unwrap(),
        ],
    ));
    assert_eq!(monthly["rows"][0]["key"], "2026-12");
    let weekly = json_of(&usage(store.path(), &["weekly", "--json", "--timezone", "UTC"]));
    // 2026-12-01 is a Tuesday: its week starts on Monday 2026-11-30.
    assert_eq!(weekly["rows"][0]["key"], "2026-11-30");
    let model = json_of(&usage(store.path(), &["model", "--json"]));
    assert_eq!(model["rows"][0]["key"], "anthropic/claude-sonnet-4-5-20250929");
    assert_eq!(model["rows"][0]["model_calls"], 300);
}

#[test]
fn dates_workspaces_and_time_zones_select_calls() {
    let store = generated(30, 10);
    let v = json_of(&usage(
        store.path(),
        &[
            "--json",
            "--timezone",
            "UTC",
            "--since",
            "2026-12-02",
            "--until",
            "20261202",
        ],
    ));
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    assert_eq!(v["totals"]["model_calls"], 100);
    let even = json_of(&usage(
        store.path(),
        &["session", "--json", "--workspace", "/work/even"],
    ));
    assert_eq!(even["rows"].as_array().unwrap().len(), 15);
    let sub = json_of(&usage(
        store.path(),
        &["--json", "--workspace", "/work/even", "--timezone", "UTC"],
    ));
    assert_eq!(sub["totals"]["model_calls"], 150);
    // Noon UTC is 21:00 in Tokyo and 01:00 the next day in Kiritimati (UTC+14).
    let east = json_of(&usage(store.path(), &["--json", "--timezone", "Pacific/Kiritimati"]));
    assert_eq!(east["rows"][0]["key"], "2026-12-02");
    let bad = usage(store.path(), &["--timezone", "Mars/Olympus"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("IANA"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let bad = usage(store.path(), &["--since", "yesterday"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bad_files_are_named_once_counted_and_left_out_of_exact_totals() {
    let store = generated(6, 4);
    let data = store.path();
    let sessions = data.join("sessions");
    let ids: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(&sessions)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    // Truncated, missing, corrupt head (its calls still count: the messages are whole).
    let truncated = sessions.join(&ids[0]).join(format!("{}.messages.json", ids[0]));
    let text = std::fs::read_to_string(&truncated).unwrap();
    std::fs::write(&truncated, &text[..text.len() - 40]).unwrap();
    let missing = sessions.join(&ids[1]).join(format!("{}.messages.json", ids[1]));
    std::fs::remove_file(&missing).unwrap();
    let head = sessions.join(&ids[2]).join(format!("{}.json", ids[2]));
    std::fs::write(&head, b"{\"session_id\": \"cut").unwrap();
    // A model with no price, and a running session.
    write_session(
        data,
        &Gen {
            id: "17969_unknown",
            workspace: "/w",
            time_ms: NOON,
            calls: 2,
            model: "mystery-model-9",
            running: false,
        },
    );
    write_session(
        data,
        &Gen {
            id: "17969_running",
            workspace: "/w",
            time_ms: NOON,
            calls: 1,
            model: "claude-sonnet-4-5-20250929",
            running: true,
        },
    );
    // A database Cline holds an exclusive lock on.
    std::fs::create_dir_all(data.join("db")).unwrap();
    let db = data.join("db/sessions.db");
    let lock = rusqlite::Connection::open(&db).unwrap();
    lock.execute_batch("CREATE TABLE sessions (session_id TEXT); PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO sessions VALUES ('x');").unwrap();

    let p = prices();
    let out = usage(data, &["session", "--json", "--prices", p.to_str().unwrap()]);
    let v = json_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for file in [&truncated, &missing, &head, &db] {
        let name = file.display().to_string();
        assert_eq!(stderr.matches(&name).count(), 1, "{name} named once:\n{stderr}");
    }
    assert_eq!(stderr.matches("mystery-model-9").count(), 1, "{stderr}");
    assert!(stderr.contains("4 files could not be used"), "{stderr}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 4);
    // 6 generated sessions of 4 calls, two of them unusable: 16 calls, plus 2 unpriced and 1 running.
    assert_eq!(v["totals"]["model_calls"], 16 + 2 + 1);
    assert_eq!(
        v["totals"]["cost_usd"],
        Value::Null,
        "an unpriced model leaves the total unknown, never 0"
    );
    close(&v["totals"]["priced_cost_usd"], 17.0 * CALL_USD);
    let running: Vec<&Value> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["running"] == 1)
        .collect();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0]["key"], "17969_running");
    let table = String::from_utf8_lossy(&usage(data, &["session"]).stdout).to_string();
    assert!(
        table.contains("17969_running*") && table.contains("still running"),
        "{table}"
    );
    // The total shows what is priced and says that a part is not.
    let total = table.lines().find(|l| l.starts_with("TOTAL")).unwrap();
    assert!(total.ends_with("+?") && total.contains('$'), "{table}");
    assert!(
        table.contains("+? = the priced part: some models have no price"),
        "{table}"
    );
    // Model names are written whole, never cut.
    let by_model = String::from_utf8_lossy(&usage(data, &["model"]).stdout).to_string();
    assert!(
        by_model.lines().any(|l| l == "anthropic/claude-sonnet-4-5-20250929"),
        "{by_model}"
    );
    assert!(!by_model.contains('…'), "{by_model}");
    drop(lock);
}

/// [`usage`], killed (and the test failed) if it has not finished within a minute.
fn usage_finishing(data: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(bin())
        .arg("usage")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLINE_DATA_DIR", data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("aep-cline runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "aep-cline usage did not finish: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// Copies the real Cline 2.18 task history `name` into the data folder `data`.
fn copy_tasks(name: &str, data: &Path) {
    let from = captured("cline2").join(name);
    for sub in ["state", "tasks"] {
        let ok = Command::new("cp")
            .arg("-r")
            .arg(from.join(sub))
            .arg(data)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

#[test]
fn fifos_devices_and_folders_where_files_are_are_named_and_skipped() {
    let store = generated(5, 2);
    let data = store.path();
    copy_tasks("a-cmd", data);
    let mut ids: Vec<String> = std::fs::read_dir(data.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    ids.sort();
    let file = |i: usize, suffix: &str| data.join("sessions").join(&ids[i]).join(format!("{}{suffix}", ids[i]));
    let (messages_fifo, head_fifo, zero, folder) = (
        file(0, ".messages.json"),
        file(1, ".json"),
        file(2, ".messages.json"),
        file(3, ".messages.json"),
    );
    mkfifo(&messages_fifo);
    mkfifo(&head_fifo);
    std::fs::remove_file(&zero).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    std::fs::remove_file(&folder).unwrap();
    std::fs::create_dir(&folder).unwrap();
    std::fs::create_dir_all(data.join("db")).unwrap();
    let db = data.join("db/sessions.db");
    mkfifo(&db);
    let history = data.join("state/taskHistory.json");
    mkfifo(&history);
    let ui = data.join("tasks/1796103184924/ui_messages.json");
    mkfifo(&ui);

    let out = usage_finishing(data, &["session", "--json"]);
    let v = json_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (path, what) in [
        (&messages_fifo, "a FIFO"),
        (&head_fifo, "a FIFO"),
        (&zero, "a device"),
        (&folder, "a folder"),
        (&db, "not a regular file"),
        (&history, "a FIFO"),
        (&ui, "a FIFO"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&path.display().to_string()))
            .unwrap_or_else(|| panic!("{} not named:\n{stderr}", path.display()));
        assert!(line.contains(what), "{line}");
    }
    // The head's session still counts (its messages are whole), and the intact one.
    assert_eq!(v["totals"]["model_calls"], 4, "{stderr}");
}

#[test]
fn absurd_counts_wrong_types_and_huge_files_are_named_never_summed() {
    let store = generated(1, 2);
    let data = store.path();
    let session = |id: &str, metrics: Value| {
        let dir = data.join("sessions").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let head = json!({"session_id": id, "status": "completed", "ended_at": "2026-12-01T12:00:01Z"});
        std::fs::write(dir.join(format!("{id}.json")), head.to_string()).unwrap();
        let call = json!({"role": "assistant", "ts": NOON + 5,
            "modelInfo": {"id": "claude-sonnet-4-5-20250929", "provider": "anthropic"}, "metrics": metrics});
        let file = json!({"messages": [call.clone(), call]});
        let path = dir.join(format!("{id}.messages.json"));
        std::fs::write(&path, file.to_string()).unwrap();
        path
    };
    let absurd = session(
        "17970_absurd",
        json!({"inputTokens": 1, "outputTokens": u64::MAX, "cacheReadTokens": 0, "cacheWriteTokens": 0}),
    );
    let arrayed = session("17970_arrayed", json!([10_000, 500, 8_000, 1_000]));
    let huge = session("17970_huge", json!({"inputTokens": 1}));
    std::fs::File::options()
        .write(true)
        .open(&huge)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();

    let out = usage_finishing(data, &["session", "--json"]);
    let v = json_of(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (path, what) in [
        (&absurd, "more than any model call can"),
        (&arrayed, "expected an object of token counts"),
        (&huge, "over the 256 MiB limit"),
    ] {
        let name = path.display().to_string();
        assert_eq!(stderr.matches(&name).count(), 1, "{name} named once:\n{stderr}");
        let line = stderr.lines().find(|l| l.contains(&name)).unwrap();
        assert!(line.contains(what), "{line}");
    }
    assert!(stderr.contains("3 files could not be used"), "{stderr}");
    assert_eq!(
        v["totals"]["tokens"],
        json!({"input": 22_000, "uncached_input": 6_000, "cache_read": 16_000, "cache_write": 2_000, "output": 1_000, "total": 23_000}),
        "only the whole, plausible session counts"
    );
}

/// `usage` with its index in `cache` (as `$XDG_CACHE_HOME`).
fn usage_cached(data: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("usage")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLINE_DATA_DIR", data)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("aep-cline runs")
}

/// Every file and folder under `dir` an hour old: settled, so the index keeps them.
fn age(dir: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            age(&p);
        }
        std::fs::File::open(&p).unwrap().set_modified(old).unwrap();
    }
    std::fs::File::open(dir).unwrap().set_modified(old).unwrap();
}

/// Rewrites the first `n` calls' 500 output tokens of `file` as 900, in place: the same size,
/// its mtime put back (the index's known limit: it looks unchanged). Returns the text before.
fn rewrite_in_place(file: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let mtime = std::fs::metadata(file).unwrap().modified().unwrap();
    std::fs::write(file, text.replacen("\"outputTokens\":500", "\"outputTokens\":900", n)).unwrap();
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    text
}

const SESSION_JSON: &[&str] = &["session", "--json", "--timezone", "UTC"];

/// The same bytes with the index as without it, and twice in a row; returns them.
fn same_with_and_without(data: &Path, cache: &Path) -> Vec<u8> {
    let plain = usage_cached(data, cache, &["session", "--json", "--timezone", "UTC", "--no-cache"]);
    assert!(plain.status.success());
    let first = usage_cached(data, cache, SESSION_JSON);
    let again = usage_cached(data, cache, SESSION_JSON);
    assert!(first.status.success() && again.status.success());
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    assert_eq!(
        first.stdout, again.stdout,
        "two runs over one store print the same bytes"
    );
    assert_eq!(first.stderr, plain.stderr);
    first.stdout
}

#[test]
fn the_index_reads_again_only_what_changed_and_counts_it_exactly() {
    use std::os::unix::fs::PermissionsExt;
    let store = generated(12, 5);
    let cache = tempfile::tempdir().unwrap();
    age(store.path());
    let bytes = same_with_and_without(store.path(), cache.path());
    let folder = cache.path().join("aep-cline");
    let index = folder.join("usage-index");
    assert_eq!(std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&index).unwrap().permissions().mode() & 0o777, 0o600);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["totals"]["model_calls"], 60);
    assert_eq!(v["totals"]["started"], "2026-12-01T12:00:00Z", "the earliest start");
    assert_eq!(v["totals"]["workspace"], Value::Null, "two workspaces: none of them");

    // The index is used: a file rewritten in place to the same size with its mtime put back
    // (the known limit) still counts as before with it, as it now is without it.
    let id = "1796100000000_gen00";
    let file = store
        .path()
        .join("sessions")
        .join(id)
        .join(format!("{id}.messages.json"));
    let text = rewrite_in_place(&file, usize::MAX);
    let cached: Value = serde_json::from_slice(&usage_cached(store.path(), cache.path(), SESSION_JSON).stdout).unwrap();
    let plain: Value =
        serde_json::from_slice(&usage_cached(store.path(), cache.path(), &["session", "--json", "--no-cache"]).stdout)
            .unwrap();
    assert_eq!(cached["totals"]["tokens"]["output"], 60 * 500);
    assert_eq!(plain["totals"]["tokens"]["output"], 55 * 500 + 5 * 900);
    std::fs::write(&file, &text).unwrap();

    // A session that grew, a new one, a removed one, a truncated file: each as without the index.
    write_session(
        store.path(),
        &Gen {
            id,
            workspace: "/work/even",
            time_ms: NOON,
            calls: 8,
            model: "claude-sonnet-4-5-20250929",
            running: false,
        },
    );
    let grown: Value = serde_json::from_slice(&same_with_and_without(store.path(), cache.path())).unwrap();
    assert_eq!(grown["totals"]["model_calls"], 63);
    write_session(
        store.path(),
        &Gen {
            id: "1796200000000_new",
            workspace: "/work/odd",
            time_ms: NOON,
            calls: 2,
            model: "m",
            running: false,
        },
    );
    std::fs::remove_dir_all(store.path().join("sessions/1796100000001_gen01")).unwrap();
    age(store.path());
    let v: Value = serde_json::from_slice(&same_with_and_without(store.path(), cache.path())).unwrap();
    assert_eq!(v["totals"]["model_calls"], 63 + 2 - 5);
    assert_eq!(v["rows"].as_array().unwrap().len(), 12);
    let victim = store
        .path()
        .join("sessions/1796100000002_gen02/1796100000002_gen02.messages.json");
    let whole = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &whole[..whole.len() / 2]).unwrap();
    let v: Value = serde_json::from_slice(&same_with_and_without(store.path(), cache.path())).unwrap();
    assert_eq!(v["totals"]["model_calls"], 60 - 5);
    assert!(
        v["problems"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("gen02.messages.json"),
        "{}",
        v["problems"]
    );
}

/// A session whose calls fall at `times` (epoch ms), one of `model` each, as [`write_session`]'s.
fn write_calls_at(data: &Path, id: &str, times: &[i64]) {
    write_session(
        data,
        &Gen {
            id,
            workspace: "/w",
            time_ms: times[0],
            calls: 0,
            model: "m",
            running: false,
        },
    );
    let messages: Vec<Value> = times
        .iter()
        .enumerate()
        .map(|(n, t)| {
            json!({"id": format!("m{n}"), "role": "assistant", "ts": t, "modelInfo": {"id": "m", "provider": "anthropic"},
                   "metrics": {"inputTokens": 10_000, "outputTokens": 500, "cacheReadTokens": 8_000, "cacheWriteTokens": 1_000}})
        })
        .collect();
    let file = json!({"version": 1, "messages": messages});
    std::fs::write(
        data.join("sessions").join(id).join(format!("{id}.messages.json")),
        file.to_string(),
    )
    .unwrap();
}

#[test]
fn the_index_places_calls_on_the_dates_of_every_zone_as_a_full_read_does() {
    // The index keeps each file's calls as sums per UTC quarter-hour. A call every 7 minutes
    // for 26 hours crosses midnight in every zone; the quarter 18:45-19:00 UTC holds 23:53 and
    // 00:05 of a zone at +05:07, which the index cannot split: that file is read again.
    let store = tempfile::tempdir().unwrap();
    let start = NOON - 12 * 3_600_000;
    let mut times: Vec<i64> = (0..223).map(|k| start + k * 7 * 60_000 + 13_000).collect();
    let odd_midnight = NOON + 6 * 3_600_000 + 53 * 60_000; // 18:53 UTC = 00:00 at +05:07
    times.extend([odd_midnight - 7 * 60_000, odd_midnight + 5 * 60_000]);
    times.sort();
    write_calls_at(store.path(), "1796100000000_zones", &times);
    write_calls_at(store.path(), "1796100000001_other", &[NOON + 3_600_000]);
    age(store.path());
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str], tz: &str| {
        let out = Command::new(bin())
            .arg("usage")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CLINE_DATA_DIR", store.path())
            .env("XDG_CACHE_HOME", cache.path())
            .env("TZ", tz)
            .output()
            .expect("aep-cline runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let asks: Vec<Vec<&str>> = vec![
        vec!["daily", "--json"],
        vec!["weekly", "--json"],
        vec!["monthly", "--json"],
        vec!["session", "--json", "--since", "2026-12-01", "--until", "2026-12-01"],
        vec!["model", "--json", "--since", "2026-12-02"],
    ];
    let zones = [
        ("UTC", None),
        ("Asia/Kathmandu", None),
        ("Australia/Eucla", None),
        ("America/St_Johns", None),
        ("Pacific/Chatham", None),
        ("system", Some("XXX-05:07")),
    ];
    for ask in &asks {
        for (zone, tz) in zones {
            let mut args = ask.clone();
            if tz.is_none() {
                args.extend(["--timezone", zone]);
            }
            let tz = tz.unwrap_or("UTC");
            let mut plain = args.clone();
            plain.push("--no-cache");
            let want = run(&plain, tz);
            assert_eq!(run(&args, tz), want, "{args:?} TZ={tz}: the first run");
            assert_eq!(run(&args, tz), want, "{args:?} TZ={tz}: from the index");
        }
    }
    let daily = |tz: &str| -> Value { serde_json::from_str(&run(&["daily", "--json"], tz)).unwrap() };
    let odd = daily("XXX-05:07");
    let before = times.iter().filter(|t| **t < odd_midnight).count() + 1;
    assert_eq!(odd["rows"][0]["key"], "2026-12-01", "{odd}");
    assert_eq!(odd["rows"][0]["model_calls"], before, "{odd}");
    assert_eq!(odd["rows"][1]["model_calls"], 226 - before, "{odd}");
    assert_eq!(odd["totals"]["model_calls"], 226);

    // Both ways are taken: the file rewritten in place to the same size, its mtime put back
    // (the index's known limit), still counts as before where the sums fit the zone, and is
    // read again (the new count) where they do not.
    let file = store
        .path()
        .join("sessions/1796100000000_zones/1796100000000_zones.messages.json");
    rewrite_in_place(&file, 1);
    assert_eq!(daily("UTC")["totals"]["tokens"]["output"], 226 * 500, "from the index");
    assert_eq!(
        daily("XXX-05:07")["totals"]["tokens"]["output"],
        225 * 500 + 900,
        "read again"
    );
}

#[test]
fn a_corrupt_foreign_fifo_or_linked_index_is_rebuilt_and_an_unwritable_folder_breaks_nothing() {
    let store = generated(4, 3);
    age(store.path());
    let cache = tempfile::tempdir().unwrap();
    let folder = cache.path().join("aep-cline");
    let index = folder.join("usage-index");
    let want = usage_cached(store.path(), cache.path(), &["session", "--json", "--no-cache"]);
    assert!(!folder.exists(), "--no-cache writes nothing");
    let run = || {
        let out = usage_cached(store.path(), cache.path(), &["session", "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, want.stdout);
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(&index, b"not an index at all").unwrap();
    let said = run();
    assert_eq!(said.matches("could not be used").count(), 1, "{said}");
    assert_eq!(run(), "", "rebuilt: the next run says nothing");
    // Another version's index: rebuilt without a word.
    let mut foreign = std::fs::read(&index).unwrap();
    foreign[b"aep-cline usage index\n".len()] ^= 0x7f;
    std::fs::write(&index, foreign).unwrap();
    assert_eq!(run(), "");
    // A FIFO where the index belongs: never waited on, replaced.
    std::fs::remove_file(&index).unwrap();
    mkfifo(&index);
    assert!(run().contains("not a regular file"));
    assert!(std::fs::symlink_metadata(&index).unwrap().is_file());
    // A symlink to a file elsewhere: not followed, not written through.
    let elsewhere = cache.path().join("elsewhere");
    std::fs::write(&elsewhere, b"someone's file").unwrap();
    std::fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &index).unwrap();
    assert!(run().contains("symlink"));
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"someone's file");
    assert!(std::fs::symlink_metadata(&index).unwrap().is_file());
    // A cache folder that cannot be made (a file stands in its path): the report is whole.
    let blocked = cache.path().join("a-file");
    std::fs::write(&blocked, b"").unwrap();
    let out = usage_cached(store.path(), &blocked, &["session", "--json"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, want.stdout);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(said.matches("cannot keep the index").count(), 1, "{said}");
}

#[test]
fn a_session_its_log_says_ended_is_not_shown_running() {
    // Cline's store still says running (its pid lives: this test's), aep-cline's log says the
    // session ended (`aep-cline end`, the reconciler): usage shows it ended, as `sessions` does.
    let data = tempfile::tempdir().unwrap();
    for (id, running) in [("17969_ended", true), ("17969_live", true)] {
        write_session(
            data.path(),
            &Gen {
                id,
                workspace: "/w",
                time_ms: NOON,
                calls: 1,
                model: "claude-sonnet-4-5",
                running,
            },
        );
    }
    let logs = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(logs.path().join("cline")).unwrap();
    let ev = |seq: u64, ty: &str| {
        json!({"aep": "0.1", "id": format!("e{seq}"), "type": ty, "time": "2026-12-01T12:00:05Z",
               "source": "aep://h/agent/cline", "agent": "cline", "session": "17969_ended", "seq": seq, "data": {}})
        .to_string()
    };
    std::fs::write(
        logs.path().join("cline/17969_ended.jsonl"),
        format!("{}\n{}\n", ev(0, "session.started"), ev(1, "session.ended")),
    )
    .unwrap();
    let run = |with_logs: bool| {
        let mut cmd = Command::new(bin());
        cmd.args(["usage", "session", "--json", "--no-cache", "--prices"])
            .arg(prices())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CLINE_DATA_DIR", data.path());
        if with_logs {
            cmd.env("AEP_LOG_DIR", logs.path());
        }
        json_of(&cmd.output().unwrap())
    };
    let running = |v: &Value, key: &str| {
        v["rows"].as_array().unwrap().iter().find(|r| r["key"] == key).unwrap()["running"].clone()
    };
    let without = run(false);
    assert_eq!(running(&without, "17969_ended"), 1, "the store alone says running");
    let with = run(true);
    assert_eq!(running(&with, "17969_ended"), 0, "the log says it ended: {with:#}");
    assert_eq!(
        running(&with, "17969_live"),
        1,
        "a session the log does not end stays running"
    );
    assert_eq!(with["totals"]["running"], 1);
    assert_eq!(with["prices"]["from"], "--prices or AEP_CLINE_PRICES");
}
