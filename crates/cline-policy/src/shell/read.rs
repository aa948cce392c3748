//! The reader: tree-sitter-bash's tree walked into simple commands, constructs and unknowns.

use super::word::{ansi_c, backtick_scripts, join_continued_lines, unescape, unescape_in_double};
use super::{Script, MAX_COMMANDS, MAX_DEPTH, MAX_SCRIPT_BYTES};
use crate::command::{Construct, SimpleCommand, Via, Word};
use crate::programs::{self, code, Custom, Feed, Run};
use tree_sitter::{Node, Parser};

/// A program and its arguments given as words (no shell reads them), with what it runs.
pub(super) fn argv(argv: &[String], custom: &Custom) -> Script {
    let mut reader = Reader {
        script: Script::default(),
        budget: MAX_COMMANDS,
        custom,
        unreadables: 0,
    };
    let words = argv.iter().map(|a| Word::plain(a)).collect();
    let text = argv.join(" ");
    reader.simple(
        words,
        &text,
        Simple {
            via: &Via::Top,
            depth: 0,
            feed: &Feed::Inherited,
        },
    );
    reader.script
}

pub(super) fn read(text: &str, custom: &Custom) -> Script {
    let mut reader = Reader {
        script: Script::default(),
        budget: MAX_COMMANDS,
        custom,
        unreadables: 0,
    };
    reader.read(text, Via::Top, 0);
    reader.script
}

struct Reader<'c> {
    script: Script,
    budget: usize,
    custom: &'c Custom,
    /// How many times text the grammar cannot read was met.
    unreadables: usize,
}

/// Where the words of a command came from, for what it is told to run.
struct Simple<'a> {
    via: &'a Via,
    depth: usize,
    feed: &'a Feed,
}

