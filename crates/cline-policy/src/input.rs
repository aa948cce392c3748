//! A tool call's input, read into the command lines it runs and the paths it names, in every
//! shape Cline's own tool schemas accept (both generations; docs/cline-vendor-facts.md, "Tool
//! inputs"). What is not understood is said ([`Read::unread`]): the policy never takes an input
//! it could not read for one without commands or paths.
//!
//! Cline 3.0.65's schemas (`@cline/core` `extensions/tools/schemas`) are zod unions of
//! objects that strip unknown keys: the first member that fits is used. This reader takes every
//! member that could fit, so what runs is always among what it read (a superset): a deny rule
//! sees every candidate, an approve rule needs every one to hold.

use serde_json::Value;

/// What part of a call a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Commands,
    Paths,
}

/// Something in an input the reader did not understand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub part: Part,
    pub why: String,
}

/// One command a tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A command line, read by a shell.
    Line(String),
    /// A program and its arguments, as the structured form gives them (`{command, args}`).
    Argv(Vec<String>),
}

impl Command {
    /// As one line a shell would read the same (each argument quoted).
    pub fn line(&self) -> String {
        match self {
            Command::Line(l) => l.clone(),
            Command::Argv(argv) => argv
                .iter()
                .map(|a| {
                    let plain = !a.is_empty()
                        && a.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%^".contains(&b));
                    match plain {
                        true => a.clone(),
                        false => format!("'{}'", a.replace('\'', r"'\''")),
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// A tool call's input, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    pub commands: Vec<Command>,
    pub paths: Vec<String>,
    pub unread: Vec<Unread>,
}

impl Read {
    fn unread(&mut self, part: Part, why: impl Into<String>) {
        self.unread.push(Unread { part, why: why.into() });
    }
}

/// What a tool's input holds, by its name (3.x names; 2.x's are mapped to them before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `run_commands` (2.x `execute_command`): command lines.
    Commands,
    /// `read_files` (2.x `read_file`): paths in every form the union takes.
    ReadFiles,
    /// `editor` (2.x `write_to_file`, `replace_in_file`), and the 2.x tools that name one file
    /// or folder in `path`: one path.
    OnePath,
    /// `apply_patch`: the files named in the patch text.
    Patch,
    /// 2.x `attempt_completion`: a command to show the result may come with it.
    Completion,
    /// `search_codebase`: its queries are ripgrep's positional arguments, so one starting with
    /// `-` is an option to ripgrep (`--pre=..` among them).
    Search,
    /// Tools that run no command and name no local path (fetch, questions, subagents' tasks:
    /// their own tool calls are hooked).
    Neither,
}

/// Cline's built-in tools, both generations (2.x names as `tool_name` maps them, and the
/// others as 2.x names them).
const TOOLS: &[(&str, Shape)] = &[
    ("run_commands", Shape::Commands),
    ("read_files", Shape::ReadFiles),
    ("editor", Shape::OnePath),
    ("apply_patch", Shape::Patch),
    ("search_codebase", Shape::Search),
    ("fetch_web_content", Shape::Neither),
    ("skills", Shape::Neither),
    ("ask_question", Shape::Neither),
    ("ask_followup_question", Shape::Neither),
    ("submit_and_exit", Shape::Neither),
    ("list_files", Shape::OnePath),
    ("search_files", Shape::OnePath),
    ("list_code_definition_names", Shape::OnePath),
    ("attempt_completion", Shape::Completion),
    ("plan_mode_respond", Shape::Neither),
    ("act_mode_respond", Shape::Neither),
    ("new_task", Shape::Neither),
    ("web_fetch", Shape::Neither),
    ("web_search", Shape::Neither),
    ("load_mcp_documentation", Shape::Neither),
    ("focus_chain", Shape::Neither),
    ("summarize_task", Shape::Neither),
    ("condense", Shape::Neither),
    ("report_bug", Shape::Neither),
    ("spawn_agent", Shape::Neither),
    ("switch_to_act_mode", Shape::Neither),
    ("new_rule", Shape::OnePath),
    ("browser_action", Shape::Neither),
    ("use_skill", Shape::Neither),
    ("use_subagents", Shape::Neither),
    ("generate_explanation", Shape::Neither),
];

/// Tools named by a prefix: configured subagents (`subagent_<name>`) and agent teams
/// (`team_*`) carry tasks and ids, never commands or paths.
const TOOL_PREFIXES: &[&str] = &["subagent_", "team_"];

/// A Cline 2.x tool under its 3.x name, so one rule serves both generations: `execute_command`
/// is `run_commands`, `read_file` is `read_files`, `write_to_file` and `replace_in_file` are
/// `editor`. Other names (and every 3.x name) are as Cline gives them.
pub fn tool_name(name: &str, legacy: bool) -> &str {
    if !legacy {
        return name;
    }
    match name {
        "execute_command" => "run_commands",
        "read_file" => "read_files",
        "write_to_file" | "replace_in_file" => "editor",
        other => other,
    }
}

/// Cline 3.0.65's own tools whose input check refuses `null` before they act, so a hook's
/// `overrideInput: null` makes the call fail and do nothing while the run goes on (found on the
/// real CLI for each: docs/cline-vendor-facts.md, "Hook control at tool_call"). An MCP tool is
/// not among them: its server is called whatever the input.
const FAIL_ON_NULL: &[&str] = &[
    "run_commands",
    "read_files",
    "editor",
    "apply_patch",
    "search_codebase",
    "fetch_web_content",
    "skills",
    "ask_question",
    "spawn_agent",
    "team_spawn_teammate",
];

/// Whether a 3.x tool fails before it acts when its input is replaced by `null`.
pub fn fails_on_null(tool: &str) -> bool {
    FAIL_ON_NULL.contains(&tool)
}

/// Reads `input`, the input of `tool` (3.x names).
pub fn read(tool: &str, input: &Value) -> Read {
    let mut read = Read::default();
    let shape = TOOLS
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, s)| *s)
        .or_else(|| {
            TOOL_PREFIXES
                .iter()
                .any(|p| tool.starts_with(p))
                .then_some(Shape::Neither)
        });
    let Some(shape) = shape else {
        let why = format!("{tool} is not a tool the policy knows: what its input runs or touches is not read");
        read.unread(Part::Commands, why.clone());
        read.unread(Part::Paths, why);
        return read;
    };
    match shape {
        Shape::Commands => commands(input, &mut read),
        Shape::ReadFiles => read_files(input, &mut read),
        Shape::OnePath => {
            // 2.x's write tools take absolutePath when path is empty: both are read.
            for key in ["path", "absolutePath"] {
                match input.get(key) {
                    Some(Value::String(p)) if !p.is_empty() => read.paths.push(p.clone()),
                    Some(Value::String(_)) | None => {}
                    Some(_) => read.unread(Part::Paths, format!("{key} is not a string")),
                }
            }
            if read.paths.is_empty() && read.unread.is_empty() && matches!(tool, "editor" | "new_rule") {
                read.unread(Part::Paths, "the input names no path");
            }
        }
        Shape::Search => {
            let queries: Vec<&Value> = match input {
                Value::Array(q) => q.iter().collect(),
                Value::Object(_) => match input.get("queries") {
                    Some(Value::Array(q)) => q.iter().collect(),
                    Some(q) => vec![q],
                    None => Vec::new(),
                },
                other => vec![other],
            };
            if queries.iter().any(|q| q.as_str().is_some_and(|q| q.starts_with('-'))) {
                let why = "a search query starts with -, which ripgrep takes as an option (--pre runs a program, -f reads a file)";
                read.unread(Part::Commands, why);
                read.unread(Part::Paths, why);
            }
        }
        Shape::Patch => {
            let text = match input {
                Value::String(s) => Some(s.as_str()),
                other => other.get("input").and_then(Value::as_str),
            };
            match text {
                Some(patch) => {
                    read.paths.extend(patch_paths(patch));
                    if let Some(odd) = patch.lines().find(|l| is_odd_patch_header(l)) {
                        read.unread(Part::Paths, format!("a patch line not understood ({:?})", odd.trim()));
                    }
                }
                None => read.unread(Part::Paths, "apply_patch's input is not a patch text"),
            }
        }
        Shape::Completion => match input.get("command") {
            Some(Value::String(c)) if !c.trim().is_empty() => read.commands.push(Command::Line(c.clone())),
            Some(Value::String(_)) | None => {}
            Some(_) => read.unread(Part::Commands, "attempt_completion's command is not a string"),
        },
        Shape::Neither => {}
    }
    // Cline 2.18 decodes HTML entities in a command after the hook when its model is Gemini
    // (`echo a &gt; f` runs `echo a > f`): the decoded line is read too.
    let decoded: Vec<Command> = read
        .commands
        .iter()
        .filter_map(|c| match c {
            Command::Line(l) if l.contains('&') => Some(decode_entities(l)).filter(|d| d != l).map(Command::Line),
            _ => None,
        })
        .collect();
    read.commands.extend(decoded);
    read
}

/// `&gt; &lt; &quot; &amp; &apos;` decoded, as Cline 2.18 does for Gemini's commands.
fn decode_entities(text: &str) -> String {
    text.replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// run_commands: a string; a list of strings or `{command, args}`; `{commands: ..}` of either,
/// or of one; `{command, args}`; `{command}`; `{cmd}`.
fn commands(input: &Value, read: &mut Read) {
    match input {
        Value::String(s) => read.commands.push(Command::Line(s.clone())),
        Value::Array(items) => entries(items, read),
        Value::Object(map) => {
            let mut any = false;
            if let Some(c) = map.get("commands") {
                any = true;
                match c {
                    Value::String(s) => read.commands.push(Command::Line(s.clone())),
                    Value::Array(items) => entries(items, read),
                    Value::Object(_) => entry(c, read),
                    _ => read.unread(Part::Commands, "commands is neither a string, a list nor a command"),
                }
            }
            if map.contains_key("command") {
                any = true;
                entry(input, read);
            }
            if let Some(c) = map.get("cmd") {
                any = true;
                match c {
                    Value::String(s) => read.commands.push(Command::Line(s.clone())),
                    _ => read.unread(Part::Commands, "cmd is not a string"),
                }
            }
            if !any {
                read.unread(Part::Commands, "the input has no commands, command or cmd");
            }
        }
        _ => read.unread(Part::Commands, "the input is neither a command, a list nor an object"),
    }
}

fn entries(items: &[Value], read: &mut Read) {
    for item in items {
        match item {
            Value::String(s) => read.commands.push(Command::Line(s.clone())),
            Value::Object(_) => entry(item, read),
            _ => read.unread(
                Part::Commands,
                "a command in the list is neither a string nor a command",
            ),
        }
    }
    // Cline joins consecutive strings into one command when they make a here-document
    // (`["bash <<EOF", "rm -rf x", "EOF"]` is one bash reading its body): read that too.
    let strings: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
    if strings.len() > 1 && strings.iter().any(|s| s.contains("<<")) {
        read.commands.push(Command::Line(strings.join("\n")));
    }
}

/// `{command, args?}`: the program and its arguments; a command with no arguments may be a
/// whole line.
fn entry(item: &Value, read: &mut Read) {
    let Some(command) = item.get("command").and_then(Value::as_str) else {
        read.unread(Part::Commands, "a command's `command` is not a string");
        return;
    };
    match item.get("args") {
        // Without args, bash runs `command` as a line.
        None | Some(Value::Null) => read.commands.push(Command::Line(command.to_string())),
        // With args, no shell: the program and its arguments as they are.
        Some(Value::Array(args)) if args.iter().all(Value::is_string) => {
            let mut argv = vec![command.to_string()];
            argv.extend(args.iter().filter_map(Value::as_str).map(str::to_string));
            read.commands.push(Command::Argv(argv));
        }
        // Args Cline's schema refuses: it falls back to `{command}`, a line for bash.
        Some(_) => read.commands.push(Command::Line(command.to_string())),
    }
}

/// read_files: a path string; a list of paths or files; `{files|paths|file_paths: ..}` of a
/// string, a file or a list of them; one file. A file is `{path}`, `{file_path}` or
/// `{filePath}`.
fn read_files(input: &Value, read: &mut Read) {
    match input {
        Value::String(s) => read.paths.push(s.clone()),
        Value::Array(items) => files(items, read),
        Value::Object(map) => {
            let mut any = false;
            for key in ["files", "paths", "file_paths"] {
                if let Some(v) = map.get(key) {
                    any = true;
                    match v {
                        Value::String(s) => read.paths.push(s.clone()),
                        Value::Array(items) => files(items, read),
                        Value::Object(_) => file(v, read),
                        _ => read.unread(Part::Paths, format!("{key} is neither a path, a file nor a list")),
                    }
                }
            }
            if ["path", "file_path", "filePath"].iter().any(|k| map.contains_key(*k)) {
                any = true;
                file(input, read);
            }
            if !any {
                read.unread(Part::Paths, "the input names no files");
            }
        }
        _ => read.unread(Part::Paths, "the input is neither a path, a list nor an object"),
    }
}

fn files(items: &[Value], read: &mut Read) {
    for item in items {
        match item {
            Value::String(s) => read.paths.push(s.clone()),
            Value::Object(_) => file(item, read),
            _ => read.unread(Part::Paths, "a file in the list is neither a path nor a file"),
        }
    }
}

/// A file: every one of `path`, `file_path`, `filePath` it has (the union takes the first that
/// fits; all are read).
fn file(item: &Value, read: &mut Read) {
    // An element of only a line range belongs to the file before it.
    if let Value::Object(map) = item {
        if !map.is_empty() && map.keys().all(|k| k == "start_line" || k == "end_line") {
            return;
        }
    }
    let mut any = false;
    for key in ["path", "file_path", "filePath"] {
        match item.get(key) {
            Some(Value::String(s)) => {
                any = true;
                read.paths.push(s.clone());
            }
            Some(_) => {
                any = true;
                read.unread(Part::Paths, format!("a file's {key} is not a string"));
            }
            None => {}
        }
    }
    if !any {
        read.unread(Part::Paths, "a file has no path, file_path or filePath");
    }
}

/// A `*** ` line of a patch that is none of the markers and headers Cline reads.
fn is_odd_patch_header(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("***")
        && ![
            "*** Begin Patch",
            "*** End Patch",
            "*** End of File",
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .any(|p| l.starts_with(p))
}

/// The files a patch names (`*** Add File: PATH`, Update, Delete, `*** Move to: PATH`).
pub fn patch_paths(patch: &str) -> Vec<String> {
    patch
        .lines()
        .filter_map(|l| {
            [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|p| l.trim_start().strip_prefix(p))
            .map(|p| p.trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(tool: &str, input: Value) -> Vec<String> {
        let r = read(tool, &input);
        assert!(r.unread.is_empty(), "{input}: {:?}", r.unread);
        r.commands.iter().map(Command::line).collect()
    }

    #[test]
    fn every_shape_of_run_commands_is_read() {
        assert_eq!(lines("run_commands", json!({"commands": ["ls", "pwd"]})), ["ls", "pwd"]);
        assert_eq!(lines("run_commands", json!("rm -rf victim")), ["rm -rf victim"]);
        assert_eq!(lines("run_commands", json!(["rm -rf victim"])), ["rm -rf victim"]);
        assert_eq!(
            lines("run_commands", json!({"cmd": "rm -rf victim"})),
            ["rm -rf victim"]
        );
        assert_eq!(
            lines("run_commands", json!({"commands": "rm -rf victim"})),
            ["rm -rf victim"]
        );
        assert_eq!(
            lines("run_commands", json!({"command": "rm", "args": ["-rf", "victim"]})),
            ["rm -rf victim"]
        );
        assert_eq!(
            lines(
                "run_commands",
                json!({"commands": [{"command": "rm", "args": ["-rf", "a b"]}]})
            ),
            ["rm -rf 'a b'"]
        );
        assert_eq!(
            lines("run_commands", json!({"command": "rm -rf x", "args": [1]})),
            ["rm -rf x"]
        );
        assert_eq!(
            lines("run_commands", json!(["bash <<EOF", "rm -rf victim", "EOF"])),
            ["bash <<EOF", "rm -rf victim", "EOF", "bash <<EOF\nrm -rf victim\nEOF"]
        );
        assert_eq!(
            lines("run_commands", json!({"command": "echo a &gt; f"})),
            ["echo a &gt; f", "echo a > f"]
        );
        assert_eq!(
            lines("run_commands", json!([{"command": "rm -rf victim"}])),
            ["rm -rf victim"]
        );
        // Every member that could fit is read.
        assert_eq!(
            lines("run_commands", json!({"commands": ["ls"], "cmd": "rm -rf x"})),
            ["ls", "rm -rf x"]
        );
        for odd in [
            json!(5),
            json!({}),
            json!({"commands": 5}),
            json!({"commands": [1]}),
            json!({"command": ["rm"]}),
        ] {
            assert!(!read("run_commands", &odd).unread.is_empty(), "{odd}");
        }
    }

    #[test]
    fn every_shape_of_read_files_is_read() {
        let paths = |input: Value| {
            let r = read("read_files", &input);
            assert!(r.unread.is_empty(), "{input}: {:?}", r.unread);
            r.paths
        };
        assert_eq!(
            paths(json!({"files": [{"path": "a"}, {"file_path": "b"}, {"filePath": "c"}]})),
            ["a", "b", "c"]
        );
        assert_eq!(paths(json!({"filePath": "x"})), ["x"]);
        assert_eq!(paths(json!({"files": {"file_path": "x"}})), ["x"]);
        assert_eq!(paths(json!([{"path": "a"}, "b"])), ["a", "b"]);
        assert_eq!(paths(json!({"paths": {"filePath": "x"}})), ["x"]);
        assert_eq!(paths(json!({"file_paths": ["a", "b"]})), ["a", "b"]);
        assert_eq!(paths(json!("a")), ["a"]);
        assert_eq!(paths(json!({"path": "a", "file_path": "b"})), ["a", "b"]);
        assert_eq!(paths(json!({"files": [{"path": "a"}, {"start_line": 3}]})), ["a"]);
        for odd in [
            json!({}),
            json!({"files": [1]}),
            json!({"files": [{"name": "x"}]}),
            json!(3),
        ] {
            assert!(!read("read_files", &odd).unread.is_empty(), "{odd}");
        }
    }

    #[test]
    fn a_tool_the_policy_does_not_know_is_unread() {
        let r = read("mcp__shell__exec", &json!({"cmd": "rm -rf victim"}));
        assert_eq!(r.unread.len(), 2);
        let r = read(
            "fetch_web_content",
            &json!({"requests": [{"url": "https://x", "prompt": "p"}]}),
        );
        assert!(r.unread.is_empty() && r.commands.is_empty() && r.paths.is_empty());
        assert!(read("subagent_reviewer", &json!({"prompt": "x"})).unread.is_empty());
        let r = read("search_codebase", &json!({"queries": ["fn main", "--pre=./x"]}));
        assert_eq!(
            r.unread.len(),
            2,
            "commands and paths: ripgrep runs and reads what the option says"
        );
    }
}
