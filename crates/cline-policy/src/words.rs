//! A rule's `command`: words, as people write commands, not a regex over the text.
//!
//! `git status` is that command exactly; a last word `*` (or a `:*` suffix, as Claude Code
//! writes `git status:*`) lets any further words follow; `*`, `?` and `[..]` inside a word
//! glob that word (`*.md`, `--output=*`). How a pattern is held depends on the answer:
//!
//! - **approve** holds only for a command that is exactly so: the same program, each word
//!   matching in place, no word the shell computes or globs (`$x`, `*.rs`) where the pattern
//!   must match, and no more words unless the pattern ends in `*`.
//! - **deny** holds for any command that could be so: the program also by its base name
//!   (`/bin/rm`), an option word as a set of flags (`-rf` holds for `-fr`, `-r -f`, `-Rrf`
//!   when `-R` is not asked, `-rfv`), a long option also as `--force=..` or a prefix getopt
//!   accepts (`--rec`), the other words in order with anything between, and a word the
//!   shell computes taken as whatever the rule fears.

use crate::command::{basename, SimpleCommand, Word};
use globset::{GlobBuilder, GlobMatcher};

/// One `command` pattern, compiled.
#[derive(Debug, Clone)]
pub struct CommandPattern {
    pub text: String,
    words: Vec<PatternWord>,
    /// The pattern ends in `*` or `:*`: any further words may follow.
    open: bool,
}

#[derive(Debug, Clone)]
struct PatternWord {
    text: String,
    glob: Option<GlobMatcher>,
}

impl PatternWord {
    fn matches(&self, word: &str) -> bool {
        match &self.glob {
            Some(g) => g.is_match(word),
            None => self.text == word,
        }
    }

    /// Whether this pattern word names `option` (an acting option): written out, or as the
    /// literal start of a glob (`--output=*` names `--output`).
    fn names(&self, option: &str) -> bool {
        let literal = match &self.glob {
            None => self.text.as_str(),
            Some(_) => &self.text[..self.text.find(['*', '?', '[']).unwrap_or(self.text.len())],
        };
        !option.is_empty()
            && (literal == option
                || literal
                    .strip_prefix(option)
                    .is_some_and(|rest| rest.starts_with('=') || (option.len() == 2 && !option.starts_with("--"))))
    }
}

/// Characters that say a `command` was written as a regex (or as shell syntax, which a
/// pattern of words cannot mean).
const REGEX_SIGNS: [char; 13] = ['^', '$', '(', ')', '|', '\\', '+', ';', '&', '<', '>', '"', '`'];