impl Reader<'_> {
    fn construct(&mut self, what: &'static str, text: &str) {
        self.script.constructs.push(Construct::new(what, text));
    }

    fn push(&mut self, command: SimpleCommand) -> bool {
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        self.script.commands.push(command);
        if self.budget == 0 {
            self.construct("more commands than are read", "");
            self.script
                .commands
                .push(SimpleCommand::unknown(Via::Top, "more commands than are read"));
        }
        true
    }

    fn unknown(&mut self, via: &Via, why: impl Into<String>) {
        self.push(SimpleCommand::unknown(via.clone(), why));
    }

    fn read(&mut self, text: &str, via: Via, depth: usize) {
        if text.len() > MAX_SCRIPT_BYTES {
            self.construct("a command line too long to read", "");
            self.unknown(&via, "a command line too long to read");
            return;
        }
        if depth > MAX_DEPTH {
            self.construct("scripts nested too deep to read", text);
            self.unknown(&via, "scripts nested too deep to read");
            return;
        }
        let text = join_continued_lines(text);
        let mut parser = Parser::new();
        let tree = parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .ok()
            .and_then(|()| parser.parse(text.as_ref(), None));
        let Some(tree) = tree else {
            self.construct("text the shell grammar cannot read", &text);
            self.unknown(&via, "text the shell grammar cannot read");
            return;
        };
        let src = text.as_bytes();
        let unreadable_before = self.unreadables;
        self.statement(tree.root_node(), src, &via, depth, &Feed::Inherited);
        if tree.root_node().has_error() && self.unreadables == unreadable_before {
            // An error the walk did not meet (a missing `fi`, an unclosed backtick).
            self.unreadable(&text, &via);
        }
    }

    /// Text the grammar cannot read: a construct, and an unknown command (bash may read it
    /// otherwise than the grammar does).
    fn unreadable(&mut self, text: &str, via: &Via) {
        self.unreadables += 1;
        self.construct("text the shell grammar cannot read", text);
        self.unknown(
            via,
            format!("text the shell grammar cannot read ({})", first_line(text)),
        );
    }

    /// A node that runs commands: lists and pipelines are plain; anything else is a construct
    /// whose commands are still read (deny rules see them).
    fn statement(&mut self, node: Node, src: &[u8], via: &Via, depth: usize, feed: &Feed) {
        if node.is_error() || node.is_missing() {
            self.unreadable(text_of(node, src), via);
            // What the grammar could read inside is still looked at.
        }
        match node.kind() {
            "program" | "list" | "pipeline" => {
                let pipeline = node.kind() == "pipeline";
                let mut first = true;
                let mut cursor = node.walk();
                for child in node.children(&mut cursor) {
                    if child.is_named() {
                        // In a pipeline, each command after the first reads what the one before
                        // it writes.
                        let fed = match (pipeline, first) {
                            (true, false) => Feed::Made,
                            _ => feed.clone(),
                        };
                        self.statement(child, src, via, depth, &fed);
                        first = false;
                    } else {
                        match child.kind() {
                            "&&" | "||" | ";" | "|" | "\n" | "|&" | ";;" => {}
                            "&" => self.construct("a command run in the background (&)", text_of(node, src)),
                            other if child.is_missing() => self.unreadable(other, via),
                            _ => self.construct("an operator other than &&, ||, ; and |", text_of(child, src)),
                        }
                    }
                }
            }
            "comment" => {}
            "command" => self.command(node, src, via, depth, feed),
            "redirected_statement" => {
                let mut feed = feed.clone();
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children.iter().filter(|c| is_redirect(c.kind())) {
                    if let Some(f) = self.redirect(*child, src, via, depth) {
                        feed = f;
                    }
                }
                for child in children {
                    if !is_redirect(child.kind()) {
                        self.statement(child, src, via, depth, &feed);
                    }
                }
            }
            "ERROR" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    self.statement(child, src, via, depth, feed);
                }
            }
            kind => self.compound(node, kind, src, via, depth, feed),
        }
    }

    /// Shell syntax other than simple commands: a construct; its commands are read, and what
    /// it evaluates as code (arithmetic on names, subscripts, `[[ -v ]]`) is unknown.
    fn compound(&mut self, node: Node, kind: &str, src: &[u8], via: &Via, depth: usize, feed: &Feed) {
        let text = text_of(node, src);
        let what = match kind {
            "subshell" => "a subshell",
            "compound_statement" if text.starts_with("((") => "arithmetic the shell evaluates (( ))",
            "compound_statement" => "a command group { }",
            "function_definition" => "a function definition",
            "variable_assignment" | "variable_assignments" => "a variable assignment",
            "declaration_command" | "unset_command" => "a declaration (export, declare, local, unset)",
            "test_command" => "a test [[ ]]",
            "negated_command" => "a negated command (!)",
            "if_statement" | "while_statement" | "for_statement" | "c_style_for_statement" | "case_statement" => {
                "a compound command (if, while, for, case)"
            }
            _ => "shell syntax other than simple commands",
        };
        self.construct(what, text);
        let inner = match via {
            Via::Top => Via::Compound,
            other => other.clone(),
        };
        let arithmetic = (kind == "compound_statement" && text.starts_with("(("))
            || kind == "c_style_for_statement"
            || (kind == "test_command" && evaluates_arithmetic(text));
        if arithmetic && !arithmetic_words_plain(node, src) {
            self.unknown(&inner, "arithmetic on names, whose values may run a substitution");
        }
        match kind {
            "variable_assignment" | "variable_assignments" => self.assignments(node, src, &inner),
            "declaration_command" => {
                let computed = declares_integer(text)
                    || text.split_whitespace().skip(1).any(|w| {
                        let name = w.split('=').next().unwrap_or(w);
                        name.contains(['$', '`', '['])
                    });
                if computed {
                    self.unknown(&inner, "a declaration with a computed name or an integer value");
                }
                self.assignments(node, src, &inner);
            }
            _ => {}
        }
        self.inside(node, src, &inner, depth, feed);
    }

    /// Assignments that change what later names run (`PATH=..`), or give a command that
    /// programs run (`GIT_EXTERNAL_DIFF=..`).
    fn assignments(&mut self, node: Node, src: &[u8], via: &Via) {
        let mut found = Vec::new();
        collect_assignments(node, src, &mut found);
        for (name, value) in found {
            self.assignment(&name, &value, via);
        }
    }

    fn assignment(&mut self, name: &str, value: &str, via: &Via) {
        let value = value.trim_matches(['"', '\'']);
        let computed = value.contains('$') || value.contains('`');
        match programs::variables::runs(name, value, computed) {
            Some(Run::Script { text, by }) => self.read(&text, Via::Script(by), MAX_DEPTH),
            Some(Run::Unknown { why }) => self.unknown(via, why),
            _ => {}
        }
    }

    /// The commands inside a construct: statements are read as such, words for their
    /// substitutions.
    fn inside(&mut self, node: Node, src: &[u8], via: &Via, depth: usize, feed: &Feed) {
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
                | "unset_command" => self.statement(child, src, via, depth, feed),
                "command_substitution" | "process_substitution" => self.substitution(child, src, depth),
                "expansion" | "arithmetic_expansion" => {
                    let mut w = Word::plain("");
                    self.word_into(child, src, depth, &mut w, false);
                }
                k if is_redirect(k) => {
                    self.redirect(child, src, via, depth);
                }
                "ERROR" => {
                    self.unreadable(text_of(child, src), via);
                    self.inside(child, src, via, depth, feed);
                }
                _ => self.inside(child, src, via, depth, feed),
            }
        }
    }

    /// A redirection: a construct unless it only duplicates a descriptor or goes to
    /// /dev/null. Returns the standard input it gives, when it gives one.
    fn redirect(&mut self, node: Node, src: &[u8], via: &Via, depth: usize) -> Option<Feed> {
        let text = text_of(node, src);
        let feed = match node.kind() {
            "heredoc_redirect" => {
                self.construct("a here-document", text);
                let body = heredoc_body(node, src);
                let quoted = text.trim_start_matches(['<', '-', ' ']).starts_with(['\'', '"', '\\']);
                if let Some(b) = body.as_deref().filter(|b| !quoted && b.contains('`')) {
                    // An unquoted here-document's backticks run (the grammar leaves them text).
                    self.backticks(b, depth);
                }
                Some(match body {
                    Some(b) if quoted || !(b.contains('$') || b.contains('`')) => Feed::Text(b),
                    _ => Feed::Made,
                })
            }
            "herestring_redirect" => {
                self.construct("a here-string (<<<)", text);
                let word = node.named_child(0).map(|n| self.word(n, src, depth));
                Some(match word {
                    Some(w) if w.is_static() => Feed::Text(w.text),
                    _ => Feed::Made,
                })
            }
            _ => {
                let operator = operator_of(node, src);
                let destination = node.child_by_field_name("destination");
                let word = destination.map(|d| self.word(d, src, depth));
                let dup = matches!(operator.as_str(), ">&" | "<&")
                    && word.as_ref().is_some_and(|w| {
                        w.is_static() && (w.text == "-" || w.text.bytes().all(|b| b.is_ascii_digit()))
                    });
                let null = word.as_ref().is_some_and(|w| w.is_static() && w.text == "/dev/null");
                // Reading a named file is what the command could do with the file as an operand
                // (`wc -l < x` is `wc -l x`); not a device (`/dev/tcp/..` opens a socket).
                let reads_file = operator == "<"
                    && word.as_ref().is_some_and(|w| {
                        w.is_static() && !w.text.starts_with("/dev/") && !w.text.starts_with("/proc/")
                    })
                    && destination.is_some_and(|d| d.kind() != "process_substitution");
                if !(dup || null || reads_file) {
                    self.construct("a redirection to or from a file", text);
                }
                match operator.as_str() {
                    "<" | "<>" => Some(match destination.map(|d| d.kind()) {
                        Some("process_substitution") => Feed::Made,
                        _ if null => Feed::Inherited,
                        _ => Feed::File,
                    }),
                    _ => None,
                }
            }
        };
        // Substitutions inside the redirect still run.
        self.inside(node, src, via, depth, &Feed::Inherited);
        feed
    }

    /// Backtick substitutions the grammar left as text: each script read in turn.
    fn backticks(&mut self, text: &str, depth: usize) {
        self.construct("a command substitution $( ) or backticks", text);
        match backtick_scripts(text) {
            Some(scripts) => {
                for script in scripts {
                    self.read(&script, Via::Substitution, depth + 1);
                }
            }
            None => self.unreadable(text, &Via::Substitution),
        }
    }

    fn substitution(&mut self, node: Node, src: &[u8], depth: usize) {
        let what = match node.kind() {
            "process_substitution" => "a process substitution <( )",
            _ => "a command substitution $( ) or backticks",
        };
        self.construct(what, text_of(node, src));
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.statement(child, src, &Via::Substitution, depth, &Feed::Inherited);
        }
    }

    fn command(&mut self, node: Node, src: &[u8], via: &Via, depth: usize, feed: &Feed) {
        let mut words = Vec::new();
        let mut feed = feed.clone();
        let mut prefixes = Vec::new();
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            match child.kind() {
                "command_name" => {
                    let name = child.named_child(0).unwrap_or(child);
                    words.push(self.word(name, src, depth));
                }
                "variable_assignment" => {
                    self.construct("an environment assignment before a command", text_of(child, src));
                    prefixes.push(child);
                    self.inside(child, src, via, depth, &Feed::Inherited);
                }
                k if is_redirect(k) => {
                    if let Some(f) = self.redirect(child, src, via, depth) {
                        feed = f;
                    }
                }
                "comment" => {}
                _ => words.push(self.word(child, src, depth)),
            }
        }
        for prefix in prefixes {
            self.assignments(prefix, src, via);
        }
        if words.is_empty() {
            return;
        }
        if !words[0].is_static() {
            self.construct("a command name the shell computes", text_of(node, src));
        }
        self.simple(
            words,
            text_of(node, src),
            Simple {
                via,
                depth,
                feed: &feed,
            },
        );
    }

    /// A simple command: pushed with its acting words, then what it runs read in turn.
    fn simple(&mut self, words: Vec<Word>, text: &str, at: Simple) {
        let reading = programs::read(&words, at.feed, self.custom);
        self.script.constructs.extend(reading.constructs);
        let mut command = SimpleCommand::new(words, at.via.clone());
        command.acting = reading.acting;
        let by = command.program().unwrap_or("a command").to_string();
        if !self.push(command) {
            return;
        }
        for run in reading.runs {
            if at.depth >= MAX_DEPTH {
                self.construct("scripts nested too deep to read", text);
                self.unknown(at.via, "commands nested too deep to read");
                return;
            }
            match run {
                Run::Script { text, by } => self.read(&text, Via::Script(by), at.depth + 1),
                Run::Command { words, by, .. } => {
                    let via = Via::Wrapped(by);
                    self.simple(
                        words,
                        text,
                        Simple {
                            via: &via,
                            depth: at.depth + 1,
                            feed: &Feed::Inherited,
                        },
                    )
                }
                Run::Unknown { why } => self.unknown(&Via::Wrapped(by.clone()), why),
            }
        }
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
                if text.contains('`') {
                    // A substitution the grammar left as text (inside `${..}`): it runs.
                    out.dynamic = true;
                    self.backticks(text, depth);
                }
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
                if node.kind() == "expansion" && text.contains('`') {
                    // `${X:-`cmd`}`: the grammar leaves the backticks as text; they run.
                    self.backticks(text, depth);
                }
                if let Some(why) = evaluated(node.kind(), text) {
                    self.construct("an expansion the shell evaluates as code", text);
                    self.unknown(&Via::Substitution, why);
                }
                let mut cursor = node.walk();
                let inner: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in inner {
                    self.inside(child, src, &Via::Substitution, depth, &Feed::Inherited);
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
                    self.unreadable(text, &Via::Substitution);
                }
                self.inside(node, src, &Via::Substitution, depth, &Feed::Inherited);
            }
        }
    }
}

