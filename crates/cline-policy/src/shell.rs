//! A command line read as bash reads it (tree-sitter-bash): the simple commands it runs, where
//! each runs (at the top, inside a substitution, inside a `bash -c` script, behind a wrapper
//! such as `sudo`), and every construct that makes its effect more than those commands
//! (redirections to files, substitutions, subshells, here-documents, `eval`, words the shell
//! computes in command position, text the grammar cannot read).
//!
//! Approve rules trust only a script of plain simple commands (no construct at all); deny
//! rules look at every command found anywhere, and a command that cannot be known though the
//! line says a shell runs it (`bash -c "$x"`, `eval "$x"`, a script too deep) is kept as
//! [`SimpleCommand::unknown`], which a deny rule assumes the worst of.

use tree_sitter::{Node, Parser};

/// Above this many bytes a command line is not parsed: it is one unknown command.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;
/// Scripts inside scripts (`bash -c`, `eval`) are read this deep; deeper is unknown.
const MAX_DEPTH: usize = 8;
/// At most this many simple commands are read from one command line; more is unknown.
const MAX_COMMANDS: usize = 1000;

/// One word of a simple command, as the shell would pass it after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word's text with quotes and escapes removed (`r\m` and `"rm"` are `rm`); the
    /// parts the shell computes are kept as written.
    pub text: String,
    /// Part of it is computed by the shell (`$x`, `${x}`, `$(..)`, `$((..))`, braces):
    /// what runs is not known from the text.
    pub dynamic: bool,
    /// It holds an unquoted glob (`*`, `?`, `[`): the shell replaces it with file names.
    pub globbed: bool,
}

impl Word {
    fn plain(text: &str) -> Word {
        Word {
            text: text.to_string(),
            dynamic: false,
            globbed: false,
        }
    }

    /// Known from the text alone: neither computed nor globbed.
    pub fn is_static(&self) -> bool {
        !self.dynamic && !self.globbed
    }
}

/// Where a simple command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// In the command line itself, joined by `&&`, `||`, `;`, `|` or newlines.
    Top,
    /// Inside `$(..)`, backticks or `<(..)`.
    Substitution,
    /// Inside the script a shell runs (`bash -c '..'`, `eval '..'`), read in turn.
    Script(String),
    /// As the command a wrapper runs (`sudo`, `env`, `xargs`, `find -exec`, ...).
    Wrapped(String),
    /// Inside a compound command (a subshell, `{ }`, `if`, a loop, a function).
    Compound,
}

/// One simple command: its words (the program first) and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
    pub via: Via,
    /// Nothing is known of what runs (a script the shell computes, or past the read limits):
    /// a deny rule assumes it is what the rule fears.
    pub unknown: bool,
}

impl SimpleCommand {
    /// The words as one line, for people.
    pub fn display(&self) -> String {
        if self.unknown {
            return "<unknown command>".into();
        }
        self.words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ")
    }

    fn unknown(via: Via) -> SimpleCommand {
        SimpleCommand {
            words: Vec::new(),
            via,
            unknown: true,
        }
    }
}

/// Something in a command line that is more than simple commands joined by `&&`, `||`, `;`,
/// `|` and newlines: an approve rule never holds with one of these present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Construct {
    /// What it is, in words (`redirection to a file`, `command substitution`, ...).
    pub what: &'static str,
    /// The text it was written as (cut to a line).
    pub text: String,
}

/// A command line, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    pub commands: Vec<SimpleCommand>,
    pub constructs: Vec<Construct>,
}

impl Script {
    /// Reads a command line as bash would. Never fails: what cannot be read is a construct.
    pub fn parse(text: &str) -> Script {
        let mut reader = Reader {
            script: Script::default(),
            budget: MAX_COMMANDS,
        };
        reader.read(text, Via::Top, 0);
        reader.script
    }

    /// Only simple commands joined by `&&`, `||`, `;`, `|` and newlines.
    pub fn is_plain(&self) -> bool {
        self.constructs.is_empty()
    }

    /// The commands the line runs at its top level.
    pub fn top(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.commands.iter().filter(|c| c.via == Via::Top)
    }
}

/// Programs that run another command given in their arguments.
const WRAPPERS: [&str; 24] = [
    "sudo",
    "doas",
    "env",
    "command",
    "builtin",
    "nice",
    "nohup",
    "time",
    "timeout",
    "xargs",
    "stdbuf",
    "ionice",
    "chrt",
    "setsid",
    "taskset",
    "parallel",
    "exec",
    "unbuffer",
    "chroot",
    "strace",
    "ltrace",
    "watch",
    "flock",
    "systemd-run",
];
/// Programs that run a script given as text (`-c SCRIPT` for shells, `eval WORDS`).
const SHELLS: [&str; 11] = [
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox", "su", "runuser",
];
/// Programs that run a file as a script of the current shell.
const SOURCES: [&str; 2] = ["source", "."];
/// A wrapped command starts at one of the first few words after the wrapper's options.
const WRAPPED_STARTS: usize = 4;

