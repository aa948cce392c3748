//! Wrappers: programs that run the command their operands give (`sudo`, `env`, `xargs`,
//! `timeout`), or join them into a script (`watch`, `ssh`). Where the command starts is read
//! from the wrapper's options: with each option known there is one reading, which an approve
//! rule checks; an option the table does not list may take the next word, so both starts are
//! read (a deny rule sees each; an approve rule holds for none).

use super::{join, Reading, Run};
use crate::command::{join_quoted, Word};

/// At most this many readings of one wrapper; more is unknown.
const MAX_STARTS: usize = 16;

/// Reads wrapper `name`: `values` are its options that take the next word, `skip` the operands
/// before its command, `known` whether its options are listed at all, `joins` whether its
/// operands become a script.
pub(super) fn read(
    name: &str,
    words: &[Word],
    values: &[&str],
    skip: usize,
    known: bool,
    joins: bool,
    r: &mut Reading,
) {
    // taskset -c LIST COMMAND has no mask operand.
    let skip = match name == "taskset" && words.iter().any(|w| w.text == "-c" || w.text.starts_with("--cpu-list")) {
        true => 0,
        false => skip,
    };
    let mut i = 1;
    let mut ambiguous = None;
    let mut skipped = 0;
    let mut replace: Option<String> = None;
    let mut raw_exec = false;
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        if !w.is_static() {
            break;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if matches!(name, "env" | "genv") {
            let split = t
                .strip_prefix("--split-string=")
                .or_else(|| t.strip_prefix("-S").filter(|s| !s.is_empty()));
            if let Some(s) = split {
                env_split(s, &words[i + 1..], r);
                return;
            }
            if t == "-S" || t == "--split-string" {
                match words.get(i + 1) {
                    Some(s) if s.is_static() => env_split(&s.text, &words[i + 2..], r),
                    _ => r.unknown("env -S splits a string the shell computes"),
                }
                return;
            }
            if !t.starts_with('-') && t.contains('=') {
                let (name, value) = t.split_once('=').unwrap_or((t, ""));
                r.runs.extend(super::variables::runs(name, value, false));
                i += 1;
                continue;
            }
        }
        if name == "flock" && (t == "-c" || t == "--command") {
            r.construct("a script run by a shell (-c)", &join(words));
            match words.get(i + 1) {
                Some(s) => r.script(s, name),
                None => r.unknown("flock -c without a script"),
            }
            return;
        }
        if name.ends_with("xargs") && (t == "-I" || t.starts_with("-i") || t.starts_with("--replace")) {
            let given = match t {
                "-I" => words.get(i + 1).map(|w| w.text.clone()).unwrap_or_default(),
                _ => t
                    .trim_start_matches("--replace")
                    .trim_start_matches("-i")
                    .trim_start_matches('=')
                    .to_string(),
            };
            replace = Some(if given.is_empty() { "{}".into() } else { given });
        }
        if name == "watch" && (t == "-x" || t == "--exec") {
            raw_exec = true;
        }
        if t.starts_with('-') && t.len() > 1 {
            let key = t.split('=').next().unwrap_or(t);
            let listed = values.contains(&key);
            let attached = t.contains('=') || (!t.starts_with("--") && t.len() > 2 && values.contains(&&t[..2]));
            if listed && !attached {
                i += 2;
                continue;
            }
            if !listed && !attached {
                // Not listed: it may take the next word.
                ambiguous.get_or_insert(i);
            }
            i += 1;
            continue;
        }
        if skipped < skip {
            skipped += 1;
            i += 1;
            continue;
        }
        break;
    }
    let (mut starts, exact): (Vec<usize>, bool) = match (known, ambiguous) {
        (false, _) => ((1..words.len()).collect(), false),
        (true, Some(u)) => ((u + 1..=(i + 1).min(words.len())).collect(), false),
        (true, None) => (vec![i], true),
    };
    starts.retain(|&s| s < words.len());
    if starts.len() > MAX_STARTS {
        r.unknown(format!("{name} with more words than are read ({})", words.len()));
        starts.truncate(MAX_STARTS);
    }
    if !exact {
        r.construct("a wrapper whose command cannot be placed", &join(words));
    }
    if joins && !raw_exec {
        r.construct("a script run by a shell", &join(words));
    }
    if starts.is_empty() && (name == "parallel" || name == "sem") {
        r.unknown(format!("{name} runs the commands it reads"));
    }
    for start in starts {
        let mut inner: Vec<Word> = words[start..].to_vec();
        if let Some(rep) = &replace {
            for w in &mut inner {
                if w.text.contains(rep.as_str()) {
                    w.dynamic = true;
                }
            }
        } else if name.ends_with("xargs") {
            // xargs adds the words it reads to the command (`echo -rf x | xargs rm`).
            inner.push(Word::computed("<words xargs reads>"));
        }
        if name == "parallel" || name == "sem" {
            if let Some(sep) = inner.iter().position(|w| w.text.starts_with(":::")) {
                inner.truncate(sep);
            }
            inner.push(Word::computed("<arguments of parallel>"));
        }
        if joins && !raw_exec {
            let text = inner.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ");
            match inner.iter().all(Word::is_static) {
                true => r.runs.push(Run::Script {
                    text,
                    by: name.to_string(),
                }),
                false => r.unknown(format!("{name} runs a script the shell computes")),
            }
        } else {
            r.runs.push(Run::Command {
                words: inner,
                by: name.to_string(),
                exact,
            });
        }
    }
}

/// `env -S STRING REST...`: the string split as env does (quotes honoured), then the rest.
fn env_split(string: &str, rest: &[Word], r: &mut Reading) {
    let mut text = string.to_string();
    for w in rest {
        text.push(' ');
        text.push_str(&join_quoted(std::slice::from_ref(w)));
    }
    r.construct("env -S, which splits a string into a command", string);
    r.runs.push(Run::Script {
        text,
        by: "env -S".into(),
    });
}
