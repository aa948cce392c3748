//! `aep-cline stream`, run as the built binary over the real Cline 3.0.65 streams (copied into
//! crates/cline-stream/tests/data so a clean clone does not depend on shared/).

use crate::support;

use aep_core::validate::{validate_event, StreamValidator};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cline-stream/tests/data")
}

fn real(name: &str) -> PathBuf {
    data_dir().join(name)
}

fn stream(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-cline"))
        .arg("stream")
        .args(args)
        .env("AEP_HOST", "test-host")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the aep-cline binary runs");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let input = input.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    child.wait_with_output().unwrap()
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap().to_string()).collect()
}

/// Every real stream, with the normalized and AEP event types it must produce.
const REAL: &[(&str, &[&str], &[&str])] = &[
    (
        "json-stream.jsonl",
        &["agent_message", "command", "agent_message"],
        &["run.started", "tool.requested", "tool.completed", "run.finished"],
    ),
    (
        "json-stream-local.jsonl",
        &["agent_message", "command", "agent_message"],
        &["run.started", "tool.requested", "tool.completed", "run.finished"],
    ),
    (
        "json-stream-hooks.jsonl",
        &["agent_message", "command", "agent_message"],
        &["run.started", "tool.requested", "tool.completed", "run.finished"],
    ),
    (
        "json-stream-hook-cancel.jsonl",
        &["agent_message", "aborted"],
        &["run.started", "run.cancelled"],
    ),
    (
        "json-stream-autoapprove-false.jsonl",
        &["agent_message", "command", "error", "agent_message"],
        &[
            "run.started",
            "tool.requested",
            "tool.failed",
            "error.raised",
            "run.finished",
        ],
    ),
    (
        // A lead that spawned a subagent (spawn_agent has no normalized kind yet: unknown).
        "json-stream-spawn.jsonl",
        &["agent_message", "unknown", "agent_message"],
        &["run.started", "tool.requested", "tool.completed", "run.finished"],
    ),
];

#[test]
fn every_real_stream_is_in_the_test_data() {
    let mut on_disk: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    on_disk.sort();
    let mut covered: Vec<String> = REAL.iter().map(|(n, _, _)| n.to_string()).collect();
    covered.sort();
    assert_eq!(on_disk, covered);
}

