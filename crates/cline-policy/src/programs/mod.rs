//! What a program does with its arguments, beyond reading them: the words that make it run
//! another program, write a file, reach the network or run code (approve rules must name
//! them: [`Reading::acting`]), and what it runs in turn (deny rules read it: [`Reading::runs`]).
//!
//! Built from the table of well-known programs ([`table`]), git's own reading ([`git`]), the
//! plain forms of sed and awk that can be read ([`code`]), the shell's builtins that evaluate
//! their arguments ([`builtin`]), and a policy file's `[[program]]` tables ([`Custom`]).

mod builtin;
pub mod code;
pub mod git;
pub mod table;
pub mod variables;
mod wrapper;

use crate::command::{basename, Acting, Construct, Word};
use table::{Act, Given, Kind, Opt, Takes};

/// What a command runs in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// A script a shell reads (`bash -c TEXT`, `trap TEXT`, `git -c core.pager=TEXT`).
    Script { text: String, by: String },
    /// A command as words (`sudo rm x`, `find -exec rm {} ;`). `exact`: the words are surely
    /// the command (a wrapper whose options are all known); else one of several readings.
    Command { words: Vec<Word>, by: String, exact: bool },
    /// Something runs that the policy cannot read: why.
    Unknown { why: String },
}

/// Where a command's standard input comes from: code fed to an interpreter there is code too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Feed {
    /// The runner's (nothing the line gives).
    #[default]
    Inherited,
    /// A here-string or here-document whose text is known.
    Text(String),
    /// A pipe, a computed here-document, a process substitution: text the line makes.
    Made,
    /// A file.
    File,
}

/// What a command does, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    pub acting: Vec<Acting>,
    pub runs: Vec<Run>,
    pub constructs: Vec<Construct>,
}

impl Reading {
    fn act(&mut self, at: usize, option: impl Into<String>, act: Act) {
        self.acting.push(Acting {
            at,
            option: option.into(),
            does: act.words(),
        });
    }

    fn unknown(&mut self, why: impl Into<String>) {
        self.runs.push(Run::Unknown { why: why.into() });
    }

    fn construct(&mut self, what: &'static str, text: &str) {
        self.constructs.push(Construct::new(what, text));
    }

    /// A value that is a script: read in turn when its text is known.
    fn script(&mut self, value: &Word, by: &str) {
        match value.is_static() {
            true => self.runs.push(Run::Script {
                text: value.text.clone(),
                by: by.to_string(),
            }),
            false => self.unknown(format!("{by} runs a script the shell computes ({})", value.text)),
        }
    }
}

/// A policy file's own programs (`[[program]]`): options that act, beside the table's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Custom {
    pub programs: Vec<CustomProgram>,
}

/// One `[[program]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomProgram {
    pub names: Vec<String>,
    /// Options that act (an approve rule must name them).
    pub acts: Vec<String>,
    /// What the acting options' values are, for deny rules.
    pub runs: CustomRuns,
    /// Its operands are a command it runs (as `sudo`'s).
    pub wrapper: bool,
}

/// What a `[[program]]`'s acting options give: `runs = "command"` or `"script"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CustomRuns {
    #[default]
    Nothing,
    Command,
    Script,
}

/// Reads what `words` (a simple command, the program first) do beyond reading, with `feed` its
/// standard input.
pub fn read(words: &[Word], feed: &Feed, custom: &Custom) -> Reading {
    let mut r = Reading::default();
    let Some(first) = words.first().filter(|w| w.is_static()) else {
        return r;
    };
    let name = basename(&first.text);
    if let Some(own) = custom.programs.iter().find(|p| p.names.iter().any(|n| n == name)) {
        read_custom(own, words, &mut r);
        return r;
    }
    if name == "git" {
        git::read(words, &mut r);
        return r;
    }
    if name == "runuser" && words.iter().any(|w| w.text == "-u" || w.text == "--user") {
        // runuser -u USER [--] COMMAND: a command, not a shell.
        let values = [
            "-u",
            "--user",
            "-g",
            "--group",
            "-G",
            "--supp-group",
            "-w",
            "--whitelist-environment",
        ];
        wrapper::read(name, words, &values, 0, true, false, &mut r);
        return r;
    }
    if name == "deno" && words.get(1).is_some_and(|w| w.text == "eval") {
        r.act(1, "eval", Act::Code);
        r.unknown("deno eval runs code the policy does not read");
        return r;
    }
    if builtin::read(name, words, feed, &mut r) {
        return r;
    }
    if table::SHELLS.contains(&name) {
        shell(name, words, feed, &mut r);
        return r;
    }
    let Some(program) = table::program(name) else {
        return r;
    };
    match program.kind {
        Kind::Wrapper { skip, known } => wrapper::read(name, words, program.values, skip, known, false, &mut r),
        Kind::Joins { skip } => {
            options(name, program.opts, program.values, words, &mut r);
            wrapper::read(name, words, program.values, skip, true, true, &mut r)
        }
        Kind::Plain => {
            options(name, program.opts, program.values, words, &mut r);
        }
        Kind::WritesOperand(n) => {
            let operands = options(name, program.opts, program.values, words, &mut r);
            if let Some(&at) = operands.get(n - 1) {
                r.act(at, "its output file", Act::Writes);
            }
        }
        Kind::Interpreter { .. } if matches!(name, "sqlite3" | "duckdb") => {
            let operands = options(name, program.opts, program.values, words, &mut r);
            // Its operands after the database are SQL and dot-commands (`.shell` runs one).
            for &at in operands.iter().skip(1) {
                r.act(at, "its SQL", Act::Code);
            }
            if operands.len() > 1 {
                r.unknown(format!("{name} runs SQL and dot-commands the policy does not read"));
            } else if operands.len() <= 1 {
                fed(name, feed, false, &mut r);
            }
        }
        Kind::Interpreter { code_operand, checked } => {
            let operands = options(name, program.opts, program.values, words, &mut r);
            interpreter(name, words, &operands, code_operand, checked, feed, &mut r);
        }
    }
    r
}

