//! Cline tools: `toolName` → normalized kind and the targets one call fans out to (one per
//! command, per file, per patched file). Whether a call succeeded is `cline_hooks::outcome`'s
//! rule, shared with the hooks lane.

use serde_json::Value;

/// What a tool call did, as a normalized event `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolKind {
    /// A shell command; `target` is the command line.
    Command,
    /// A file read; `target` is the path.
    Read,
    /// A file write, edit or patch; `target` is the path.
    Write,
    /// A content or codebase search; `target` is the query.
    Search,
    /// A directory listing; `target` is the path.
    List,
    /// A skill invocation; `target` is the skill name.
    Skill,
}

impl ToolKind {
    /// The kind of a Cline `toolName` (3.x names and their 2.x ancestors); `None` for any
    /// other tool, which is reported as `unknown`.
    pub fn of(tool_name: &str) -> Option<ToolKind> {
        Some(match tool_name {
            "run_commands" | "execute_command" | "bash" => ToolKind::Command,
            "read_files" | "read_file" => ToolKind::Read,
            "editor" | "write_to_file" | "replace_in_file" | "new_rule" | "apply_patch" => ToolKind::Write,
            "search_files" | "search_codebase" => ToolKind::Search,
            "list_files" => ToolKind::List,
            "skills" | "use_skill" => ToolKind::Skill,
            _ => return None,
        })
    }

    /// The normalized event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Command => "command",
            ToolKind::Read => "read",
            ToolKind::Write => "write",
            ToolKind::Search => "search",
            ToolKind::List => "list",
            ToolKind::Skill => "skill",
        }
    }
}

/// Keys a single path travels under across Cline's tool generations.
const PATH_KEYS: [&str; 5] = ["path", "file_path", "filePath", "absolutePath", "target_file"];
/// Keys the patch text of `apply_patch` travels under.
const PATCH_KEYS: [&str; 4] = ["input", "patch", "patchText", "diff"];
const QUERY_KEYS: [&str; 3] = ["regex", "query", "pattern"];
const SKILL_KEYS: [&str; 3] = ["skill", "name", "skill_name"];

/// The targets a call fans out to: one normalized event each. Never empty: a call whose input
/// names nothing yields one `None` target, so the call is still reported.
pub(crate) fn targets(kind: ToolKind, tool_name: &str, input: Option<&Value>) -> Vec<Option<String>> {
    let found = match (kind, input) {
        (_, None) => Vec::new(),
        (ToolKind::Command, Some(input)) => list_or_one(input, "commands", &["command"]),
        (ToolKind::Read, Some(input)) => {
            let mut files = list_or_one(input, "files", &PATH_KEYS);
            if files.is_empty() {
                files = list_or_one(input, "paths", &PATH_KEYS);
            }
            files
        }
        (ToolKind::Write, Some(input)) if tool_name == "apply_patch" => {
            let files = patch_text(input).map(patch_files).unwrap_or_default();
            if files.is_empty() {
                first_str(input, &PATH_KEYS).map(str::to_string).into_iter().collect()
            } else {
                files
            }
        }
        (ToolKind::Write | ToolKind::List, Some(input)) => string_or(input, &PATH_KEYS).into_iter().collect(),
        (ToolKind::Search, Some(input)) => search_query(input).into_iter().collect(),
        (ToolKind::Skill, Some(input)) => string_or(input, &SKILL_KEYS).into_iter().collect(),
    };
    if found.is_empty() {
        vec![None]
    } else {
        found.into_iter().map(Some).collect()
    }
}

/// The files an `apply_patch` patch names through its `*** Add File:`, `*** Update File:`,
/// `*** Delete File:` and `*** Move to:` markers, in order, each once.
pub(crate) fn patch_files(patch: &str) -> Vec<String> {
    const MARKERS: [&str; 4] = ["*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"];
    let mut files: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_start();
        let Some(path) = MARKERS.iter().find_map(|m| line.strip_prefix(m)) else {
            continue;
        };
        let path = path.trim();
        if !path.is_empty() && !files.iter().any(|f| f == path) {
            files.push(path.to_string());
        }
    }
    files
}

fn patch_text(input: &Value) -> Option<&str> {
    input.as_str().or_else(|| first_str(input, &PATCH_KEYS))
}

fn search_query(input: &Value) -> Option<String> {
    if let Some(q) = string_or(input, &QUERY_KEYS) {
        return Some(q);
    }
    let queries: Vec<&str> = input
        .get("queries")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (!queries.is_empty()).then(|| queries.join(" | "))
}

/// `input[list_key]` as a list (each item a string, or an object naming it under `item_keys`),
/// else the input itself as a single string or an object naming one under `item_keys`.
fn list_or_one(input: &Value, list_key: &str, item_keys: &[&str]) -> Vec<String> {
    match input.get(list_key) {
        Some(Value::Array(items)) => items.iter().map(|item| item_text(item, item_keys)).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => string_or(input, item_keys).into_iter().collect(),
    }
}

