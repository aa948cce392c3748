//! The shell's builtins that evaluate their arguments as code, or change what later names run:
//! `eval`, `source`, `trap`, `alias`, `hash -p`, `enable -f`, callbacks (`mapfile -C`,
//! `compgen -C`, `bind -x`), arithmetic (`let`) and the history (`fc`).

use super::{code, join, script_file, Feed, Reading, Run};
use crate::command::Word;

/// Reads `name` if it is one of these builtins; returns whether it was.
pub(super) fn read(name: &str, words: &[Word], feed: &Feed, r: &mut Reading) -> bool {
    let args = &words[1..];
    let has_flag = |flag: char| {
        args.iter()
            .any(|w| w.is_static() && w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains(flag))
    };
    match name {
        "eval" => {
            r.construct("eval", &join(words));
            let text = args.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ");
            match args.iter().all(Word::is_static) {
                true => r.runs.push(Run::Script {
                    text,
                    by: "eval".into(),
                }),
                false => r.unknown("eval runs text the shell computes"),
            }
        }
        "source" | "." => {
            r.construct("a sourced script (source, .)", &join(words));
            if let Some(file) = args.iter().find(|w| !(w.is_static() && w.text == "--")) {
                script_file(name, file, feed, true, r);
            }
        }
        "trap" => {
            let mut ops = args
                .iter()
                .skip_while(|w| w.is_static() && w.text.starts_with('-') && w.text != "-" && w.text != "--")
                .skip_while(|w| w.is_static() && w.text == "--");
            if let (Some(script), Some(_)) = (ops.next(), ops.next()) {
                r.construct("a trap, run when a signal comes", &join(words));
                if !(script.is_static() && script.text == "-") {
                    r.script(script, "trap");
                }
            }
        }
        "alias" => {
            for w in args {
                if let Some((_, value)) = w.text.split_once('=') {
                    r.construct("an alias", &w.text);
                    let value = Word {
                        text: value.to_string(),
                        ..w.clone()
                    };
                    r.script(&value, "alias");
                }
            }
        }
        "hash" if has_flag('p') => {
            r.construct("hash -p, which makes a name run another program", &join(words));
            r.unknown("hash -p makes a command name run another program");
        }
        "enable" if has_flag('f') => {
            r.construct("enable -f, which loads a builtin from a file", &join(words));
            r.unknown("enable -f loads code from a file");
        }
        "mapfile" | "readarray" | "compgen" | "complete" => {
            let Some(callback) = args
                .iter()
                .position(|w| w.is_static() && w.text == "-C")
                .and_then(|i| args.get(i + 1))
            else {
                return false;
            };
            r.construct("a command run as a callback (-C)", &join(words));
            r.script(callback, name);
        }
        "bind" => {
            let Some(i) = args.iter().position(|w| w.text == "-x") else {
                return false;
            };
            r.construct("bind -x, which runs a command", &join(words));
            match args
                .get(i + 1)
                .filter(|w| w.is_static())
                .and_then(|w| w.text.split_once(':'))
            {
                Some((_, cmd)) => r.runs.push(Run::Script {
                    text: cmd.trim().trim_matches(['"', '\'']).to_string(),
                    by: "bind -x".into(),
                }),
                None => r.unknown("bind -x runs a command the policy cannot read"),
            }
        }
        "let" => {
            r.construct("arithmetic the shell evaluates (let)", &join(words));
            if args
                .iter()
                .any(|w| !w.is_static() || !code::arithmetic_is_plain(&w.text))
            {
                r.unknown("let evaluates arithmetic on variables, whose values may run a substitution");
            }
        }
        "fc" => {
            r.construct("fc, which runs commands from the history", &join(words));
            r.unknown("fc runs commands from the history");
        }
        _ => return false,
    }
    true
}