/// The acting options of `opts` found in `words`, with what their values run; `values`: other
/// options that take the next word. Returns the indices of the operands (the words no option
/// took).
fn options(name: &str, opts: &[Opt], values: &[&str], words: &[Word], r: &mut Reading) -> Vec<usize> {
    let mut operands = Vec::new();
    let mut i = 1;
    while i < words.len() {
        let word = &words[i];
        if word.text == "--" && word.is_static() {
            operands.extend(i + 1..words.len());
            break;
        }
        let Some((opt, value)) = find_opt(opts, words, i) else {
            let option = word.is_static() && word.text.starts_with('-') && word.text != "-";
            if !option {
                operands.push(i);
            } else if values.contains(&word.text.as_str()) {
                i += 1;
            }
            i += 1;
            continue;
        };
        let by = format!("{name} {}", opt.name);
        let value_word = match &value {
            Some(Value::Word(v)) => Some((*v).clone()),
            Some(Value::Attached(text)) => Some(Word::plain(text)),
            None => None,
        };
        let mut acts = true;
        match opt.given {
            Given::Nothing => {}
            Given::Script => match &value_word {
                Some(v) => {
                    // tar's --checkpoint-action=exec=SCRIPT.
                    let v = match v.text.strip_prefix("exec=") {
                        Some(script) => Word {
                            text: script.to_string(),
                            ..v.clone()
                        },
                        None => v.clone(),
                    };
                    r.script(&v, &by)
                }
                None => r.unknown(format!("{by} without its value")),
            },
            Given::Program => {
                // A program and the arguments it is given (tar splits `-I 'prog -x'`), then
                // what the program adds (a file found, `-d`): read as words.
                let mut words: Vec<Word> = match &value_word {
                    Some(v) if v.is_static() => v.text.split_whitespace().map(Word::plain).collect(),
                    Some(v) => vec![v.clone()],
                    None => vec![Word::computed("<program>")],
                };
                if words.is_empty() {
                    words.push(Word::computed("<program>"));
                }
                words.push(Word::computed("<its file>"));
                r.runs.push(Run::Command { words, by, exact: true })
            }
            Given::Command => {
                let end = words[i + 1..]
                    .iter()
                    .position(|w| w.is_static() && (w.text == ";" || w.text == "+"))
                    .map_or(words.len(), |e| i + 1 + e);
                let fd = matches!(name, "fd" | "fdfind");
                let mut inner: Vec<Word> = words[i + 1..end].iter().map(|w| found_file(w, fd)).collect();
                // fd without a placeholder appends the path it found (`fd -x sh` runs each file).
                if fd && !words[i + 1..end].iter().any(|w| w.text.contains('{')) && !inner.is_empty() {
                    inner.push(Word::computed("<a path fd found>"));
                }
                if !inner.is_empty() {
                    r.runs.push(Run::Command {
                        words: inner,
                        by,
                        exact: true,
                    });
                }
                r.act(i, opt.name, opt.act);
                i = end + 1;
                continue;
            }
            Given::Unknown => r.unknown(format!("{by} {}", opt.act.words())),
            Given::SshOption => {
                acts = false;
                if let Some(v) = &value_word {
                    let (key, script) = v
                        .text
                        .split_once(['=', ' '])
                        .map(|(k, s)| (k.trim().to_ascii_lowercase(), s.trim_start_matches(['=', ' '])))
                        .unwrap_or_default();
                    if key.ends_with("command") && key != "permitlocalcommand" {
                        acts = true;
                        r.script(
                            &Word {
                                text: script.to_string(),
                                ..v.clone()
                            },
                            &format!("{by} {key}"),
                        );
                    }
                }
            }
            Given::Checked => {
                acts = !value_word
                    .as_ref()
                    .is_some_and(|v| v.is_static() && code::is_plain(name, &v.text));
                if acts {
                    r.unknown(format!("{by} {}", opt.act.words()));
                }
            }
        }
        if acts {
            r.act(i, opt.name, opt.act);
        }
        if matches!(value, Some(Value::Word(_))) {
            // The value is the option's: naming the option names what it is given.
            i += 1;
        }
        i += 1;
    }
    operands
}

