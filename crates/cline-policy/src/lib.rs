//! The policy over Cline's tool calls, pure: a policy file's rules in, decisions out (no I/O,
//! no clock), so `aep-cline policy test`, the hook door and the hub tap decide alike.
//!
//! - [`shell`]: a command line read with bash's grammar (tree-sitter-bash).
//! - [`words`]: a rule's `command`, words as people write them.
//! - [`path`]: a tool's paths placed against the workspace.
//! - [`rules`]: the file's format and the decision.

#![forbid(unsafe_code)]
#![deny(missing_debug_implementations)]

pub mod path;
pub mod rules;
pub mod shell;
pub mod words;

pub use rules::{Answer, Asked, Decision, PolicyError, PolicyFile, Rule, Timeout};
