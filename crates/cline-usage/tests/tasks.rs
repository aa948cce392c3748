//! The 2.x / extension reader over the task histories the real Cline CLI 2.18.0 wrote
//! (`data/cline2/`, copied from the shared captures): `a-cmd` and `c-cmdfail` made two requests
//! each with the OpenAI-compatible provider (`openai` in 2.x), the fake model reporting
//! prompt_tokens 1000 + 100n, completion 50 + n, cached 800, prompt_cache_miss_tokens 200;
//! `d-error500` made none that the model answered (HTTP 500 three times).

use cline_stream::{PriceTable, Pricing};
use cline_usage::{editors, Agent, ProblemKind, TaskStore, Tokens};
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/cline2")
        .join(name)
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

/// The two requests of a-cmd, as Tokens: input counts the cache reads, not the writes.
const A_CMD: Tokens = Tokens {
    input: (1000 - 200) + (1100 - 200),
    output: 50 + 51,
    cache_read: 800 + 800,
    cache_write: 200 + 200,
};

#[test]
fn a_2x_task_reads_as_a_session_with_one_call_per_request() {
    let (store, problem) = TaskStore::open(data("a-cmd"));
    assert!(problem.is_none());
    assert_eq!(store.task_ids(), ["1796103184924"]);
    let s = store.read_task("1796103184924");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.calls.len(), 2);
    assert_eq!(s.tokens(), A_CMD);
    // 200 + 300 uncached (the cache misses), 1600 cached: tokensIn already held the cache.
    let c = s.tokens().classes();
    assert_eq!(
        (c.uncached_input(), c.cached_input(), c.cache_creation(), c.output()),
        (Some(500), 1600, 400, 101)
    );
    assert_eq!(
        s.tokens().total(),
        2100 + 101,
        "taskHistory.json's tokensIn + tokensOut, every token once"
    );
    assert_eq!(s.workspace.as_deref(), Some("/home/dev/proj"));
    assert_eq!(
        (s.provider.as_deref(), s.model.as_deref()),
        (Some("openai-compatible"), Some("fake-model"))
    );
    assert_eq!(s.started_ms, Some(1_796_103_184_924));
    assert_eq!(s.ended_ms, Some(1_796_103_187_360));
    assert!(!s.running);
    let first = &s.calls[0];
    assert_eq!(
        (first.time_ms, first.agent.clone(), first.session.as_str()),
        (Some(1_796_103_186_134), Agent::Lead, "1796103184924")
    );
    assert_eq!(
        first.tokens,
        Tokens {
            input: 800,
            output: 50,
            cache_read: 800,
            cache_write: 200
        }
    );
}

#[test]
fn a_failing_command_and_a_failing_model_read_to_their_totals() {
    let (store, _) = TaskStore::open(data("c-cmdfail"));
    let s = store.read_task("1796103200033");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.tokens(), A_CMD, "the same two requests");
    // Three HTTP 500s: api_req_started with zeros and cancelReason streaming_failed; no call.
    let (store, _) = TaskStore::open(data("d-error500"));
    let s = store.read_task("1796103205397");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert!(s.calls.is_empty());
    assert!(s.tokens().is_zero());
}

#[test]
fn the_cost_is_the_tables_not_clines_total_cost() {
    // a-cmd through an OpenAI-compatible proxy to gpt-4.1: $2 in, $8 out, $0.50 cache read.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&data("a-cmd"), dir.path());
    let ui = dir.path().join("tasks/1796103184924/ui_messages.json");
    std::fs::write(
        &ui,
        std::fs::read_to_string(&ui)
            .unwrap()
            .replace("\"fake-model\"", "\"gpt-4.1\""),
    )
    .unwrap();
    let (store, _) = TaskStore::open(dir.path());
    let s = store.read_task("1796103184924");
    assert_eq!(s.model.as_deref(), Some("gpt-4.1"));
    let t = s.tokens();
    let Pricing::Priced(cost) = PriceTable::bundled().cost(s.provider.as_deref(), s.model.as_deref(), &t.classes())
    else {
        panic!("gpt-4.1 has a price")
    };
    // 100 fresh + 400 misses at $2/M, 1600 reads at $0.50/M, 101 out at $8/M.
    assert_eq!(cost.total, 0.002608);
    // Cline's own sum (taskHistory.json: 0.009795 at its configured $3/$15) bills the cached
    // tokens twice; at the table's prices its way would be 2100 × $2/M + 1600 × $0.50/M + ...
    assert!(cost.total < 2100.0 * 2e-6 + 1600.0 * 0.5e-6);
}

