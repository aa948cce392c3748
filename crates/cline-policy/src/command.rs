//! What a command line is made of, as the policy sees it: words, simple commands, where each
//! runs, and the constructs that make a line more than its simple commands. The shell reader
//! ([`crate::shell`]) makes these; the programs table ([`crate::programs`]) and the rules read
//! them.

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
    /// A word known from its text.
    pub fn plain(text: &str) -> Word {
        Word {
            text: text.to_string(),
            dynamic: false,
            globbed: false,
        }
    }

    /// A word the shell computes (a stand-in for what the policy cannot know).
    pub fn computed(text: &str) -> Word {
        Word {
            text: text.to_string(),
            dynamic: true,
            globbed: false,
        }
    }

    /// Known from the text alone: neither computed nor globbed.
    pub fn is_static(&self) -> bool {
        !self.dynamic && !self.globbed
    }

    /// It may become any word, or several, or an option: computed, or a glob that may match a
    /// name starting with `-` (`*`, `?x`, `[-a]x`; a file named `-rf` is one touch away).
    pub fn may_be_anything(&self) -> bool {
        self.dynamic
            || (self.globbed
                && !self
                    .text
                    .starts_with(|c: char| c.is_alphanumeric() || "./_~".contains(c)))
    }
}

/// Where a simple command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// In the command line itself, joined by `&&`, `||`, `;`, `|` or newlines.
    Top,
    /// Inside `$(..)`, backticks, `<(..)`, or an expansion the shell evaluates.
    Substitution,
    /// Inside the script a shell or a program runs (`bash -c '..'`, `eval '..'`, `trap '..'`,
    /// `git -c core.pager=..`), read in turn.
    Script(String),
    /// As the command a wrapper runs (`sudo`, `env`, `xargs`, `find -exec`, ...).
    Wrapped(String),
    /// Inside a compound command (a subshell, `{ }`, `if`, a loop, a function).
    Compound,
}

/// A word of a command that acts (the program runs another, writes a file, reaches the
/// network or runs code through it): an approve rule's wildcard never covers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acting {
    /// Its index in the command's words (the program is 0).
    pub at: usize,
    /// The option as the programs table names it (`--pre`, `-i`), or what the word is.
    pub option: String,
    /// What it does, in words (`runs a program`).
    pub does: &'static str,
}

/// One simple command: its words (the program first) and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    pub words: Vec<Word>,
    pub via: Via,
    /// Nothing is known of what runs (code the policy cannot read, a script the shell
    /// computes, past the read limits): why. A deny or ask rule takes it as what it fears.
    pub unknown: Option<String>,
    /// Its words that act ([`crate::programs`]).
    pub acting: Vec<Acting>,
}

impl SimpleCommand {
    /// A command of these words.
    pub fn new(words: Vec<Word>, via: Via) -> SimpleCommand {
        SimpleCommand {
            words,
            via,
            unknown: None,
            acting: Vec::new(),
        }
    }

    /// What runs is not known, and why.
    pub fn unknown(via: Via, why: impl Into<String>) -> SimpleCommand {
        SimpleCommand {
            words: Vec::new(),
            via,
            unknown: Some(why.into()),
            acting: Vec::new(),
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some()
    }

    /// The words as one line, for people.
    pub fn display(&self) -> String {
        match &self.unknown {
            Some(why) => format!("<unknown: {why}>"),
            None => self.words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" "),
        }
    }

    /// The program's base name (`/bin/rm` runs `rm`), when known.
    pub fn program(&self) -> Option<&str> {
        self.words.first().filter(|w| w.is_static()).map(|w| basename(&w.text))
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

impl Construct {
    pub fn new(what: &'static str, text: &str) -> Construct {
        let text = text.lines().next().unwrap_or_default();
        Construct {
            what,
            text: text.chars().take(120).collect(),
        }
    }
}

/// The last part of a program's path: `/bin/rm` runs `rm`.
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Words joined back into a line the shell reads as the same words.
pub fn join_quoted(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| {
            if w.dynamic || w.globbed {
                // Keep what is computed computed, a glob a glob: the nested reading sees it so.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_may_be_an_option_only_when_it_may_start_with_a_dash() {
        let glob = |t: &str| Word {
            text: t.into(),
            dynamic: false,
            globbed: true,
        };
        assert!(glob("*").may_be_anything());
        assert!(glob("?f").may_be_anything());
        assert!(glob("[-a]x").may_be_anything());
        assert!(!glob("src/*.rs").may_be_anything());
        assert!(!glob("a*").may_be_anything());
        assert!(!glob("./*").may_be_anything());
        assert!(Word::computed("$x").may_be_anything());
        assert!(!Word::plain("-rf").may_be_anything());
    }
}
