//! `aep-cline sessions` through its index of what each log folded to (#34), the real binary on
//! real logs the real daemon wrote: every run answers as a whole read (`--no-cache`) does, byte
//! for byte, whatever happened to the logs in between (grown, new, removed, truncated,
//! rewritten in place), and an index that cannot be used (corrupt, a symlink, another
//! version) is said and rebuilt, never trusted.

use crate::support;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use support::daemon::{real_payload, Sandbox};

const SESSION: &str = "1796007203184_6l7jh";

fn hook(sb: &Sandbox, name: &str, n: u32, session: &str) {
    let mut payload: Value = serde_json::from_slice(&real_payload("hooks-local", name)).unwrap();
    let text = payload.to_string().replace(SESSION, session);
    payload = serde_json::from_str(&text).unwrap();
    payload["timestamp"] = serde_json::json!(format!("2026-12-03T10:{:02}:{:02}.000Z", n / 60 % 60, n % 60));
    sb.hook_recorded(payload.to_string().as_bytes());
}

/// `sessions --all --json` (with the index, or `--no-cache`): stdout, stderr.
fn sessions(sb: &Sandbox, cached: bool) -> (String, String) {
    let mut args = vec!["sessions", "--all", "--json"];
    if !cached {
        args.push("--no-cache");
    }
    let out = sb.run(&args, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The index file of the sandbox's log folder.
fn index_file(sb: &Sandbox) -> PathBuf {
    let dir = sb.root.path().join(".cache/aep-cline");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("sessions-index-"))
        .expect("an index")
}

/// The index answers as a whole read does, now.
fn same_as_whole(sb: &Sandbox, what: &str) -> String {
    let (cached, said) = sessions(sb, true);
    let (whole, whole_said) = sessions(sb, false);
    assert_eq!(cached, whole, "{what}: the index answers as a whole read does");
    assert_eq!(said, whole_said, "{what}: and says what it says");
    cached
}

#[test]
fn the_index_answers_as_a_whole_read_whatever_the_logs_went_through() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    for (i, s) in ["1796000000001_aaaaa", "1796000000002_bbbbb", "1796000000003_ccccc"]
        .iter()
        .enumerate()
    {
        hook(&sb, "agent_start", i as u32 * 10, s);
        hook(&sb, "tool_call", i as u32 * 10 + 1, s);
    }
    let first = same_as_whole(&sb, "first run");
    let index = index_file(&sb);
    assert_eq!(std::fs::metadata(&index).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(index.parent().unwrap()).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // Unchanged: the same answer; the index is not rewritten.
    let written = std::fs::metadata(&index).unwrap().modified().unwrap();
    assert_eq!(same_as_whole(&sb, "unchanged"), first);
    assert_eq!(std::fs::metadata(&index).unwrap().modified().unwrap(), written);

    // Grown and new.
    hook(&sb, "tool_result", 2, "1796000000001_aaaaa");
    hook(&sb, "agent_end", 3, "1796000000001_aaaaa");
    hook(&sb, "agent_start", 40, "1796000000004_ddddd");
    let grown = same_as_whole(&sb, "grown and new");
    assert_ne!(grown, first);
    let v: Value = serde_json::from_str(&grown).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 4);
    drop(daemon);

    let log = |s: &str| sb.log_dir.join("cline").join(format!("{s}.jsonl"));
    // Removed.
    std::fs::remove_file(log("1796000000004_ddddd")).unwrap();
    let v: Value = serde_json::from_str(&same_as_whole(&sb, "removed")).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    // Truncated to its first line.
    let text = std::fs::read_to_string(log("1796000000001_aaaaa")).unwrap();
    let first_line = text.split_inclusive('\n').next().unwrap().to_string();
    std::fs::write(log("1796000000001_aaaaa"), &first_line).unwrap();
    same_as_whole(&sb, "truncated");
    // Rewritten in place, longer: an early line changed, more after it.
    let text = std::fs::read_to_string(log("1796000000002_bbbbb")).unwrap();
    let changed = text.replacen("\"seq\":0", "\"seq\":0,\"x\":1", 1) + "not json\n";
    assert_ne!(changed, text);
    std::fs::OpenOptions::new()
        .write(true)
        .open(log("1796000000002_bbbbb"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, changed.as_bytes()))
        .unwrap();
    let out: Value = serde_json::from_str(&same_as_whole(&sb, "rewritten in place")).unwrap();
    let b = out
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"] == "1796000000002_bbbbb")
        .unwrap();
    assert_eq!(
        b["unread_lines"], 1,
        "the line added is counted as the whole read counts it: {b}"
    );
    // A torn last line is read once it is whole.
    let path = log("1796000000003_ccccc");
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap().to_string();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &last.as_bytes()[..last.len() / 2]))
        .unwrap();
    same_as_whole(&sb, "torn last line");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{}\n", &last[last.len() / 2..]).as_bytes()))
        .unwrap();
    same_as_whole(&sb, "the torn line whole");
}

#[test]
fn an_index_that_cannot_be_used_is_said_and_rebuilt_never_trusted() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    hook(&sb, "agent_start", 0, SESSION);
    hook(&sb, "tool_call", 1, SESSION);
    drop(daemon);
    let (right, _) = sessions(&sb, false);
    sessions(&sb, true);
    let index = index_file(&sb);

    // Corrupt: said, answered from the logs, rebuilt.
    std::fs::write(&index, b"{not json").unwrap();
    let (out, said) = sessions(&sb, true);
    assert_eq!(out, right);
    assert!(said.contains("corrupt") && said.contains("rebuilt"), "{said}");
    let (_, said) = sessions(&sb, true);
    assert!(said.is_empty(), "rebuilt: {said}");

    // Lying: an index whose summary says something else for the same file is believed only
    // while the file is the one it names; another version is dropped without a word.
    let mut v: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    v["version"] = serde_json::json!(999);
    std::fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();
    let (out, said) = sessions(&sb, true);
    assert_eq!(out, right);
    assert!(said.is_empty(), "another version is rebuilt quietly: {said}");

    // A symlink where the index belongs: not followed, said, replaced.
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::write(&elsewhere, b"keep me").unwrap();
    std::fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &index).unwrap();
    let (out, said) = sessions(&sb, true);
    assert_eq!(out, right);
    assert!(said.contains("symlink"), "{said}");
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep me", "never written through");
    assert!(
        !std::fs::symlink_metadata(&index).unwrap().file_type().is_symlink(),
        "replaced"
    );

    // --no-cache neither reads nor writes it.
    std::fs::write(&index, b"garbage").unwrap();
    let (out, said) = sessions(&sb, false);
    assert_eq!(out, right);
    assert!(said.is_empty(), "{said}");
    assert_eq!(std::fs::read(&index).unwrap(), b"garbage");
}