#[test]
fn real_streams_normalize_to_the_documented_schema() {
    let head = regex::Regex::new(r#"^\{"type":"[a-z_]+","line":\d+,"ts":"#).unwrap();
    for (name, want, _) in REAL {
        let out = stream(&[real(name).to_str().unwrap()], None);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(
            out.stderr.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events = json_lines(&out.stdout);
        assert_eq!(types(&events), *want, "{name}");
        for raw in String::from_utf8_lossy(&out.stdout).lines() {
            assert!(head.is_match(raw), "{name}: type, line, ts come first: {raw}");
        }
        for e in &events {
            assert!(e["line"].as_u64().unwrap() >= 1);
            assert!(e["ts"].as_str().unwrap().ends_with('Z'));
        }
    }
}

#[test]
fn the_plain_run_reads_as_expected() {
    let events = json_lines(&stream(&[real("json-stream.jsonl").to_str().unwrap()], None).stdout);
    assert_eq!(events[0]["text"], "Let me run that.");
    assert_eq!(events[1]["target"], "echo hi");
    assert_eq!(events[1]["success"], true);
    assert_eq!(events[1]["duration_ms"], 57);
    assert_eq!(events[1]["line"], 11);
    assert_eq!(events[2]["text"], "Done: the command printed hi.");
}

#[test]
fn real_streams_project_to_valid_aep() {
    for (name, _, want) in REAL {
        let out = stream(&[real(name).to_str().unwrap(), "--aep"], None);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let events = json_lines(&out.stdout);
        assert_eq!(types(&events), *want, "{name}");
        let mut validator = StreamValidator::new();
        for e in &events {
            validate_event(e).unwrap_or_else(|v| panic!("{name}: {v}: {e}"));
            validator.push(e).unwrap_or_else(|v| panic!("{name}: {v}: {e}"));
            assert!(e["source"]
                .as_str()
                .unwrap()
                .starts_with("aep://test-host/agent/cline/session/"));
        }
        let last = events.last().unwrap();
        assert_eq!(
            last["cause"], events[0]["id"],
            "{name}: the terminal is caused by run.started"
        );
    }
}

#[test]
fn json_summary_has_token_classes_and_a_null_cost_for_an_unpriced_model() {
    let out = stream(&[real("json-stream.jsonl").to_str().unwrap(), "--json-summary"], None);
    assert!(out.status.success());
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "the summary replaces the events");
    let s = &lines[0];
    assert_eq!(s["finish_reason"], "completed");
    assert_eq!(s["iterations"], 2);
    assert_eq!(s["duration_ms"], 397);
    assert_eq!(s["session"], Value::Null);
    assert_eq!(s["model"]["id"], "fake-model");
    assert_eq!(s["events"]["command"], 1);
    assert_eq!(s["lines"]["records"], 24);
    let t = &s["tokens"];
    assert_eq!(t["uncached_input"], 46);
    assert_eq!(t["cached_input"], 200);
    assert_eq!(t["cache_creation"], 0);
    assert_eq!(t["output"], 90);
    assert_eq!(t["reasoning"], Value::Null);
    assert_eq!(t["input_includes_cache"], true);
    assert_eq!(s["cost"], Value::Null);
    assert!(s["cost_note"].as_str().unwrap().contains("fake-model"));
}

#[test]
fn a_prices_file_prices_the_run() {
    let mut prices = tempfile::NamedTempFile::new().unwrap();
    prices
        .write_all(br#"{"data":[{"id":"acme/fake-model","pricing":{"prompt":"0.000001","completion":"0.000002","input_cache_read":"0.0000001"}}]}"#)
        .unwrap();
    let out = stream(
        &[
            real("json-stream.jsonl").to_str().unwrap(),
            "--json-summary",
            "--prices",
            prices.path().to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = &json_lines(&out.stdout)[0];
    // 46 uncached × $1/M + 200 cached × $0.1/M + 90 output × $2/M.
    assert_eq!(s["cost"]["total"], 0.000246);
    assert_eq!(s["cost"]["currency"], "USD");
    assert_eq!(s["cost"]["source"], "--prices file");
    assert_eq!(s["model"]["openrouter_id"], "acme/fake-model");
    assert_eq!(s["cost_note"], Value::Null);

    let aep = json_lines(
        &stream(
            &[
                real("json-stream.jsonl").to_str().unwrap(),
                "--aep",
                "--prices",
                prices.path().to_str().unwrap(),
            ],
            None,
        )
        .stdout,
    );
    let finished = &aep.last().unwrap()["data"];
    assert_eq!(finished["cost"]["total"], 0.000246);
    assert_eq!(finished["gen_ai.usage.input_tokens"], 246);

    // The table writes money as every command does: four significant digits under a cent.
    let out = stream(
        &[
            real("json-stream.jsonl").to_str().unwrap(),
            "--summary",
            "--prices",
            prices.path().to_str().unwrap(),
        ],
        None,
    );
    let table = String::from_utf8_lossy(&out.stderr);
    let total = table.lines().find(|l| l.trim_start().starts_with("total")).unwrap();
    assert!(total.ends_with("$0.0002460"), "{table}");
    assert!(table.contains("$0.00004600") && !table.contains("0.000246 "), "{table}");
}

/// #35: a prices file entry whose id has no vendor (`"fake-model"`) was loaded and never
/// matched, so the run (and a budget) counted nothing; it prices that model id from any provider.
#[test]
fn a_prices_entry_without_a_vendor_prices_that_model() {
    let mut prices = tempfile::NamedTempFile::new().unwrap();
    prices
        .write_all(br#"{"data":[{"id":"fake-model","pricing":{"prompt":"0.000001","completion":"0.000002","input_cache_read":"0.0000001"}}]}"#)
        .unwrap();
    let path = prices.path().to_str().unwrap();
    let out = stream(
        &[
            real("json-stream.jsonl").to_str().unwrap(),
            "--json-summary",
            "--prices",
            path,
        ],
        None,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = &json_lines(&out.stdout)[0];
    assert_eq!(s["cost"]["total"], 0.000246, "{s}");
    assert_eq!(s["cost"]["source"], "--prices file");
    assert_eq!(s["model"]["openrouter_id"], "fake-model");
    let aep = json_lines(
        &stream(
            &[real("json-stream.jsonl").to_str().unwrap(), "--aep", "--prices", path],
            None,
        )
        .stdout,
    );
    assert_eq!(aep.last().unwrap()["data"]["cost"]["total"], 0.000246);
}

#[test]
fn a_bad_prices_file_is_a_clear_error() {
    let mut prices = tempfile::NamedTempFile::new().unwrap();
    prices.write_all(b"{\"models\":[]}").unwrap();
    let out = stream(&["-", "--prices", prices.path().to_str().unwrap()], Some(b""));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("prices file") && err.contains("models JSON"), "{err}");
}

#[test]
fn summary_table_goes_to_stderr_and_events_stay_on_stdout() {
    let out = stream(&[real("json-stream.jsonl").to_str().unwrap(), "--summary"], None);
    assert!(out.status.success());
    assert_eq!(json_lines(&out.stdout).len(), 3);
    let table = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "cline run summary",
        "uncached input",
        "46",
        "cached input",
        "200",
        "cost unknown",
    ] {
        assert!(table.contains(needle), "{needle} missing from:\n{table}");
    }
}

#[test]
fn standard_input_is_read_with_dash_or_no_argument() {
    let input = std::fs::read(real("json-stream-hook-cancel.jsonl")).unwrap();
    for args in [&["-"][..], &[][..]] {
        let out = stream(args, Some(&input));
        assert!(out.status.success());
        assert_eq!(types(&json_lines(&out.stdout)), ["agent_message", "aborted"]);
    }
}

#[test]
fn malformed_lines_are_reported_the_stream_goes_on_and_the_exit_status_is_3() {
    let mut input = std::fs::read(real("json-stream.jsonl")).unwrap();
    input.splice(0..0, b"not json\n".iter().copied());
    input.extend_from_slice(b"{\"type\":\"run_res");
    let out = stream(&["-"], Some(&input));
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 1: "), "{err}");
    assert!(err.contains("line 26: "), "{err}");
    assert!(err.contains("2 malformed line(s) skipped"), "{err}");
    let events = json_lines(&out.stdout);
    assert_eq!(types(&events), ["agent_message", "command", "agent_message"]);
    assert_eq!(events[0]["line"], 6, "line numbers count the bad line");
}

#[test]
fn a_missing_file_and_conflicting_flags_are_refused() {
    let out = stream(&["/nonexistent/run.jsonl"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/run.jsonl") && err.contains("cline --json"),
        "{err}"
    );
    let out = stream(&["--aep", "--json-summary"], Some(b""));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn aep_events_go_on_the_session_the_caller_names() {
    let (name, _, _) = REAL[0];
    let out = stream(
        &[
            real(name).to_str().unwrap(),
            "--aep",
            "--session",
            "1796007203184_6l7jh",
        ],
        None,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events = json_lines(&out.stdout);
    assert!(!events.is_empty());
    for e in &events {
        assert_eq!(e["session"], "1796007203184_6l7jh");
        assert_eq!(
            e["source"],
            "aep://test-host/agent/cline/session/1796007203184_6l7jh/stream"
        );
    }
    // --session only means something for AEP output.
    let out = stream(&[real(name).to_str().unwrap(), "--session", "s"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_reader_that_closes_early_ends_the_command_quietly() {
    let one = std::fs::read(real("json-stream.jsonl")).unwrap();
    let input: Vec<u8> = one.iter().copied().cycle().take(one.len() * 5000).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-cline"))
        .args(["stream", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_line_over_64_mib_is_reported_as_malformed_and_the_stream_goes_on() {
    let ok = std::fs::read(real("json-stream.jsonl")).unwrap();
    let mut input = Vec::with_capacity(ok.len() + (65 << 20));
    input.extend(std::iter::repeat_n(b'x', 65 << 20));
    input.push(b'\n');
    input.extend_from_slice(&ok);
    let out = stream(&[], Some(&input));
    assert_eq!(out.status.code(), Some(3), "read to the end, one line malformed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 1") && stderr.contains("64 MiB line limit"),
        "{stderr}"
    );
    assert!(stderr.len() < 1000, "the line is not echoed");
    assert_eq!(
        types(&json_lines(&out.stdout)),
        ["agent_message", "command", "agent_message"],
        "every line after it is read"
    );
}

#[test]
fn an_endless_line_keeps_memory_flat() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-cline"))
        .args(["stream", "/dev/zero"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rss_mib = || -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    // A gigabyte of /dev/zero read (however long that takes): a held line would be far past
    // this bound.
    let read = || -> u64 {
        let io = std::fs::read_to_string(format!("/proc/{}/io", child.id())).unwrap_or_default();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    support::wait::wait_until_seen("a gigabyte read", std::time::Duration::from_secs(120), || {
        match read() {
            n if n >= 1 << 30 => Ok(()),
            n => Err(format!("{n} bytes read so far")),
        }
    });
    let peak = rss_mib();
    assert!(child.try_wait().unwrap().is_none(), "still reading");
    child.kill().unwrap();
    let _ = child.wait();
    assert!(peak > 0 && peak < 100, "peak RSS {peak} MiB");
}

#[test]
fn a_cline_2x_stream_gets_its_terminal_and_the_table_says_where_its_usage_is() {
    let file = real("cline2/d-error500.stdout.jsonl");
    let out = stream(&["--summary", file.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(
        table.contains("api_req_failed") && table.contains("3 retried request(s)"),
        "{table}"
    );
    assert!(
        table.contains("Cline 2.x streams carry no token counts") && table.contains("aep-cline usage"),
        "{table}"
    );
    let file = real("cline2/a-cmd-nohooks.stdout.jsonl");
    let out = stream(&["--aep", file.to_str().unwrap()], None);
    assert!(out.status.success());
    let events = json_lines(&out.stdout);
    let mut validator = StreamValidator::new();
    for e in &events {
        validate_event(e).unwrap();
        validator.push(e).unwrap();
    }
    assert_eq!(events.first().unwrap()["type"], "run.started");
    assert_eq!(events.last().unwrap()["type"], "run.finished");
}