struct Reader {
    script: Script,
    budget: usize,
}

impl Reader {
    fn construct(&mut self, what: &'static str, text: &str) {
        let text = text.lines().next().unwrap_or_default();
        let text: String = text.chars().take(120).collect();
        self.script.constructs.push(Construct { what, text });
    }

    fn push(&mut self, command: SimpleCommand) -> bool {
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        self.script.commands.push(command);
        if self.budget == 0 {
            self.construct("more commands than are read", "");
            self.script.commands.push(SimpleCommand::unknown(Via::Top));
        }
        true
    }

    fn read(&mut self, text: &str, via: Via, depth: usize) {
        if text.len() > MAX_SCRIPT_BYTES {
            self.construct("a command line too long to read", "");
            self.push(SimpleCommand::unknown(via));
            return;
        }
        if depth > MAX_DEPTH {
            self.construct("scripts nested too deep to read", text);
            self.push(SimpleCommand::unknown(via));
            return;
        }
        let mut parser = Parser::new();
        let tree = parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .ok()
            .and_then(|()| parser.parse(text, None));
        let Some(tree) = tree else {
            self.construct("text the shell grammar cannot read", text);
            self.push(SimpleCommand::unknown(via));
            return;
        };
        let src = text.as_bytes();
        self.statement(tree.root_node(), src, &via, depth);
    }

