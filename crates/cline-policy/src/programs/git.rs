//! git as git reads its command line: its own options before the subcommand (`-C`, `-c`,
//! `--git-dir`, ...), aliases given with `-c alias.NAME=..`, the options of each subcommand
//! that run programs or write files, and what a push pushes to (its refspecs' destinations,
//! `HEAD`, `@`, `+`, `refs/heads/`, `--all`, `--mirror`, no refspec at all).
//!
//! [`read`] gives the acting words and what runs (the programs table's questions);
//! [`canonical`] gives a git command as a deny rule about a subcommand should see it:
//! `git -C x -c k=v push -f origin +HEAD:refs/heads/main` is `git push -f --force origin main`.

use super::table::{Act, Given, Opt, Takes};
use super::{join, options, Reading, Run};
use crate::command::{join_quoted, Word};

/// git's own options that take the next word (or `=VALUE`).
const GLOBAL_VALUES: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--list-cmds",
    "--attr-source",
];

const fn opt(name: &'static str, takes: Takes, act: Act, given: Given) -> Opt<'static> {
    Opt {
        name,
        takes,
        act,
        given,
    }
}

const OUTPUT: Opt = opt("--output", Takes::Value, Act::Writes, Given::Nothing);
const EXT_DIFF: Opt = opt("--ext-diff", Takes::Nothing, Act::Runs, Given::Nothing);
const TEXTCONV: Opt = opt("--textconv", Takes::Nothing, Act::Runs, Given::Nothing);
const UPLOAD_PACK: Opt = opt("--upload-pack", Takes::Value, Act::Runs, Given::Script);

/// Each subcommand's options that act.
const SUBCOMMANDS: &[(&[&str], &[Opt])] = &[
    (
        &[
            "log",
            "show",
            "diff",
            "whatchanged",
            "diff-tree",
            "diff-index",
            "diff-files",
            "range-diff",
            "stash",
        ],
        &[OUTPUT, EXT_DIFF, TEXTCONV],
    ),
    (
        &["format-patch"],
        &[
            OUTPUT,
            EXT_DIFF,
            TEXTCONV,
            opt("-o", Takes::Value, Act::Writes, Given::Nothing),
            opt("--output-directory", Takes::Value, Act::Writes, Given::Nothing),
        ],
    ),
    (
        &["grep"],
        &[
            opt("-O", Takes::Attached, Act::Runs, Given::Script),
            opt("--open-files-in-pager", Takes::Attached, Act::Runs, Given::Script),
            TEXTCONV,
        ],
    ),
    (
        &["blame", "annotate", "cat-file"],
        &[TEXTCONV, opt("--filters", Takes::Nothing, Act::Runs, Given::Nothing)],
    ),
    (&["fetch", "pull", "ls-remote"], &[UPLOAD_PACK]),
    (
        &["clone"],
        &[
            UPLOAD_PACK,
            opt("-u", Takes::Value, Act::Runs, Given::Script),
            opt("--template", Takes::Value, Act::Runs, Given::Unknown),
            opt("-c", Takes::Value, Act::Runs, Given::Unknown),
            opt("--config", Takes::Value, Act::Runs, Given::Unknown),
        ],
    ),
    (
        &["push", "send-pack"],
        &[
            opt("--receive-pack", Takes::Value, Act::Runs, Given::Script),
            opt("--exec", Takes::Value, Act::Runs, Given::Script),
        ],
    ),
    (
        &["archive"],
        &[
            opt("--exec", Takes::Value, Act::Runs, Given::Script),
            opt("--remote", Takes::Value, Act::Network, Given::Nothing),
            opt("-o", Takes::Value, Act::Writes, Given::Nothing),
            OUTPUT,
        ],
    ),
    (
        &["rebase"],
        &[
            opt("-x", Takes::Value, Act::Runs, Given::Script),
            opt("--exec", Takes::Value, Act::Runs, Given::Script),
        ],
    ),
    (
        &["difftool", "mergetool"],
        &[
            opt("-x", Takes::Value, Act::Runs, Given::Script),
            opt("--extcmd", Takes::Value, Act::Runs, Given::Script),
            opt("-t", Takes::Value, Act::Runs, Given::Unknown),
            opt("--tool", Takes::Value, Act::Runs, Given::Unknown),
        ],
    ),
    (&["init"], &[opt("--template", Takes::Value, Act::Runs, Given::Unknown)]),
    (
        &["send-email"],
        &[
            opt("--to-cmd", Takes::Value, Act::Runs, Given::Script),
            opt("--cc-cmd", Takes::Value, Act::Runs, Given::Script),
            opt("--sendmail-cmd", Takes::Value, Act::Runs, Given::Script),
            opt("--smtp-server", Takes::Value, Act::Runs, Given::Script),
        ],
    ),
    (
        &["help"],
        &[
            opt("-w", Takes::Nothing, Act::Runs, Given::Nothing),
            opt("--web", Takes::Nothing, Act::Runs, Given::Nothing),
        ],
    ),
    (
        &["instaweb"],
        &[
            opt("--httpd", Takes::Value, Act::Runs, Given::Script),
            opt("--browser", Takes::Value, Act::Runs, Given::Script),
        ],
    ),
];

/// What a config key set with `-c` (or `clone -c`) makes git do with its value.
fn config_gives(key: &str) -> Given {
    let key = key.to_ascii_lowercase();
    const UNKNOWN_ENDS: &[&str] = &["path", "hookspath", "templatedir", "insteadof", "allow", "worktree"];
    const SCRIPT_ENDS: &[&str] = &[
        "cmd",
        "command",
        "program",
        "editor",
        "pager",
        "helper",
        "hook",
        "driver",
        "textconv",
        "clean",
        "smudge",
        "process",
        "uploadpack",
        "receivepack",
        "tunnel",
        "askpass",
        "sshcommand",
        "fsmonitor",
        "external",
        "httpd",
        "browser",
        "update",
        "proxy",
        "gitproxy",
    ];
    if key.starts_with("pager.") || key.starts_with("alias.") {
        return Given::Script;
    }
    if key.starts_with("include") || UNKNOWN_ENDS.iter().any(|e| key.ends_with(e)) {
        return Given::Unknown;
    }
    match SCRIPT_ENDS.iter().any(|e| key.ends_with(e)) {
        true => Given::Script,
        false => Given::Nothing,
    }
}

/// A git command line split at its subcommand.
struct Call {
    /// The subcommand's index, when there is one.
    sub: Option<usize>,
    /// `-c KEY=VALUE` (and `--config-env`): the option's index, the key, the value.
    configs: Vec<(usize, String, Word)>,
    /// Indices of git's own options and their values (dropped by [`canonical`]).
    global: Vec<usize>,
}

fn split(words: &[Word]) -> Call {
    let mut call = Call {
        sub: None,
        configs: Vec::new(),
        global: Vec::new(),
    };
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        if !w.is_static() || !t.starts_with('-') {
            call.sub = Some(i);
            break;
        }
        call.global.push(i);
        let (key, attached) = match t.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v)),
            _ => (t, None),
        };
        let value = match attached {
            Some(v) => Some(Word::plain(v)),
            None if GLOBAL_VALUES.contains(&key) => {
                i += 1;
                call.global.push(i);
                words.get(i).cloned()
            }
            None => None,
        };
        match (key, value) {
            ("-c", Some(v)) => {
                let (k, val) = v.text.split_once('=').unwrap_or((&v.text, "true"));
                let value = Word {
                    text: val.to_string(),
                    ..v.clone()
                };
                call.configs
                    .push((call.global[call.global.len() - 2], k.to_string(), value));
            }
            ("--config-env", Some(v)) => {
                let k = v.text.split('=').next().unwrap_or_default().to_string();
                call.configs.push((i, k, Word::computed("<from the environment>")));
            }
            _ => {}
        }
        i += 1;
    }
    call
}

