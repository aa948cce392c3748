//! What a pending approval asks, for the owner's eyes only (the local view): the hub's
//! `approval.requested` input (`inputJson`) reduced to a small, bounded [`Detail`]: the
//! command(s), the file(s) and a diff summary, the tool's other arguments.
//!
//! Pure: the input in, a [`Detail`] out; no I/O. Every string shown went through the log's
//! redactor (AEP-0003 §9.4) before it was cut to length, so a cut never leaves a secret's
//! prefix behind a pattern it no longer matches. Then it is made visible
//! ([`aep_core::text::visible`]: a right-to-left override or a zero-width space shows as
//! `\u{202e}`, a newline stays a line break), and a cut says how many characters it hid: what
//! a person approves from is what runs. Line counts come from the raw input (a count
//! is not content). A [`Detail`] never enters an Event: the capture ceiling alone governs those
//! ([`crate::attention`]).
//!
//! Tool inputs as Cline 3.0.65 (`@cline/core` 0.0.86) declares them: `run_commands {commands:
//! [string | {command, args}]}` (also a bare string, `{command}`, `{cmd}`), `editor {path,
//! old_text, new_text, insert_line}`, `apply_patch {input}` (the `*** Begin Patch` grammar, or
//! the patch as a bare string). Any other tool shows its arguments.

use crate::frame::ApprovalRequested;
use aep_core::redact::Redactor;
use serde::Serialize;
use serde_json::Value;

/// An input longer than this is not read: the detail says how long it was.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// Characters kept of one command, path or argument value (the rest are counted).
pub const MAX_TEXT_CHARS: usize = 400;
/// Where a cut text is shown whole, as a cut says.
const WHOLE_AT: &str = "Cline";
/// Commands, files and arguments kept (each list; the rest are counted in `more`).
pub const MAX_ITEMS: usize = 8;

/// What one approval asks, bounded and redacted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Detail {
    /// The tool's name as the hub gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The shell command(s) it would run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// The file(s) it would write or read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Lines added and removed, for an edit, a write or a patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    /// Its other arguments, `name` and a one-line value, in input order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<Arg>,
    /// Commands, files or arguments left out past [`MAX_ITEMS`].
    #[serde(skip_serializing_if = "is_zero")]
    pub more: usize,
    /// Why the input could not be read (not JSON, too large): shown instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
    /// Nothing cut and no item left out ([`Detail::whole`]), for the page that shows all of it.
    #[serde(skip)]
    whole: bool,
}

/// A diff summary: `+12 −3 lines`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub added: usize,
    pub removed: usize,
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "+{} \u{2212}{} lines", self.added, self.removed)
    }
}

