//! The policy over Cline's tool calls, pure: a policy file's rules in, decisions out (no I/O,
//! no clock), so `aep-cline policy test`, the hook door and the hub tap decide alike.
//!
//! The one principle: an approve rule holds only for what the policy reads with certainty
//! (every command and every path of a call); for a deny or ask rule, whatever cannot be read
//! with certainty (a command or word the shell computes, code given to an interpreter by any
//! channel, an input shape Cline accepts that the policy does not understand) is taken as what
//! the rule fears. `rules.rs` applies it, in one place.
//!
//! - [`command`]: what a command line is made of (words, simple commands, constructs).
//! - [`programs`]: what well-known programs do with their arguments (options that act, what
//!   they run in turn), git as git reads itself.
//! - [`shell`]: a command line read with bash's grammar (tree-sitter-bash).
//! - [`words`]: a rule's `command`, words as people write them.
//! - [`path`]: a tool's paths placed against the workspace.
//! - [`input`]: a tool call's input, every shape Cline accepts, read into commands and paths.
//! - [`rules`]: the file's format and the decision.
//! - [`cases`]: calls a policy must answer as written (`policy test --cases`).

#![forbid(unsafe_code)]
#![deny(missing_debug_implementations)]

pub mod cases;
pub mod command;
pub mod input;
pub mod path;
pub mod programs;
pub mod rules;
pub mod shell;
pub mod words;

pub use rules::{Answer, Asked, Decision, PolicyError, PolicyFile, Rule, Stop, Timeout};