impl CommandPattern {
    /// Compiles a pattern, or says why it is surely a mistake and what to write.
    pub fn parse(text: &str) -> Result<CommandPattern, String> {
        if let Some(c) = text.chars().find(|c| REGEX_SIGNS.contains(c) || *c == '\'') {
            return Err(format!(
                "command = {text:?} has {c:?}, which a command of words cannot mean: command is \
                 the words of one command (\"git status\", \"git push *\", \"rm -rf *\"); for a \
                 regex write command_regex = {text:?}"
            ));
        }
        let mut raw: Vec<&str> = text.split_whitespace().collect();
        if raw.is_empty() {
            return Err(format!(
                "command = {text:?} has no words; write the command's words, such as \"ls *\""
            ));
        }
        let mut open = false;
        if raw.last() == Some(&"*") && raw.len() > 1 {
            raw.pop();
            open = true;
        } else if let Some(last) = raw.last_mut() {
            if let Some(stem) = last.strip_suffix(":*") {
                if stem.is_empty() {
                    return Err(format!(
                        "command = {text:?}: `:*` follows a word, as in \"git status:*\""
                    ));
                }
                *last = stem;
                open = true;
            }
        }
        if raw.len() == 1 && raw[0] == "*" {
            return Err(format!(
                "command = {text:?} matches every command; leave command out to match them all"
            ));
        }
        let words = raw
            .into_iter()
            .map(|w| {
                let glob = match w.contains(['*', '?', '[']) {
                    true => Some(
                        GlobBuilder::new(w)
                            .literal_separator(false)
                            .build()
                            .map_err(|e| format!("command = {text:?}: the word {w:?} is not a glob: {e}"))?
                            .compile_matcher(),
                    ),
                    false => None,
                };
                Ok(PatternWord {
                    text: w.to_string(),
                    glob,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(CommandPattern {
            text: text.to_string(),
            words,
            open,
        })
    }

    /// For approve: the command is exactly so (see the module's doc).
    pub fn holds_exactly(&self, command: &SimpleCommand) -> bool {
        self.exactly(command).is_ok()
    }

    /// For approve: `Ok` when the command is exactly so, else why not.
    pub fn exactly(&self, command: &SimpleCommand) -> Result<(), String> {
        let words = &command.words;
        if let Some(why) = &command.unknown {
            return Err(format!("what runs cannot be read ({why})"));
        }
        let fits = words.len() >= self.words.len() && (self.open || words.len() == self.words.len());
        // Every word must be known: a computed or globbed word in the open tail could be an
        // option the pattern's author never meant to allow.
        if !fits || !words.iter().all(Word::is_static) || !self.words.iter().zip(words).all(|(p, w)| p.matches(&w.text))
        {
            return Err("does not match".into());
        }
        // A word that acts must be named in its place, never left to a wildcard.
        for acting in &command.acting {
            let named = self.words.get(acting.at).is_some_and(|p| p.names(&acting.option));
            if !named {
                return Err(format!(
                    "{:?} {}: a rule approves it only by naming {:?} in its place",
                    words.get(acting.at).map_or("", |w| w.text.as_str()),
                    acting.does,
                    acting.option
                ));
            }
        }
        Ok(())
    }

    /// For deny: the command could be so (see the module's doc).
    pub fn could_hold(&self, command: &SimpleCommand) -> bool {
        if command.is_unknown() {
            return true;
        }
        let Some(program) = command.words.first() else {
            return false;
        };
        // A name the shell computes may be any command, with any words.
        if program.may_be_anything() || program.globbed {
            return true;
        }
        let name = &self.words[0];
        if !(name.matches(&program.text) || name.matches(basename(&program.text))) {
            return false;
        }
        let canonical;
        let words = match name.text == "git" && basename(&program.text) == "git" {
            true => {
                canonical = crate::programs::git::canonical(&command.words);
                &canonical
            }
            false => &command.words,
        };
        let args = &words[1..];
        // Options: every flag of every short option pattern word, every long one. A word that
        // may be anything before `--` may be any option, or several.
        let mut flags: Vec<char> = Vec::new();
        let mut longs: Vec<&str> = Vec::new();
        let mut operands: Vec<&Word> = Vec::new();
        let mut ended = false;
        let mut any_option = false;
        for w in args {
            if !ended && w.may_be_anything() {
                any_option = true;
                operands.push(w);
            } else if ended || !w.is_static() {
                operands.push(w);
            } else if w.text == "--" {
                ended = true;
            } else if let Some(long) = w.text.strip_prefix("--") {
                longs.push(long.split('=').next().unwrap_or(long));
            } else if w.text.len() > 1 && w.text.starts_with('-') {
                flags.extend(w.text[1..].chars());
                operands.push(w);
            } else {
                operands.push(w);
            }
        }
        let mut next = 0;
        for p in &self.words[1..] {
            let is_option = p.glob.is_none() && p.text.starts_with('-') && p.text.len() > 1;
            if is_option {
                let held = if let Some(long) = p.text.strip_prefix("--") {
                    longs.iter().any(|l| !l.is_empty() && long.starts_with(l))
                } else {
                    p.text[1..].chars().all(|f| flags.contains(&f))
                };
                if !(held || any_option) {
                    return false;
                }
                continue;
            }
            // Other words in order, anything between; a word the shell computes or globs may
            // be any of them.
            match operands[next..]
                .iter()
                .position(|w| !w.is_static() || p.matches(&w.text))
            {
                Some(at) => next += at + 1,
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::Script;

    fn one(line: &str) -> SimpleCommand {
        Script::parse(line).commands.remove(0)
    }

    #[test]
    fn approve_is_exact_and_deny_is_what_could_be() {
        let p = CommandPattern::parse("git status").unwrap();
        assert!(p.holds_exactly(&one("git status")));
        assert!(!p.holds_exactly(&one("git status --porcelain")));
        let open = CommandPattern::parse("git status:*").unwrap();
        assert!(open.holds_exactly(&one("git status --porcelain")));
        assert!(!open.holds_exactly(&one("git stash")));
        let ls = CommandPattern::parse("ls *").unwrap();
        assert!(ls.holds_exactly(&one("ls -la src")));
        assert!(ls.holds_exactly(&one("ls")));
        assert!(!ls.holds_exactly(&one("ls $HOME")));
        assert!(!ls.holds_exactly(&one("ls *.rs")));
        assert!(!ls.holds_exactly(&one("/bin/ls")));

        let rm = CommandPattern::parse("rm -rf *").unwrap();
        for yes in [
            "rm -rf x",
            "rm -fr x",
            "rm -r -f x",
            "rm -rfv x",
            "/bin/rm -rf x",
            "r\\m -rf x",
            "\"rm\" -rf x",
            "rm -f -r",
            "rm $FLAGS x",
        ] {
            assert!(rm.could_hold(&one(yes)), "{yes}");
        }
        for no in ["rm x", "rm -r x", "rmdir -rf x", "echo rm -rf"] {
            assert!(!rm.could_hold(&one(no)), "{no}");
        }
        let long = CommandPattern::parse("rm --recursive").unwrap();
        assert!(long.could_hold(&one("rm --recursive x")));
        assert!(long.could_hold(&one("rm --rec x")));
        assert!(!long.could_hold(&one("rm --force x")));
        let push = CommandPattern::parse("git push * main").unwrap();
        assert!(push.could_hold(&one("git push origin main")));
        assert!(push.could_hold(&one("git push -f origin ma''in")));
        assert!(!push.could_hold(&one("git push origin dev")));
    }

    #[test]
    fn patterns_that_are_surely_mistakes_are_refused_with_the_fix() {
        for bad in [r"^(ls|cat)\b", r"\brm\b", "rm -rf / ; echo", "*", "", ":*", "ls [a"] {
            assert!(CommandPattern::parse(bad).is_err(), "{bad:?}");
        }
        let e = CommandPattern::parse(r"^(ls|cat)\b").unwrap_err();
        assert!(e.contains("command_regex"), "{e}");
    }
}