    /// A node that runs commands: lists and pipelines are plain; anything else is a construct
    /// whose commands are still read (deny rules see them).
    fn statement(&mut self, node: Node, src: &[u8], via: &Via, depth: usize) {
        if node.is_error() || node.is_missing() {
            self.construct("text the shell grammar cannot read", text_of(node, src));
            // What the grammar could read inside is still looked at.
        }
        match node.kind() {
            "program" | "list" | "pipeline" => {
                let mut cursor = node.walk();
                for child in node.children(&mut cursor) {
                    if child.is_named() {
                        self.statement(child, src, via, depth);
                    } else {
                        match child.kind() {
                            "&&" | "||" | ";" | "|" | "\n" | "|&" => {}
                            "&" => self.construct("a command run in the background (&)", text_of(node, src)),
                            other if child.is_missing() => self.construct("text the shell grammar cannot read", other),
                            _ => self.construct("an operator other than &&, ||, ; and |", text_of(child, src)),
                        }
                    }
                }
            }
            "comment" => {}
            "command" => self.command(node, src, via, depth),
            "redirected_statement" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    match child.kind() {
                        "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {
                            self.redirect(child, src, via, depth)
                        }
                        _ => self.statement(child, src, via, depth),
                    }
                }
            }
            "ERROR" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    self.statement(child, src, via, depth);
                }
            }
            kind => {
                let what = match kind {
                    "subshell" => "a subshell",
                    "compound_statement" => "a command group { }",
                    "function_definition" => "a function definition",
                    "variable_assignment" | "variable_assignments" => "a variable assignment",
                    "declaration_command" | "unset_command" => "a declaration (export, declare, local, unset)",
                    "test_command" => "a test [[ ]]",
                    "negated_command" => "a negated command (!)",
                    "if_statement"
                    | "while_statement"
                    | "for_statement"
                    | "c_style_for_statement"
                    | "case_statement" => "a compound command (if, while, for, case)",
                    _ => "shell syntax other than simple commands",
                };
                self.construct(what, text_of(node, src));
                let inner = match via {
                    Via::Top => Via::Compound,
                    other => other.clone(),
                };
                self.inside(node, src, &inner, depth);
            }
        }
    }

    /// The commands inside a construct: statements are read as such, words for their
    /// substitutions.
    fn inside(&mut self, node: Node, src: &[u8], via: &Via, depth: usize) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            match child.kind() {
                "command"
                | "list"
                | "pipeline"
                | "redirected_statement"
                | "subshell"
                | "compound_statement"
                | "if_statement"
                | "while_statement"
                | "for_statement"
                | "c_style_for_statement"
                | "case_statement"
                | "negated_command"
                | "function_definition"
                | "declaration_command"
                | "test_command"
                | "variable_assignment"
                | "variable_assignments"
                | "unset_command" => self.statement(child, src, via, depth),
                "command_substitution" | "process_substitution" => self.substitution(child, src, depth),
                _ => self.inside(child, src, via, depth),
            }
        }
    }

    fn redirect(&mut self, node: Node, src: &[u8], via: &Via, depth: usize) {
        match node.kind() {
            "heredoc_redirect" => self.construct("a here-document", text_of(node, src)),
            "herestring_redirect" => self.construct("a here-string (<<<)", text_of(node, src)),
            _ => {
                let destination = node.child_by_field_name("destination");
                let harmless = destination.is_some_and(|d| {
                    let word = self.word(d, src, depth);
                    let dup = text_of(node, src).contains('&')
                        && word.is_static()
                        && (word.text == "-" || word.text.bytes().all(|b| b.is_ascii_digit()));
                    dup || (word.is_static() && word.text == "/dev/null")
                });
                if !harmless {
                    self.construct("a redirection to or from a file", text_of(node, src));
                }
            }
        }
        // Substitutions inside the redirect still run.
        self.inside(node, src, via, depth);
    }

    fn substitution(&mut self, node: Node, src: &[u8], depth: usize) {
        let what = match node.kind() {
            "process_substitution" => "a process substitution <( )",
            _ => "a command substitution $( ) or backticks",
        };
        self.construct(what, text_of(node, src));
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.statement(child, src, &Via::Substitution, depth);
        }
    }

    fn command(&mut self, node: Node, src: &[u8], via: &Via, depth: usize) {
        let mut words = Vec::new();
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            match child.kind() {
                "command_name" => {
                    let name = child.named_child(0).unwrap_or(child);
                    words.push(self.word(name, src, depth));
                }
                "variable_assignment" => {
                    self.construct("an environment assignment before a command", text_of(child, src));
                    self.inside(child, src, via, depth);
                }
                "file_redirect" | "heredoc_redirect" | "herestring_redirect" => self.redirect(child, src, via, depth),
                "comment" => {}
                _ => words.push(self.word(child, src, depth)),
            }
        }
        if words.is_empty() {
            return;
        }
        if !words[0].is_static() {
            self.construct("a command name the shell computes", text_of(node, src));
        }
        let command = SimpleCommand {
            words,
            via: via.clone(),
            unknown: false,
        };
        let nested = self.nested(&command);
        if self.push(command) {
            for (text, via) in nested {
                match text {
                    Some(text) => self.read(&text, via, depth + 1),
                    None => {
                        self.push(SimpleCommand::unknown(via));
                    }
                }
            }
        }
    }

    /// What a command runs in turn: a shell's `-c` script, `eval`'s words, a sourced file
    /// (unknown), a wrapper's command (from the first few words after its options).
    /// `None` text: what runs is not known.
    fn nested(&mut self, command: &SimpleCommand) -> Vec<(Option<String>, Via)> {
        let name = basename(&command.words[0].text).to_string();
        let args = &command.words[1..];
        let mut out = Vec::new();
        if name == "eval" {
            self.construct("eval", &command.display());
            let known = args.iter().all(Word::is_static);
            let text = args.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ");
            out.push((known.then_some(text), Via::Script(name)));
        } else if SOURCES.contains(&name.as_str()) {
            // A file's commands are no more in the line than any program's: approve does not
            // hold, and deny sees the command as it is.
            self.construct("a sourced script (source, .)", &command.display());
        } else if SHELLS.contains(&name.as_str()) {
            // `-c SCRIPT`, also in clusters such as `-lc`, `-ec`; su/runuser take `-c` too.
            let at = args.iter().position(|w| {
                w.text == "--command" || (w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains('c'))
            });
            match at {
                Some(i) => {
                    self.construct("a script run by a shell (-c)", &command.display());
                    match args.get(i + 1) {
                        Some(script) if script.is_static() => out.push((Some(script.text.clone()), Via::Script(name))),
                        _ => out.push((None, Via::Script(name))),
                    }
                }
                None => {
                    // A shell reading a file or stdin (`curl .. | sh`): what runs is not in the
                    // line, as with any program; approve does not hold.
                    self.construct("a shell reading a script not in the command line", &command.display());
                }
            }
        } else if name == "find" {
            let mut i = 0;
            while i < args.len() {
                if ["-exec", "-execdir", "-ok", "-okdir"].contains(&args[i].text.as_str()) {
                    let end = args[i + 1..]
                        .iter()
                        .position(|w| w.text == ";" || w.text == "+")
                        .map_or(args.len(), |e| i + 1 + e);
                    let inner: Vec<Word> = args[i + 1..end].to_vec();
                    if !inner.is_empty() {
                        out.push((Some(join_quoted(&inner)), Via::Wrapped(name.clone())));
                    }
                    i = end;
                }
                i += 1;
            }
        } else if WRAPPERS.contains(&name.as_str()) {
            let starts: Vec<usize> = args
                .iter()
                .enumerate()
                .filter(|(_, w)| !w.text.starts_with('-') && !w.text.contains('='))
                .map(|(i, _)| i)
                .take(WRAPPED_STARTS)
                .collect();
            for i in starts {
                out.push((Some(join_quoted(&args[i..])), Via::Wrapped(name.clone())));
            }
        }
        out
    }

    /// A word as the shell passes it: quotes removed, escapes undone, what the shell computes
    /// marked. Substitutions inside are read as commands.
    fn word(&mut self, node: Node, src: &[u8], depth: usize) -> Word {
        let mut word = Word::plain("");
        self.word_into(node, src, depth, &mut word, false);
        word
    }

    fn word_into(&mut self, node: Node, src: &[u8], depth: usize, out: &mut Word, quoted: bool) {
        let text = text_of(node, src);
        match node.kind() {
            "word" | "number" => {
                if !quoted && text.contains(['*', '?', '[']) {
                    out.globbed = true;
                }
                if !quoted && text.contains('{') && (text.contains(',') || text.contains("..")) {
                    out.dynamic = true;
                }
                out.text.push_str(&unescape(text));
            }
            "raw_string" => out.text.push_str(text.trim_start_matches('\'').trim_end_matches('\'')),
            "ansi_c_string" => out.text.push_str(&ansi_c(text)),
            "string_content" => out.text.push_str(&unescape_in_double(text)),
            "string" | "translated_string" | "concatenation" => {
                let in_quotes = quoted || node.kind() != "concatenation";
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                if children.is_empty() && node.kind() == "concatenation" {
                    out.text.push_str(&unescape(text));
                }
                // Text between named children of a string (the grammar leaves plain runs
                // unnamed in some versions) is kept as written.
                let mut at = node.start_byte();
                for child in children {
                    if node.kind() == "string" && child.start_byte() > at {
                        let gap = std::str::from_utf8(&src[at..child.start_byte()]).unwrap_or_default();
                        out.text
                            .push_str(&unescape_in_double(gap.trim_start_matches(['$', '"'])));
                    }
                    self.word_into(child, src, depth, out, in_quotes);
                    at = child.end_byte();
                }
                if node.kind() == "string" && at < node.end_byte() && at > node.start_byte() {
                    let gap = std::str::from_utf8(&src[at..node.end_byte()]).unwrap_or_default();
                    out.text.push_str(&unescape_in_double(gap.trim_end_matches('"')));
                }
            }
            "command_substitution" | "process_substitution" => {
                out.dynamic = true;
                out.text.push_str(text);
                self.substitution(node, src, depth);
            }
            "simple_expansion" | "expansion" | "arithmetic_expansion" | "brace_expression" => {
                out.dynamic = true;
                out.text.push_str(text);
                let mut cursor = node.walk();
                let inner: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in inner {
                    self.inside(child, src, &Via::Substitution, depth);
                    if matches!(child.kind(), "command_substitution" | "process_substitution") {
                        self.substitution(child, src, depth);
                    }
                }
            }
            _ => {
                // Anything else in a word (an ERROR, an unknown node) is computed as far as we know.
                out.dynamic = true;
                out.text.push_str(text);
                if node.is_error() || node.has_error() {
                    self.construct("text the shell grammar cannot read", text);
                }
                self.inside(node, src, &Via::Substitution, depth);
            }
        }
    }
}

