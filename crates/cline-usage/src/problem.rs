//! What went wrong reading one file of the store. A problem is reported once, with the file,
//! and counted; it never stops the rest of the history from being read.

use std::path::PathBuf;

/// One file the reader could not use (or only partly).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct Problem {
    pub path: PathBuf,
    pub kind: ProblemKind,
}

/// Why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemKind {
    #[error("cannot read it ({0})")]
    Unreadable(String),
    /// Truncated or corrupt JSON: its calls are left out, never guessed.
    #[error("not valid JSON, left out ({0}); a session Cline is still writing is read again next time")]
    Corrupt(String),
    #[error("missing: the session's model calls are not known")]
    MissingMessages,
    #[error("the sessions database is locked or unreadable ({0}); subagents are still found by their files")]
    Database(String),
    /// A count no model call can have (`crate::messages::MAX_CALL_TOKENS`): the file's calls
    /// are left out rather than summed into nonsense.
    #[error("a model call in it counts {0} tokens, more than any model call can: its calls are left out")]
    Implausible(u64),
}

impl Problem {
    pub fn new(path: impl Into<PathBuf>, kind: ProblemKind) -> Self {
        Problem {
            path: path.into(),
            kind,
        }
    }
}