/// One argument: its name and its value on one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Arg {
    pub name: String,
    pub value: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Detail {
    /// What an `approval.requested` asks.
    pub fn requested(approval: &ApprovalRequested, redactor: &Redactor) -> Detail {
        Detail::of(approval.tool_name.as_deref(), approval.input_json.as_deref(), redactor)
    }

    /// The detail in a few words, for a notification: `tool: what`, what being its commands,
    /// else its files (with the diff summary), else its first argument, and how many more
    /// there are; the tool alone when the input says none of these or could not be read.
    /// Unbounded: each part is already cut (or, [`Detail::whole`], not at all). A command's
    /// newlines are kept.
    pub fn summary(&self) -> String {
        let tool = self.tool.as_deref().filter(|t| !t.is_empty()).unwrap_or("a tool");
        let what = if !self.commands.is_empty() {
            Some(self.commands.join("; "))
        } else if !self.files.is_empty() {
            Some(match self.diff {
                Some(d) if d.added + d.removed > 0 => format!("{} ({d})", self.files.join("; ")),
                _ => self.files.join("; "),
            })
        } else {
            self.args.first().map(|a| format!("{} {}", a.name, a.value))
        };
        match (what, self.more) {
            (Some(what), 0) => format!("{tool}: {what}"),
            (Some(what), more) => format!("{tool}: {what}; and {more} more"),
            (None, _) => tool.to_string(),
        }
    }

    /// [`Detail::of`] with nothing cut and every item kept (the input is still bounded by
    /// [`MAX_INPUT_BYTES`]): what the approval link's page shows, all of what would run.
    pub fn whole(tool: Option<&str>, input_json: Option<&str>, redactor: &Redactor) -> Detail {
        Detail::read(tool, input_json, redactor, true)
    }

    /// The detail of a tool call: `tool` and its input as the hub sends it (`inputJson`).
    pub fn of(tool: Option<&str>, input_json: Option<&str>, redactor: &Redactor) -> Detail {
        Detail::read(tool, input_json, redactor, false)
    }

    fn read(tool: Option<&str>, input_json: Option<&str>, redactor: &Redactor, whole: bool) -> Detail {
        let mut d = Detail {
            whole,
            ..Detail::default()
        };
        d.tool = tool.map(|t| d.one_line(&redactor.redact_text(t)));
        let Some(input) = input_json else { return d };
        if input.len() > MAX_INPUT_BYTES {
            d.unreadable = Some(format!(
                "the tool input is {} bytes, more than the {MAX_INPUT_BYTES} shown here: see it in Cline",
                input.len()
            ));
            return d;
        }
        let raw: Value = match serde_json::from_str(input) {
            Ok(v) => v,
            Err(e) => {
                d.unreadable = Some(format!("the tool input is not JSON ({e}): see it in Cline"));
                return d;
            }
        };
        let shown = redactor.redact_value(&raw);
        match tool.unwrap_or_default() {
            "run_commands" | "execute_command" => d.commands_of(&shown),
            "editor" => d.edit_of(&raw, &shown),
            "apply_patch" => d.patch_of(&raw, &shown),
            "write_to_file" => d.write_of(&raw, &shown),
            _ => d.args_of(&shown, &[]),
        }
        d
    }

    /// Whether another command, file or argument is kept (else it is counted in `more`).
    fn room(&self, len: usize) -> bool {
        self.whole || len < MAX_ITEMS
    }

    /// A command or a value as shown: visible, its newlines kept, cut unless whole.
    fn text(&self, text: &str) -> String {
        let keep = if self.whole { usize::MAX } else { MAX_TEXT_CHARS };
        aep_core::text::shown(text, keep, false).told(Some(WHOLE_AT))
    }

    /// A tool's name, a path or an argument's name: visible on one line, cut unless whole.
    fn one_line(&self, text: &str) -> String {
        let keep = if self.whole { usize::MAX } else { MAX_TEXT_CHARS };
        aep_core::text::shown(text, keep, true).told(Some(WHOLE_AT))
    }

    fn command(&mut self, text: String) {
        match self.room(self.commands.len()) {
            true => self.commands.push(self.text(&text)),
            false => self.more += 1,
        }
    }

    fn file(&mut self, path: &str) {
        match self.room(self.files.len()) {
            true => self.files.push(self.one_line(path)),
            false => self.more += 1,
        }
    }

    /// Every shape `run_commands` accepts.
    fn commands_of(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.command(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| self.commands_of(i)),
            Value::Object(o) => {
                if let Some(c) = o.get("commands") {
                    self.commands_of(c);
                } else if let Some(Value::String(c)) = o.get("command").or_else(|| o.get("cmd")) {
                    let args = o.get("args").and_then(Value::as_array).into_iter().flatten();
                    let line = std::iter::once(c.clone())
                        .chain(args.map(|a| quoted(&flat(a))))
                        .collect::<Vec<_>>()
                        .join(" ");
                    self.command(line);
                }
                self.args_of(v, &["commands", "command", "cmd", "args"]);
            }
            other => self.command(flat(other)),
        }
    }

    /// `editor`: an insert at a line adds; a replacement adds the new and removes the old; a
    /// missing file is created with the new text.
    fn edit_of(&mut self, raw: &Value, shown: &Value) {
        if let Some(p) = shown.get("path").and_then(Value::as_str) {
            self.file(p);
        }
        let text = |k: &str| raw.get(k).and_then(Value::as_str);
        let insert = raw.get("insert_line").is_some_and(|v| !v.is_null());
        self.diff = Some(Diff {
            added: lines(text("new_text").unwrap_or_default()),
            removed: if insert {
                0
            } else {
                lines(text("old_text").unwrap_or_default())
            },
        });
        self.args_of(shown, &["path", "old_text", "new_text"]);
    }

    /// `write_to_file {path, content}` (Cline 2.x's name, kept for hubs that relay it).
    fn write_of(&mut self, raw: &Value, shown: &Value) {
        if let Some(p) = shown.get("path").and_then(Value::as_str) {
            self.file(p);
        }
        self.diff = Some(Diff {
            added: lines(raw.get("content").and_then(Value::as_str).unwrap_or_default()),
            removed: 0,
        });
        self.args_of(shown, &["path", "content"]);
    }

    /// `apply_patch`: the files the patch names, and its `+`/`-` lines.
    fn patch_of(&mut self, raw: &Value, shown: &Value) {
        let patch = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            other => other.get("input").and_then(Value::as_str).map(str::to_string),
        };
        let (Some(raw_patch), Some(shown_patch)) = (patch(raw), patch(shown)) else {
            return self.args_of(shown, &[]);
        };
        let mut diff = Diff::default();
        for line in raw_patch.lines() {
            if line.starts_with("***") {
                continue;
            }
            if line.starts_with('+') {
                diff.added += 1;
            } else if line.starts_with('-') {
                diff.removed += 1;
            }
        }
        for line in shown_patch.lines() {
            for header in ["*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:"] {
                if let Some(path) = line.strip_prefix(header) {
                    self.file(path.trim());
                }
            }
        }
        self.diff = Some(diff);
        if shown.is_object() {
            self.args_of(shown, &["input"]);
        }
    }

    /// The arguments not shown otherwise, one line each; a non-object input is one `input`.
    fn args_of(&mut self, v: &Value, shown_already: &[&str]) {
        let Value::Object(o) = v else {
            if !v.is_null() {
                self.arg("input", v);
            }
            return;
        };
        for (name, value) in o {
            if !shown_already.contains(&name.as_str()) && !value.is_null() {
                self.arg(name, value);
            }
        }
    }

    fn arg(&mut self, name: &str, value: &Value) {
        if self.room(self.args.len()) {
            self.args.push(Arg {
                name: self.one_line(name),
                value: self.text(&flat(value)),
            });
        } else {
            self.more += 1;
        }
    }
}