fn is_redirect(kind: &str) -> bool {
    matches!(kind, "file_redirect" | "heredoc_redirect" | "herestring_redirect")
}

/// A redirection's operator (`>`, `&>`, `>&`, `<`, ...).
fn operator_of(node: Node, src: &[u8]) -> String {
    let mut cursor = node.walk();
    let op = node
        .children(&mut cursor)
        .find(|c| !c.is_named())
        .map(|c| text_of(c, src).to_string())
        .unwrap_or_default();
    op
}

/// A here-document's body as the shell gives it (its text between the start and end lines).
fn heredoc_body(node: Node, src: &[u8]) -> Option<String> {
    let mut cursor = node.walk();
    let body = node.named_children(&mut cursor).find(|c| c.kind() == "heredoc_body")?;
    Some(text_of(body, src).to_string())
}

/// `[[ ]]` with an operator that evaluates its operands as arithmetic, or `-v` (whose
/// subscript is arithmetic).
fn evaluates_arithmetic(text: &str) -> bool {
    ["-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v"]
        .iter()
        .any(|op| text.split_whitespace().any(|w| w == *op))
}

/// The words of arithmetic are numbers and operators alone.
fn arithmetic_words_plain(node: Node, src: &[u8]) -> bool {
    let text = text_of(node, src);
    let inner = text
        .trim_start_matches("for")
        .trim()
        .trim_start_matches("((")
        .trim_start_matches("[[");
    let inner = match inner.find("))").or_else(|| inner.find("]]")) {
        Some(end) => &inner[..end],
        None => inner,
    };
    let without_ops = inner.replace(['-'], " -");
    without_ops.split_whitespace().all(|w| {
        matches!(w, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge")
            || code::arithmetic_is_plain(w.trim_matches(['"', '\'']))
    })
}

/// `declare -i`, `local -i`, `typeset -i`: assignments evaluated as arithmetic.
fn declares_integer(text: &str) -> bool {
    text.split_whitespace()
        .any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('i'))
}