/// An item of a batch: a string, an object naming it, or (never dropped) its JSON text.
fn item_text(item: &Value, keys: &[&str]) -> String {
    item.as_str()
        .or_else(|| first_str(item, keys))
        .map(str::to_string)
        .unwrap_or_else(|| item.to_string())
}

fn string_or(input: &Value, keys: &[&str]) -> Option<String> {
    input.as_str().or_else(|| first_str(input, keys)).map(str::to_string)
}

fn first_str<'v>(input: &'v Value, keys: &[&str]) -> Option<&'v str> {
    keys.iter().find_map(|k| input.get(*k).and_then(Value::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_named_tool_has_its_kind_and_others_have_none() {
        for (name, kind) in [
            ("run_commands", ToolKind::Command),
            ("execute_command", ToolKind::Command),
            ("bash", ToolKind::Command),
            ("read_files", ToolKind::Read),
            ("read_file", ToolKind::Read),
            ("editor", ToolKind::Write),
            ("write_to_file", ToolKind::Write),
            ("replace_in_file", ToolKind::Write),
            ("new_rule", ToolKind::Write),
            ("apply_patch", ToolKind::Write),
            ("search_files", ToolKind::Search),
            ("search_codebase", ToolKind::Search),
            ("list_files", ToolKind::List),
            ("skills", ToolKind::Skill),
            ("use_skill", ToolKind::Skill),
        ] {
            assert_eq!(ToolKind::of(name), Some(kind), "{name}");
        }
        for other in ["browser_action", "ask_followup_question", "Bash", ""] {
            assert_eq!(ToolKind::of(other), None, "{other}");
        }
    }

    fn t(kind: ToolKind, tool: &str, input: Value) -> Vec<Option<String>> {
        targets(kind, tool, Some(&input))
    }

    #[test]
    fn commands_fan_out_one_per_command() {
        assert_eq!(
            t(ToolKind::Command, "run_commands", json!({"commands": ["a", "b"]})),
            [Some("a".into()), Some("b".into())]
        );
        assert_eq!(
            t(ToolKind::Command, "execute_command", json!({"command": "ls"})),
            [Some("ls".into())]
        );
        assert_eq!(t(ToolKind::Command, "bash", json!("pwd")), [Some("pwd".into())]);
        assert_eq!(
            t(ToolKind::Command, "run_commands", json!({"commands": "one"})),
            [Some("one".into())]
        );
        assert_eq!(
            t(
                ToolKind::Command,
                "run_commands",
                json!({"commands": [{"command": "x"}, 7]})
            ),
            [Some("x".into()), Some("7".into())]
        );
        assert_eq!(t(ToolKind::Command, "run_commands", json!({})), [None]);
        assert_eq!(targets(ToolKind::Command, "run_commands", None), [None]);
    }

    #[test]
    fn reads_fan_out_one_per_file() {
        assert_eq!(
            t(
                ToolKind::Read,
                "read_files",
                json!({"files": ["a.rs", {"path": "b.rs", "start_line": 3}]})
            ),
            [Some("a.rs".into()), Some("b.rs".into())]
        );
        assert_eq!(
            t(ToolKind::Read, "read_file", json!({"path": "c.rs"})),
            [Some("c.rs".into())]
        );
        assert_eq!(t(ToolKind::Read, "read_file", json!("d.rs")), [Some("d.rs".into())]);
        assert_eq!(t(ToolKind::Read, "read_files", json!({"paths": ["e", "f"]})).len(), 2);
    }

    #[test]
    fn patches_yield_one_write_per_marked_file() {
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+hi\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@\n-a\n+b\n*** Delete File: old.txt\n*** Update File: src/app.py\n*** End Patch";
        let want = ["new.txt", "src/app.py", "src/main.py", "old.txt"].map(|p| Some(p.to_string()));
        assert_eq!(t(ToolKind::Write, "apply_patch", json!({"input": patch})), want);
        assert_eq!(t(ToolKind::Write, "apply_patch", json!(patch)), want);
        assert_eq!(t(ToolKind::Write, "apply_patch", json!({"patch": patch})), want);
        assert_eq!(
            t(ToolKind::Write, "apply_patch", json!({"input": "no markers"})),
            [None]
        );
        assert_eq!(
            t(ToolKind::Write, "editor", json!({"command": "create", "path": "x"})),
            [Some("x".into())]
        );
        assert_eq!(
            t(
                ToolKind::Write,
                "write_to_file",
                json!({"absolutePath": "/y", "content": "…"})
            ),
            [Some("/y".into())]
        );
    }

    #[test]
    fn search_list_and_skill_targets() {
        assert_eq!(
            t(
                ToolKind::Search,
                "search_files",
                json!({"path": ".", "regex": "fn main"})
            ),
            [Some("fn main".into())]
        );
        assert_eq!(
            t(ToolKind::Search, "search_codebase", json!({"queries": ["a", "b"]})),
            [Some("a | b".into())]
        );
        assert_eq!(
            t(ToolKind::List, "list_files", json!({"path": "src"})),
            [Some("src".into())]
        );
        assert_eq!(
            t(ToolKind::Skill, "skills", json!({"skill": "pdf"})),
            [Some("pdf".into())]
        );
    }
}