/// The acting words of a git command and what it runs.
pub(super) fn read(words: &[Word], r: &mut Reading) {
    let call = split(words);
    for &at in &call.global {
        let t = words[at].text.as_str();
        if t == "-c" || t.starts_with("--config-env") || t.starts_with("--exec-path=") {
            r.act(at, t.split('=').next().unwrap_or(t), Act::Runs);
        }
        if t.starts_with("--exec-path=") {
            r.unknown("git --exec-path runs git's programs from another folder");
        }
    }
    for (_, key, value) in &call.configs {
        let by = format!("git -c {key}");
        match config_gives(key) {
            Given::Script => {
                let text = value.text.strip_prefix('!').unwrap_or(&value.text);
                r.script(
                    &Word {
                        text: text.to_string(),
                        ..value.clone()
                    },
                    &by,
                )
            }
            Given::Unknown => r.unknown(format!("{by} makes git run what the policy cannot read")),
            _ => {}
        }
    }
    let Some(sub) = call.sub else {
        return;
    };
    if let Some(expanded) = alias(words, &call) {
        match expanded {
            Alias::Script(text) => r.runs.push(Run::Script {
                text,
                by: "a git alias".into(),
            }),
            Alias::Words(words) => r.runs.push(Run::Command {
                words,
                by: "a git alias".into(),
                exact: true,
            }),
        }
        return;
    }
    let name = words[sub].text.as_str();
    let rest = &words[sub..];
    match name {
        "bisect" if rest.get(1).is_some_and(|w| w.text == "run") => {
            r.construct("git bisect run, which runs a command", &join(words));
            r.runs.push(Run::Command {
                words: rest[2..].to_vec(),
                by: "git bisect run".into(),
                exact: true,
            });
            return;
        }
        "submodule" if rest.iter().any(|w| w.text == "foreach") => {
            r.construct("git submodule foreach, which runs a script", &join(words));
            let at = rest.iter().position(|w| w.text == "foreach").unwrap_or(0);
            let script: Vec<&Word> = rest[at + 1..].iter().filter(|w| !w.text.starts_with("--")).collect();
            let text = script.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ");
            match script.iter().all(|w| w.is_static()) {
                true => r.runs.push(Run::Script {
                    text,
                    by: "git submodule foreach".into(),
                }),
                false => r.unknown("git submodule foreach runs a script the shell computes"),
            }
            return;
        }
        "filter-branch" => {
            r.construct("git filter-branch, which runs scripts", &join(words));
            r.unknown("git filter-branch runs its filters as scripts");
            return;
        }
        _ => {}
    }
    let Some((_, opts)) = SUBCOMMANDS.iter().find(|(names, _)| names.contains(&name)) else {
        return;
    };
    let before = r.acting.len();
    options(&format!("git {name}"), opts, &[], rest, r);
    for acting in &mut r.acting[before..] {
        acting.at += sub;
    }
}

