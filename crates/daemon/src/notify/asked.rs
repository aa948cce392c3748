//! "What is asked": one line saying what an approval would let Cline do, from the hub frame's
//! tool name and `inputJson` (the command, the file, the query), redacted by the daemon's
//! redactor and bounded. It goes to the person in a notification and on a link's page, never
//! into an Event.

use aep_core::redact::Redactor;
use serde_json::Value;

/// The longest line, in characters (an ellipsis marks a cut).
pub const MAX_CHARS: usize = 200;

/// Keys a path travels under in Cline's tools (both generations).
const PATH_KEYS: [&str; 5] = ["path", "file_path", "filePath", "absolutePath", "target_file"];
/// Keys other tools name what they act on under.
const OTHER_KEYS: [&str; 6] = ["regex", "query", "pattern", "url", "skill", "question"];

/// `tool: what` (e.g. `run_commands: npm test`), or the tool alone when its input names nothing
/// this reads.
pub fn asked(tool: Option<&str>, input_json: Option<&str>, redactor: &Redactor) -> String {
    let tool = tool.filter(|t| !t.is_empty()).unwrap_or("a tool");
    let input: Option<Value> = input_json.and_then(|j| serde_json::from_str(j).ok());
    let what = input.as_ref().and_then(what).map(|w| redactor.redact_text(&w));
    let line = match what {
        Some(what) => format!("{tool}: {what}"),
        None => tool.to_string(),
    };
    bounded(&one_line(&line))
}

fn what(input: &Value) -> Option<String> {
    let strings = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items
                .iter()
                .filter_map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .or_else(|| first(i, &["command", "path"]).map(str::to_string))
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    // A path before `command`: the editor's `command` is its verb (create, str_replace).
    for key in ["commands", "files", "paths"] {
        let found = input.get(key).map(strings).unwrap_or_default();
        if !found.is_empty() {
            return Some(found.join("; "));
        }
    }
    if let Some(path) = first(input, &PATH_KEYS).or_else(|| first(input, &["command"])) {
        return Some(path.to_string());
    }
    if let Some(patch) = first(input, &["input", "patch"]) {
        let files: Vec<&str> = patch
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("*** ").and_then(|l| l.split_once(": ")))
            .map(|(_, f)| f.trim())
            .collect();
        return (!files.is_empty()).then(|| files.join("; "));
    }
    first(input, &OTHER_KEYS).map(str::to_string)
}

fn first<'a>(input: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()))
}

/// Line breaks and runs of blanks as one space; control characters dropped.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect()
}

fn bounded(line: &str) -> String {
    if line.chars().count() <= MAX_CHARS {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::redact::RedactOptions;

    fn redactor() -> Redactor {
        Redactor::new(RedactOptions {
            home: Some("/home/dev".into()),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn the_command_or_the_file_is_said_redacted_on_one_bounded_line() {
        let r = redactor();
        // The real hub frame's input (hub-frames.jsonl).
        assert_eq!(
            asked(Some("run_commands"), Some(r#"{"commands":["echo approved-run"]}"#), &r),
            "run_commands: echo approved-run"
        );
        assert_eq!(
            asked(
                Some("run_commands"),
                Some(r#"{"commands":["cd x &&\n  make", "ls"]}"#),
                &r
            ),
            "run_commands: cd x && make; ls"
        );
        assert_eq!(
            asked(
                Some("editor"),
                Some(r#"{"command":"create","path":"/home/dev/p/src/main.rs"}"#),
                &r
            ),
            "editor: ~/p/src/main.rs"
        );
        assert_eq!(
            asked(Some("execute_command"), Some(r#"{"command":"npm test"}"#), &r),
            "execute_command: npm test"
        );
        assert_eq!(
            asked(
                Some("read_files"),
                Some(r#"{"files":[{"path":"/home/dev/a.rs"},"b.rs"]}"#),
                &r
            ),
            "read_files: ~/a.rs; b.rs"
        );
        assert_eq!(
            asked(
                Some("apply_patch"),
                Some(r#"{"input":"*** Begin Patch\n*** Update File: src/x.rs\n@@"}"#),
                &r
            ),
            "apply_patch: src/x.rs"
        );
        let secret = asked(
            Some("run_commands"),
            Some(
                r#"{"commands":["curl -H 'Authorization: Bearer sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789' x"]}"#,
            ),
            &r,
        );
        assert!(!secret.contains("abcdefghijklmnop"), "{secret}");
        let long = asked(
            Some("run_commands"),
            Some(&format!(r#"{{"commands":["{}"]}}"#, "a".repeat(500))),
            &r,
        );
        assert_eq!(long.chars().count(), MAX_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(asked(Some("use_mcp"), Some("not json"), &r), "use_mcp");
        assert_eq!(asked(None, None, &r), "a tool");
    }
}
