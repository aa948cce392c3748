//! The 3.x reader over stores the real Cline CLI 3.0.65 wrote: `data/captured/` (the shared
//! capture: one run, two model calls of 123 in / 45 out / 100 cache reads each) and
//! `data/spawn/` (a run whose lead spawned one subagent: the lead made two calls of
//! 1000 / 10 / 800 cache reads, the subagent one of 200 / 3; its `aggregateUsage` says 2000 / 20,
//! leaving the subagent out).

use cline_usage::{db, Agent, ProblemKind, Store, Tokens};
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

#[test]
fn the_captured_session_reads_to_exact_totals() {
    let store = Store::new(data("captured"));
    let ids: Vec<String> = store.session_ids().unwrap().collect();
    assert_eq!(ids, ["1796101551589_u7fdi"]);
    let s = store.read_session(&ids[0]);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.calls.len(), 2);
    assert_eq!(
        s.tokens(),
        Tokens {
            input: 246,
            output: 90,
            cache_read: 200,
            cache_write: 0
        }
    );
    let classes = s.tokens().classes();
    assert_eq!(
        (classes.uncached_input(), classes.cached_input(), classes.output()),
        (Some(46), 200, 90)
    );
    assert_eq!(s.workspace.as_deref(), Some("/home/dev/proj"));
    assert_eq!(
        (s.provider.as_deref(), s.model.as_deref()),
        (Some("openai-compatible"), Some("fake-model"))
    );
    assert!(!s.running, "a completed session is not running");
    assert_eq!(s.started_ms, Some(1_796_101_551_591));
    let first = &s.calls[0];
    assert_eq!(
        (first.time_ms, first.agent.clone(), first.parent.clone()),
        (Some(1_796_101_551_718), Agent::Lead, None)
    );
    assert_eq!(first.model.as_deref(), Some("fake-model"));
}

#[test]
fn subagents_are_counted_with_their_root_session() {
    let store = Store::new(data("spawn"));
    let s = store.read_session("1796119470170_u9r4q");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.subagents, ["agent_1796119471188_obbix1"]);
    assert_eq!(
        s.tokens(),
        Tokens {
            input: 2200,
            output: 23,
            cache_read: 1600,
            cache_write: 0
        }
    );
    let sub = s.tokens_where(|c| c.agent != Agent::Lead);
    assert_eq!(
        sub,
        Tokens {
            input: 200,
            output: 3,
            cache_read: 0,
            cache_write: 0
        }
    );
    let call = s.calls.iter().find(|c| c.agent != Agent::Lead).unwrap();
    assert_eq!(call.session, "1796119470170_u9r4q__agent_1796119471188_obbix1");
    assert_eq!(call.parent.as_deref(), Some("1796119470170_u9r4q"));

    let rows = db::subagents(&store.database()).unwrap();
    let row = &rows["1796119470170_u9r4q__agent_1796119471188_obbix1"];
    assert_eq!(row.parent_session_id.as_deref(), Some("1796119470170_u9r4q"));
    assert_eq!(row.agent_id.as_deref(), Some("agent_1796119471188_obbix1"));
    assert_eq!(row.parent_agent_id.as_deref(), Some("agent_1796119470496_wfdzhb"));
}

fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(data(name).join("sessions"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

#[test]
fn a_truncated_messages_file_is_a_problem_and_no_calls_never_half() {
    let dir = copy_of("spawn");
    let sub = dir
        .path()
        .join("sessions/1796119470170_u9r4q/agent_1796119471188_obbix1.messages.json");
    let text = std::fs::read_to_string(&sub).unwrap();
    std::fs::write(&sub, &text[..text.len() / 2]).unwrap();
    let s = Store::new(dir.path()).read_session("1796119470170_u9r4q");
    assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    assert_eq!(s.problems[0].path, sub);
    assert!(matches!(s.problems[0].kind, ProblemKind::Corrupt(_)));
    // The lead's calls are still whole; the subagent's are left out, not guessed.
    assert_eq!(
        s.tokens(),
        Tokens {
            input: 2000,
            output: 20,
            cache_read: 1600,
            cache_write: 0
        }
    );
}

/// Pads the JSON object in `path` past `bytes` with a field `key` of that much text (and, for
/// a messages file, a user message as long at the front), keeping what it means.
fn pad(path: &std::path::Path, key: &str, bytes: usize) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let text = "a \"long\" line\n".repeat(bytes / 14 + 1);
    if let Some(messages) = v.get_mut("messages").and_then(|m| m.as_array_mut()) {
        let talk = serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}], "ts": 1});
        messages.insert(0, talk);
    }
    v[key] = text.into();
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    assert!(std::fs::metadata(path).unwrap().len() > bytes as u64);
}

#[test]
fn files_over_the_size_read_whole_are_parsed_as_they_are_read_to_the_same_counts() {
    let whole = Store::new(data("captured")).read_session("1796101551589_u7fdi");
    let dir = copy_of("captured");
    let root = dir.path().join("sessions/1796101551589_u7fdi");
    let over = cline_usage::vendor_file::WHOLE_UP_TO as usize + 1;
    pad(&root.join("1796101551589_u7fdi.messages.json"), "system_prompt", over);
    pad(&root.join("1796101551589_u7fdi.json"), "prompt", over);
    let s = Store::new(dir.path()).read_session("1796101551589_u7fdi");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.tokens(), whole.tokens());
    let times = |s: &cline_usage::Session| s.calls.iter().map(|c| (c.time_ms, c.model.clone())).collect::<Vec<_>>();
    assert_eq!(times(&s), times(&whole));
    assert_eq!(
        (s.started_ms, s.workspace.clone()),
        (whole.started_ms, whole.workspace.clone())
    );
    // Cut short, it is refused whole, as a file read whole is: no half of its calls.
    let messages = root.join("1796101551589_u7fdi.messages.json");
    let bytes = std::fs::read(&messages).unwrap();
    std::fs::write(&messages, &bytes[..bytes.len() - 200]).unwrap();
    let s = Store::new(dir.path()).read_session("1796101551589_u7fdi");
    assert!(
        matches!(s.problems[..], [ref p] if p.path == messages && matches!(p.kind, ProblemKind::Corrupt(_))),
        "{:?}",
        s.problems
    );
    assert!(s.calls.is_empty());
}

#[test]
fn a_missing_messages_file_and_a_corrupt_session_file_are_named() {
    let dir = copy_of("captured");
    let root = dir.path().join("sessions/1796101551589_u7fdi");
    std::fs::remove_file(root.join("1796101551589_u7fdi.messages.json")).unwrap();
    std::fs::write(root.join("1796101551589_u7fdi.json"), b"{\"session_id\": ").unwrap();
    let s = Store::new(dir.path()).read_session("1796101551589_u7fdi");
    let kinds: Vec<&ProblemKind> = s.problems.iter().map(|p| &p.kind).collect();
    assert!(matches!(kinds[0], ProblemKind::Corrupt(_)), "{kinds:?}");
    assert_eq!(kinds[1], &ProblemKind::MissingMessages);
    assert!(s.calls.is_empty());
}

#[test]
fn an_absent_store_has_no_sessions_and_an_unreadable_database_is_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path().join("nothing"));
    assert_eq!(store.session_ids().unwrap().count(), 0);
    let bad = dir.path().join("sessions.db");
    std::fs::write(&bad, b"this is not a database").unwrap();
    let p = db::subagents(&bad).unwrap_err();
    assert!(matches!(p.kind, ProblemKind::Database(_)), "{p}");
}