fn text_of<'a>(node: Node, src: &'a [u8]) -> &'a str {
    std::str::from_utf8(&src[node.byte_range()]).unwrap_or_default()
}

/// The last part of a program's path: `/bin/rm` runs `rm`.
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Words joined back into a line the shell reads as the same words.
fn join_quoted(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| {
            if w.dynamic {
                // Keep what is computed computed: the nested reading sees it so.
                w.text.clone()
            } else if !w.text.is_empty()
                && w.text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%^".contains(&b))
            {
                w.text.clone()
            } else {
                format!("'{}'", w.text.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An unquoted word's escapes undone: `r\m` is `rm`, a backslash-newline joins lines.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            },
            c => out.push(c),
        }
    }
    out
}

/// In double quotes a backslash escapes only `$`, backtick, `"`, `\` and a newline.
fn unescape_in_double(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().unwrap_or('\\')),
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `$'..'` decoded as bash does for the escapes that make names (`\x72\x6d` is `rm`).
fn ansi_c(text: &str) -> String {
    let body = text.strip_prefix("$'").unwrap_or(text);
    let body = body.strip_suffix('\'').unwrap_or(body);
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    let take = |chars: &mut std::iter::Peekable<std::str::Chars>, radix: u32, max: usize| {
        let mut value = 0u32;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    value = value * radix + d;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (n > 0).then_some(value)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('e' | 'E') => out.push('\x1b'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('x') => match take(&mut chars, 16, 2) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\x"),
            },
            Some('u') => match take(&mut chars, 16, 4) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\u"),
            },
            Some('U') => match take(&mut chars, 16, 8) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\U"),
            },
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(n) => {
                            v = v * 8 + n;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(v));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}