/// `{}` in what find runs is a file it found, under the folder it was given (`./x`), never an
/// option; fd's placeholders (`{}`, `{/}`, `{.}`, ...) are paths without `./`, which may be.
fn found_file(w: &Word, fd: bool) -> Word {
    match (
        w.text.contains("{}"),
        fd && w.text.contains('{') && w.text.contains('}'),
    ) {
        (_, true) => Word {
            text: w.text.clone(),
            dynamic: true,
            globbed: w.globbed,
        },
        (true, false) => Word {
            text: w.text.replace("{}", "./{}"),
            dynamic: w.dynamic,
            globbed: true,
        },
        (false, false) => w.clone(),
    }
}

/// An option's value: the next word, or attached to the option's own word.
#[derive(Debug)]
enum Value<'a> {
    Word(&'a Word),
    Attached(String),
}

/// Whether `words[i]` is one of `opts`, and its value.
fn find_opt<'a, 'o>(opts: &'o [Opt<'o>], words: &'a [Word], i: usize) -> Option<(&'o Opt<'o>, Option<Value<'a>>)> {
    let word = &words[i];
    if !word.is_static() {
        return None;
    }
    let text = word.text.as_str();
    let next = || words.get(i + 1).map(Value::Word);
    for opt in opts {
        let name = opt.name;
        if name == "+" {
            if text.len() > 1 && text.starts_with('+') {
                return Some((opt, Some(Value::Attached(text[1..].to_string()))));
            }
            continue;
        }
        if let Some(long) = name.strip_prefix("--") {
            let Some(given) = text.strip_prefix("--") else {
                continue;
            };
            let (key, attached) = match given.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (given, None),
            };
            // The name, or a prefix getopt would take for it.
            if key.len() < 2.min(long.len()) || !long.starts_with(key) {
                continue;
            }
            let value = match (attached, opt.takes) {
                (Some(v), _) => Some(Value::Attached(v.to_string())),
                (None, Takes::Value) => next(),
                _ => None,
            };
            return Some((opt, value));
        }
        if name.len() > 2 {
            // A single-dash long option (find's -exec, gdb's -ex): the word itself.
            if text == name {
                let value = match opt.takes {
                    Takes::Value => next(),
                    _ => None,
                };
                return Some((opt, value));
            }
            if let Some(v) = text.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
                return Some((opt, Some(Value::Attached(v.to_string()))));
            }
            continue;
        }
        // A short option, alone or in a cluster (`-no`, `-pe`).
        let Some(flag) = name.chars().nth(1) else {
            continue;
        };
        let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty() && !c.starts_with('-')) else {
            continue;
        };
        let Some(at) = cluster.find(flag) else {
            continue;
        };
        let rest = &cluster[at + flag.len_utf8()..];
        let value = match opt.takes {
            Takes::Nothing => None,
            _ if !rest.is_empty() => Some(Value::Attached(rest.to_string())),
            Takes::Value => next(),
            Takes::Attached => None,
        };
        return Some((opt, value));
    }
    None
}

/// A script file given to `by` (a shell, `source`, an interpreter): a file is a program as
/// any, but text the line feeds or computes is code the policy reads (a shell's known text)
/// or cannot.
fn script_file(by: &str, file: &Word, feed: &Feed, shell: bool, r: &mut Reading) {
    let stdin = file.is_static()
        && (file.text == "-"
            || file.text == "/dev/stdin"
            || file.text.starts_with("/dev/fd/")
            || (file.text.starts_with("/proc/") && file.text.contains("/fd/")));
    if !file.is_static() {
        r.unknown(format!("{by} runs a script the line makes ({})", file.text));
    } else if stdin {
        fed(by, feed, shell, r);
    }
}

/// Code fed on standard input to `by`.
fn fed(by: &str, feed: &Feed, shell: bool, r: &mut Reading) {
    match feed {
        Feed::Text(text) if shell => r.runs.push(Run::Script {
            text: text.clone(),
            by: by.to_string(),
        }),
        Feed::Text(_) | Feed::Made => r.unknown(format!("{by} runs code fed on its standard input")),
        Feed::Inherited | Feed::File => {}
    }
}