#[test]
fn bad_files_are_problems_and_never_partial_totals() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&data("a-cmd"), dir.path());
    // A truncated ui_messages.json (Cline killed while writing).
    let ui = dir.path().join("tasks/1796103184924/ui_messages.json");
    let text = std::fs::read(&ui).unwrap();
    std::fs::write(&ui, &text[..text.len() / 2]).unwrap();
    let (store, _) = TaskStore::open(dir.path());
    let s = store.read_task("1796103184924");
    assert!(s.calls.is_empty());
    assert!(
        matches!(&s.problems[..], [p] if matches!(p.kind, ProblemKind::Corrupt(_)) && p.path == ui),
        "{:?}",
        s.problems
    );

    // A task the history lists whose folder is gone.
    std::fs::remove_dir_all(dir.path().join("tasks/1796103184924")).unwrap();
    let (store, _) = TaskStore::open(dir.path());
    assert_eq!(store.task_ids(), ["1796103184924"]);
    let s = store.read_task("1796103184924");
    assert!(
        matches!(&s.problems[..], [p] if p.kind == ProblemKind::MissingMessages),
        "{:?}",
        s.problems
    );
    assert_eq!(s.workspace.as_deref(), Some("/home/dev/proj"));

    // A corrupt taskHistory.json: reported, and the task folders are still read.
    copy_dir(&data("a-cmd"), dir.path());
    std::fs::write(dir.path().join("state/taskHistory.json"), "[{\"id\":").unwrap();
    let (store, problem) = TaskStore::open(dir.path());
    assert!(matches!(problem.map(|p| p.kind), Some(ProblemKind::Corrupt(_))));
    let s = store.read_task("1796103184924");
    assert_eq!(s.tokens(), A_CMD);
    assert_eq!(s.workspace, None, "the workspace was only in the history");

    // Not JSON where a request's counts should be: that request is no call, the rest count.
    let mut ui_json: serde_json::Value = serde_json::from_slice(&std::fs::read(&ui).unwrap()).unwrap();
    let req = ui_json
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|m| m["say"] == "api_req_started")
        .unwrap();
    req["text"] = "{not json".into();
    std::fs::write(&ui, serde_json::to_vec(&ui_json).unwrap()).unwrap();
    let s = TaskStore::open(dir.path()).0.read_task("1796103184924");
    assert_eq!(s.calls.len(), 1);

    // No history at all: nothing, and no problem.
    let empty = tempfile::tempdir().unwrap();
    let (store, problem) = TaskStore::open(empty.path());
    assert!(problem.is_none() && !store.exists() && store.task_ids().is_empty());
}

#[test]
fn the_provider_comes_from_task_metadata_when_messages_do_not_say() {
    // Older extension versions wrote no modelInfo on messages.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&data("a-cmd"), dir.path());
    let ui = dir.path().join("tasks/1796103184924/ui_messages.json");
    let mut ui_json: serde_json::Value = serde_json::from_slice(&std::fs::read(&ui).unwrap()).unwrap();
    for m in ui_json.as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("modelInfo");
    }
    std::fs::write(&ui, serde_json::to_vec(&ui_json).unwrap()).unwrap();
    let s = TaskStore::open(dir.path()).0.read_task("1796103184924");
    assert_eq!(
        s.tokens(),
        A_CMD,
        "task_metadata.json's model_usage says openai, so the same rule"
    );
    assert_eq!(
        (s.provider.as_deref(), s.model.as_deref()),
        (Some("openai-compatible"), Some("fake-model"))
    );
}

#[test]
fn the_extensions_history_is_found_in_each_editors_global_storage() {
    let home = tempfile::tempdir().unwrap();
    let code = home
        .path()
        .join(".config/Code/User/globalStorage/saoudrizwan.claude-dev");
    let cursor = home
        .path()
        .join("Library/Application Support/Cursor/User/globalStorage/saoudrizwan.claude-dev");
    copy_dir(&data("a-cmd"), &code);
    copy_dir(&data("c-cmdfail"), &cursor);
    let found = editors::found(home.path(), None);
    let names: Vec<_> = found.iter().map(|e| (e.editor, e.root.clone())).collect();
    assert_eq!(names, [("VS Code", code.clone()), ("Cursor", cursor)]);
    let (store, _) = TaskStore::open(&found[0].root);
    assert_eq!(store.read_task("1796103184924").tokens(), A_CMD);
    assert!(editors::found(home.path(), Some(&home.path().join("elsewhere")))
        .iter()
        .all(|e| e.root != code));
}
