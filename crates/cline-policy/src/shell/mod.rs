//! A command line read as bash reads it (tree-sitter-bash): the simple commands it runs, where
//! each runs (at the top, inside a substitution, inside a `bash -c` script, behind a wrapper
//! such as `sudo`), what each runs in turn (the programs table: [`crate::programs`]), and every
//! construct that makes its effect more than those commands (redirections to files,
//! substitutions, subshells, here-documents, `eval`, words the shell computes in command
//! position, text the grammar cannot read).
//!
//! Approve rules trust only a script of plain simple commands (no construct at all); deny
//! rules look at every command found anywhere, and what cannot be read (code given to an
//! interpreter, a script the shell computes, arithmetic on names, text the grammar cannot
//! read, past the read limits) is kept as an unknown command ([`SimpleCommand::unknown`]),
//! which a deny rule takes as what it fears.

mod read;
pub mod word;

pub use crate::command::{basename, Construct, SimpleCommand, Via, Word};
use crate::programs::Custom;

/// Above this many bytes a command line is not parsed: it is one unknown command.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;
/// Scripts inside scripts (`bash -c`, `eval`, wrappers) are read this deep; deeper is unknown.
const MAX_DEPTH: usize = 8;
/// At most this many simple commands are read from one command line; more is unknown.
const MAX_COMMANDS: usize = 1000;

/// A command line, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    pub commands: Vec<SimpleCommand>,
    pub constructs: Vec<Construct>,
}

impl Script {
    /// Reads a command line as bash would, with the programs table alone. Never fails: what
    /// cannot be read is a construct and an unknown command.
    pub fn parse(text: &str) -> Script {
        Script::read(text, &Custom::default())
    }

    /// Reads a command line with a policy file's own programs beside the table's.
    pub fn read(text: &str, custom: &Custom) -> Script {
        read::read(text, custom)
    }

    /// A program and its arguments, as a structured command gives them (no shell reads them).
    pub fn of_argv(argv: &[String], custom: &Custom) -> Script {
        read::argv(argv, custom)
    }

    /// Only simple commands joined by `&&`, `||`, `;`, `|` and newlines.
    pub fn is_plain(&self) -> bool {
        self.constructs.is_empty()
    }

    /// The commands the line runs at its top level.
    pub fn top(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.commands.iter().filter(|c| c.via == Via::Top)
    }

    /// The commands an approve rule must match: those at the top and those wrappers run.
    pub fn run_directly(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.commands
            .iter()
            .filter(|c| matches!(c.via, Via::Top | Via::Wrapped(_)))
    }
}