enum Alias {
    Script(String),
    Words(Vec<Word>),
}

/// The subcommand as an alias given with `-c alias.NAME=VALUE` expands it.
fn alias(words: &[Word], call: &Call) -> Option<Alias> {
    let sub = call.sub?;
    let name = &words[sub];
    let (_, _, value) = call.configs.iter().rev().find(|(_, key, _)| {
        key.strip_prefix("alias.")
            .is_some_and(|a| a.eq_ignore_ascii_case(&name.text))
    })?;
    let rest = &words[sub + 1..];
    if let Some(script) = value.text.strip_prefix('!') {
        let mut text = script.to_string();
        if !rest.is_empty() {
            text.push(' ');
            text.push_str(&join_quoted(rest));
        }
        return Some(Alias::Script(text));
    }
    let mut expanded = vec![words[0].clone()];
    expanded.extend(value.text.split_whitespace().map(|w| Word {
        text: w.to_string(),
        ..value.clone()
    }));
    expanded.extend(rest.iter().cloned());
    Some(Alias::Words(expanded))
}

/// A git command as a deny rule about a subcommand sees it: git's own options dropped,
/// aliases given on the line expanded, and a push written as what it pushes to.
pub fn canonical(words: &[Word]) -> Vec<Word> {
    let call = split(words);
    let expanded;
    let (words, call) = match alias(words, &call) {
        Some(Alias::Words(w)) => {
            expanded = w;
            let call = split(&expanded);
            (&expanded[..], call)
        }
        _ => (words, call),
    };
    let Some(sub) = call.sub else {
        return words.to_vec();
    };
    let mut out = vec![words[0].clone()];
    let rest = &words[sub..];
    match rest[0].is_static() && matches!(rest[0].text.as_str(), "push" | "send-pack") {
        true => out.extend(push(rest)),
        false => out.extend(rest.iter().cloned()),
    }
    out
}