/// A value as one string: a string as it is, anything else as compact JSON.
fn flat(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An argument of a command line, quoted when a shell would split it.
fn quoted(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains(|c: char| c.is_whitespace() || "'\"\\$`;&|<>(){}*?".contains(c)) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Lines of a text: none when empty, a last line without its newline counted.
fn lines(text: &str) -> usize {
    text.lines().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::redact::RedactOptions;
    use serde_json::json;

    fn redactor() -> Redactor {
        Redactor::new(RedactOptions {
            home: Some("/home/dev".into()),
            ..RedactOptions::default()
        })
        .unwrap()
    }

    fn of(tool: &str, input: &str) -> Detail {
        Detail::of(Some(tool), Some(input), &redactor())
    }

    #[test]
    fn a_real_run_commands_frame_shows_its_command() {
        // shared/cline/hub/hub-frames.jsonl, line 18.
        let d = of("run_commands", r#"{"commands":["echo approved-run"]}"#);
        assert_eq!(d.commands, ["echo approved-run"]);
        assert_eq!(
            (d.files.len(), d.diff, d.args.len(), &d.unreadable),
            (0, None, 0, &None)
        );
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v, json!({"tool": "run_commands", "commands": ["echo approved-run"]}));
    }

    #[test]
    fn every_command_shape_cline_accepts_is_read() {
        assert_eq!(of("run_commands", r#""ls -la""#).commands, ["ls -la"]);
        assert_eq!(of("run_commands", r#"{"command":"pwd"}"#).commands, ["pwd"]);
        assert_eq!(of("run_commands", r#"{"cmd":"pwd"}"#).commands, ["pwd"]);
        assert_eq!(
            of(
                "run_commands",
                r#"{"commands":[{"command":"git","args":["commit","-m","a b"]},"make"]}"#
            )
            .commands,
            ["git commit -m 'a b'", "make"]
        );
        assert_eq!(
            of("run_commands", r#"[{"command":"rm","args":["it's"]}]"#).commands,
            [r"rm 'it'\''s'"]
        );
    }

    #[test]
    fn edits_and_patches_say_the_file_and_the_lines() {
        let d = of(
            "editor",
            r#"{"path":"/home/dev/proj/a.rs","old_text":"a\nb\nc","new_text":"x\ny","insert_line":null}"#,
        );
        assert_eq!(d.files, ["~/proj/a.rs"]);
        assert_eq!(d.diff.unwrap().to_string(), "+2 \u{2212}3 lines");
        assert!(d.args.is_empty(), "{:?}", d.args);
        let insert = of(
            "editor",
            r#"{"path":"/p","old_text":"zz","new_text":"1\n2\n3\n","insert_line":4}"#,
        );
        assert_eq!(insert.diff, Some(Diff { added: 3, removed: 0 }));
        assert_eq!(
            insert.args,
            [Arg {
                name: "insert_line".into(),
                value: "4".into()
            }]
        );
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-old\n+new\n+more\n*** Add File: b.txt\n+hi\n*** End Patch";
        let d = of("apply_patch", &json!({ "input": patch }).to_string());
        assert_eq!(d.files, ["src/a.rs", "b.txt"]);
        assert_eq!(d.diff, Some(Diff { added: 3, removed: 1 }));
        assert_eq!(of("apply_patch", &json!(patch).to_string()).files.len(), 2);
        let w = of("write_to_file", r#"{"path":"out.txt","content":"1\n2"}"#);
        assert_eq!(
            (w.files, w.diff),
            (vec!["out.txt".to_string()], Some(Diff { added: 2, removed: 0 }))
        );
    }

    #[test]
    fn unknown_tools_show_their_arguments_and_no_tool_shows_nothing_made_up() {
        let d = of(
            "fetch_web_content",
            r#"{"requests":[{"url":"https://example.org","prompt":"sum"}]}"#,
        );
        assert_eq!(d.args.len(), 1);
        assert_eq!(d.args[0].name, "requests");
        assert!(d.args[0].value.contains("https://example.org"), "{:?}", d.args);
        let d = Detail::of(Some("team_status"), None, &redactor());
        assert_eq!(
            d,
            Detail {
                tool: Some("team_status".into()),
                ..Detail::default()
            }
        );
        let d = Detail::of(None, Some("42"), &redactor());
        assert_eq!(
            d.args,
            [Arg {
                name: "input".into(),
                value: "42".into()
            }]
        );
    }

    #[test]
    fn bad_input_is_said_not_dropped() {
        for bad in ["{not json", "", "{\"commands\":"] {
            let d = of("run_commands", bad);
            assert!(
                d.unreadable
                    .as_deref()
                    .unwrap()
                    .starts_with("the tool input is not JSON"),
                "{bad:?}: {d:?}"
            );
            assert!(d.commands.is_empty());
        }
        // A wrong shape is no error: what can be read is shown.
        assert_eq!(
            of("run_commands", r#"{"commands":[1,null,"ok"]}"#).commands,
            ["1", "null", "ok"]
        );
        assert_eq!(of("editor", r#"{"path":7}"#).diff, Some(Diff::default()));
    }

    #[test]
    fn huge_input_is_bounded() {
        let huge = "x".repeat(MAX_INPUT_BYTES + 1);
        let d = of("run_commands", &json!({ "commands": [huge] }).to_string());
        assert!(d.unreadable.unwrap().contains("bytes"));
        let long = "y".repeat(10 * MAX_TEXT_CHARS);
        let many: Vec<String> = (0..50).map(|i| format!("echo {i} {long}")).collect();
        let d = of("run_commands", &json!({ "commands": many }).to_string());
        assert_eq!(d.commands.len(), MAX_ITEMS);
        assert_eq!(d.more, 50 - MAX_ITEMS);
        let hidden = format!("echo 0 {long}").chars().count() - MAX_TEXT_CHARS;
        assert!(
            d.commands[0].ends_with(&format!("… {hidden} more characters: see Cline")),
            "{}",
            d.commands[0]
        );
        assert!(d
            .commands
            .iter()
            .all(|c| c.starts_with("echo ") && c.contains(&"y".repeat(390))));
        assert!(
            d.summary().ends_with(&format!("; and {} more", 50 - MAX_ITEMS)),
            "the summary says what it left out"
        );
        // All of it, for the page that shows all of it.
        let w = Detail::whole(
            Some("run_commands"),
            Some(&json!({ "commands": many }).to_string()),
            &redactor(),
        );
        assert_eq!((w.commands.len(), w.more), (50, 0));
        assert_eq!(w.commands[49], format!("echo 49 {long}"));
        let args: serde_json::Map<String, Value> = (0..20).map(|i| (format!("k{i}"), json!(long))).collect();
        let d = of("mystery", &Value::Object(args).to_string());
        assert_eq!((d.args.len(), d.more), (MAX_ITEMS, 20 - MAX_ITEMS));
        // Multi-byte text is cut on a character boundary.
        let d = of(
            "run_commands",
            &json!({ "commands": ["é".repeat(MAX_TEXT_CHARS * 2)] }).to_string(),
        );
        assert!(d.commands[0].starts_with(&"é".repeat(MAX_TEXT_CHARS)));
        assert!(d.commands[0].ends_with(&format!("… {MAX_TEXT_CHARS} more characters: see Cline")));
    }

    #[test]
    fn what_would_hide_in_a_command_is_shown_and_its_lines_kept() {
        let d = of(
            "run_commands",
            &json!({ "commands": ["echo line-one\ntouch X", "ls \u{202e}txt.exe\u{200b}"] }).to_string(),
        );
        assert_eq!(d.commands, ["echo line-one\ntouch X", "ls \\u{202e}txt.exe\\u{200b}"]);
        let d = of(
            "editor",
            &json!({"path": "a\u{feff}\nb.rs", "new_text": "x", "mode": "\u{1b}[2J"}).to_string(),
        );
        assert_eq!(d.files, ["a\\u{feff}\\u{a}b.rs"], "a path is one line");
        assert_eq!(d.args[0].value, "\\u{1b}[2J");
        let tool = Detail::of(Some("run\u{202e}"), None, &redactor());
        assert_eq!(tool.tool.as_deref(), Some("run\\u{202e}"));
        // A 257-character command fits whole: its tail is there to be read.
        let command = format!("echo {}; touch /tmp/TAIL_RAN", "a".repeat(231));
        assert_eq!(
            of("run_commands", &json!({ "commands": [command.clone()] }).to_string()).commands,
            [command]
        );
    }

    #[test]
    fn secrets_are_redacted_before_they_are_cut() {
        let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
        let d = of(
            "run_commands",
            &json!({ "commands": [format!("curl -H 'Authorization: Bearer {key}' https://x")] }).to_string(),
        );
        assert!(!d.commands[0].contains("abcdefghij"), "{:?}", d.commands);
        let d = of(
            "mystery",
            &json!({"password": "hunter2-secret", "path": "/home/dev/x"}).to_string(),
        );
        let text = serde_json::to_string(&d).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("~/x"), "{text}");
        // A secret straddling the cut: redacted first, so no prefix of it is left.
        let pad = "a".repeat(MAX_TEXT_CHARS - 10);
        let d = of(
            "run_commands",
            &json!({ "commands": [format!("{pad} {key}")] }).to_string(),
        );
        assert!(!d.commands[0].contains("sk-ant"), "{:?}", d.commands);
    }
}