/// An expansion that evaluates text as code: a prompt expansion (`${x@P}` runs the
/// substitutions in x's value), arithmetic on names (`$((x))`, `${a[i]}`, `${s:i:2}`: a
/// name's value is itself evaluated, and `a[$(cmd)]` there runs `cmd`).
fn evaluated(kind: &str, text: &str) -> Option<String> {
    match kind {
        "arithmetic_expansion" => {
            let inner = text.trim_start_matches("$((").trim_start_matches("$[");
            let inner = inner.trim_end_matches("))").trim_end_matches(']');
            (!code::arithmetic_is_plain(inner))
                .then(|| "arithmetic on names, whose values may run a substitution".into())
        }
        "expansion" => {
            let body = text.trim_start_matches("${").trim_end_matches('}');
            if body.ends_with("@P") || body.contains("@P:") {
                return Some("a prompt expansion (@P), which runs the substitutions in a value".into());
            }
            if let (Some(open), Some(close)) = (body.find('['), body.find(']')) {
                let index = &body[open + 1..close.max(open + 1)];
                if !matches!(index, "@" | "*") && !code::arithmetic_is_plain(index) {
                    return Some("an array index, evaluated as arithmetic on names".into());
                }
            }
            let name_end = body
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == '!'))
                .unwrap_or(body.len());
            let after = &body[name_end..];
            if let Some(offset) = after.strip_prefix(':') {
                if !offset.starts_with(['-', '=', '+', '?']) && !code::arithmetic_is_plain(offset) {
                    return Some("a substring offset, evaluated as arithmetic on names".into());
                }
            }
            None
        }
        _ => None,
    }
}

/// The `NAME=VALUE` assignments under `node`.
fn collect_assignments(node: Node, src: &[u8], out: &mut Vec<(String, String)>) {
    if node.kind() == "variable_assignment" {
        let name = node
            .child_by_field_name("name")
            .map(|n| text_of(n, src).to_string())
            .unwrap_or_default();
        let value = node
            .child_by_field_name("value")
            .map(|n| text_of(n, src).to_string())
            .unwrap_or_default();
        out.push((name, value));
        return;
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if matches!(child.kind(), "variable_assignment" | "variable_assignments") {
            collect_assignments(child, src, out);
        }
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(60).collect()
}

fn text_of<'a>(node: Node, src: &'a [u8]) -> &'a str {
    std::str::from_utf8(&src[node.byte_range()]).unwrap_or_default()
}