/// `push [options] [remote [refspec...]]` as `push [options] [--force] REMOTE DEST...`, each
/// destination the branch it writes (`main` for `HEAD:refs/heads/main`, `+main`, `:main`), and
/// one the line cannot tell (no refspec, `HEAD`, `@`, a glob, `--all`, `--mirror`) as a word
/// that may be any branch.
fn push(rest: &[Word]) -> Vec<Word> {
    let mut options = Vec::new();
    let mut operands: Vec<&Word> = Vec::new();
    let mut remote: Option<Word> = None;
    let mut every = false;
    let mut tags = false;
    let mut force = false;
    let mut i = 1;
    while i < rest.len() {
        let w = &rest[i];
        let t = w.text.as_str();
        if !w.is_static() || !t.starts_with('-') || t == "-" {
            operands.push(w);
        } else if t == "--" {
            operands.extend(&rest[i + 1..]);
            break;
        } else if t == "--repo" {
            remote = rest.get(i + 1).cloned();
            i += 1;
        } else if let Some(r) = t.strip_prefix("--repo=") {
            remote = Some(Word::plain(r));
        } else {
            options.push(w.clone());
            if matches!(t, "--all" | "--branches" | "--mirror") {
                every = true;
            }
            if t == "--tags" {
                tags = true;
            }
            if matches!(t, "-o" | "--push-option" | "--receive-pack" | "--exec") {
                i += 1;
                options.extend(rest.get(i).cloned());
            }
        }
        i += 1;
    }
    let mut refspecs = operands.into_iter();
    let remote = remote
        .or_else(|| refspecs.next().cloned())
        .unwrap_or_else(|| Word::computed("<the default remote>"));
    let mut dests: Vec<Word> = Vec::new();
    for spec in refspecs {
        if !spec.is_static() && spec.dynamic {
            dests.push(spec.clone());
            continue;
        }
        let text = spec.text.as_str();
        let text = match text.strip_prefix('+') {
            Some(t) => {
                force = true;
                t
            }
            None => text,
        };
        let dest = text.rsplit_once(':').map_or(text, |(_, d)| d);
        // git completes a short destination: `heads/main` is `refs/heads/main`.
        let dest = dest
            .strip_prefix("refs/heads/")
            .or_else(|| dest.strip_prefix("heads/"))
            .unwrap_or(dest);
        let unknown =
            dest.is_empty() || dest == "HEAD" || dest == "@" || dest.contains(['*', '?', '[']) || spec.globbed;
        dests.push(match unknown {
            true => Word::computed("<the current branch, or any>"),
            false => Word::plain(dest),
        });
    }
    if (dests.is_empty() && !tags) || every {
        dests.push(Word::computed("<the branches git push picks>"));
    }
    if tags {
        // `--tags` alone pushes the tags, no branch.
        dests.push(Word::plain("refs/tags/*"));
    }
    // send-pack pushes as push does.
    let mut out = vec![Word::plain("push")];
    out.extend(options);
    if force {
        out.push(Word::plain("--force"));
    }
    out.push(remote);
    out.extend(dests);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split_whitespace().map(Word::plain).collect()
    }

    fn shown(line: &str) -> String {
        canonical(&words(line))
            .iter()
            .map(|w| match w.dynamic {
                true => "?".to_string(),
                false => w.text.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn every_spelling_of_a_push_names_the_branch_it_writes() {
        for (line, seen) in [
            ("git push origin main", "git push origin main"),
            ("git push origin HEAD:main", "git push origin main"),
            ("git push origin HEAD:refs/heads/main", "git push origin main"),
            ("git push origin +HEAD:main", "git push --force origin main"),
            ("git push origin main:main", "git push origin main"),
            ("git push origin refs/heads/main", "git push origin main"),
            ("git push origin +main", "git push --force origin main"),
            ("git push origin @:main", "git push origin main"),
            ("git push origin :main", "git push origin main"),
            ("git push", "git push ? ?"),
            ("git push origin", "git push origin ?"),
            ("git push --all origin", "git push --all origin ?"),
            ("git push --mirror", "git push --mirror ? ?"),
            ("git -c push.default=current push", "git push ? ?"),
            ("git -C /x push origin HEAD", "git push origin ?"),
            ("git push --repo=origin main", "git push origin main"),
            ("git push origin refs/heads/*:refs/heads/*", "git push origin ?"),
            ("git push -u origin feature", "git push -u origin feature"),
            ("git -c alias.p=push p origin main", "git push origin main"),
            ("git status", "git status"),
            ("git send-pack ../o.git main", "git push ../o.git main"),
            ("git push origin HEAD:heads/main", "git push origin main"),
            ("git push --tags origin", "git push --tags origin refs/tags/*"),
        ] {
            assert_eq!(shown(line), seen, "{line}");
        }
    }

    #[test]
    fn options_that_run_or_write_are_acting_and_their_scripts_are_read() {
        let read = |line: &str| {
            let mut r = Reading::default();
            super::read(&words(line), &mut r);
            r
        };
        let r = read("git log --output=/tmp/x");
        assert_eq!(r.acting.len(), 1);
        assert_eq!(r.acting[0].at, 2);
        let r = read("git -c core.pager=rm log");
        assert!(r
            .runs
            .iter()
            .any(|run| matches!(run, Run::Script { text, .. } if text == "rm")));
        assert!(r.acting.iter().any(|a| a.at == 1));
        let r = read("git -c alias.x=!rm x -rf victim");
        assert!(r
            .runs
            .iter()
            .any(|run| matches!(run, Run::Script { text, .. } if text == "rm -rf victim")));
        let r = read("git -c color.ui=never status");
        assert!(r.runs.is_empty());
        assert_eq!(r.acting.len(), 1, "-c acts for approve");
        let r = read("git status --porcelain");
        assert!(r.acting.is_empty() && r.runs.is_empty());
        let r = read("git grep -Orm foo");
        assert!(r
            .runs
            .iter()
            .any(|run| matches!(run, Run::Script { text, .. } if text == "rm")));
    }
}