/// A shell: `-c SCRIPT` read in turn, a script file, or its standard input.
fn shell(name: &str, words: &[Word], feed: &Feed, r: &mut Reading) {
    let su = matches!(name, "su" | "runuser" | "sg");
    let mut command = false;
    let mut operand = None;
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        if !w.is_static() {
            operand = Some(i);
            break;
        }
        if t == "--" {
            operand = words.get(i + 1).map(|_| i + 1);
            break;
        }
        if let Some(v) = t.strip_prefix("--command=") {
            r.construct("a script run by a shell (-c)", &join(words));
            r.script(&Word::plain(v), name);
            return;
        }
        if t == "--command" {
            command = true;
        } else if t.starts_with("--") {
            if [
                "--rcfile",
                "--init-file",
                "--shell",
                "--group",
                "--supp-group",
                "--user",
            ]
            .contains(&t)
            {
                i += 1;
            }
        } else if t == "-" {
            // `su -`: a login shell; a shell's `-`: its options end.
            if !su {
                operand = words.get(i + 1).map(|_| i + 1);
                break;
            }
        } else if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            let cluster = &t[1..];
            if cluster.contains('c') {
                command = true;
            }
            if cluster.contains('s') && !su && !command {
                // `-s`: the script is its standard input; the words after are arguments.
                r.construct("a shell reading a script not in the command line", &join(words));
                fed(name, feed, true, r);
                return;
            }
            // Options that take the next word: -o/-O/+o/+O (set options), su's -s, -g, -u.
            if cluster.ends_with(['o', 'O']) || (su && cluster.ends_with(['s', 'g', 'u', 'G'])) {
                i += 1;
            }
        } else if su && !command {
            // su's user, sg's group: not a script.
        } else {
            operand = Some(i);
            break;
        }
        i += 1;
    }
    match (command, operand) {
        (true, Some(at)) => {
            r.construct("a script run by a shell (-c)", &join(words));
            r.script(&words[at], name);
        }
        (true, None) => {
            r.construct("a script run by a shell (-c)", &join(words));
            r.unknown(format!("{name} -c without a script"));
        }
        (false, Some(at)) => {
            r.construct("a shell reading a script not in the command line", &join(words));
            script_file(name, &words[at], feed, true, r);
        }
        (false, None) => {
            r.construct("a shell reading a script not in the command line", &join(words));
            fed(name, feed, true, r);
        }
    }
}

/// An interpreter's code: its code options were read by [`options`]; here its code operand
/// (sed's and awk's, read when plain), or a script file, or its standard input.
fn interpreter(
    name: &str,
    words: &[Word],
    operands: &[usize],
    code_operand: bool,
    checked: bool,
    feed: &Feed,
    r: &mut Reading,
) {
    // Code given by an option (inline, or a file of it) means no operand is code. A file of
    // code is a program as any, unless it is the standard input the line feeds
    // (`sed -f /dev/stdin`) or a name the shell computes.
    let opts = table::program(name).map_or(&[][..], |p| p.opts);
    let mut code_given = false;
    for i in 1..words.len() {
        let Some((opt, value)) = find_opt(opts, words, i) else {
            continue;
        };
        if opt.act != Act::Code {
            continue;
        }
        code_given = true;
        if opt.given == Given::Nothing {
            let file = match value {
                Some(Value::Word(w)) => w.clone(),
                Some(Value::Attached(text)) => Word::plain(&text),
                None => continue,
            };
            script_file(name, &file, feed, false, r);
        }
    }
    if code_given {
        return;
    }
    let mut operands = operands.iter().copied();
    if code_operand {
        let Some(at) = operands.next() else {
            return;
        };
        let text = &words[at];
        let plain = checked && text.is_static() && code::is_plain(name, &text.text);
        if !plain {
            r.act(at, "its program", Act::Code);
            r.unknown(format!("{name} runs a program the policy does not read"));
        }
        return;
    }
    match operands.next() {
        Some(at) => script_file(name, &words[at], feed, false, r),
        None => fed(name, feed, false, r),
    }
}

fn read_custom(own: &CustomProgram, words: &[Word], r: &mut Reading) {
    let given = match own.runs {
        CustomRuns::Nothing => Given::Nothing,
        CustomRuns::Command => Given::Program,
        CustomRuns::Script => Given::Script,
    };
    let opts: Vec<Opt> = own
        .acts
        .iter()
        .map(|name| Opt {
            name,
            takes: match given {
                Given::Nothing => Takes::Nothing,
                _ => Takes::Value,
            },
            act: Act::Runs,
            given,
        })
        .collect();
    let name = basename(&words[0].text).to_string();
    options(&name, &opts, &[], words, r);
    if own.wrapper {
        wrapper::read(&name, words, &[], 0, false, false, r);
    }
}

fn join(words: &[Word]) -> String {
    words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ")
}
