//! Approvals answered by policy (`AEP_CLINE_POLICY`): an operator's rules, in order, answer
//! what Cline asks on the hub (approve, deny, or ask a person), each decision naming its rule.
//!
//! - [`rules`]: the file's format and the pure decision, in the `cline-policy` crate (commands
//!   read with bash's grammar, paths placed against the workspace).
//! - [`file`]: the file on disk, read at start and again when it changes; the last good
//!   policy stays active when a new version cannot be used.
//! - [`links`]: a tool's paths with their symbolic links followed, before the decision.
//!
//! The hub tap asks the policy when an approval is requested and submits its answer through
//! the command intake, as a person's (`hub::tap`).

pub mod doctor;
pub mod file;
pub mod links;

pub use cline_policy::rules;
pub use file::{Active, Status};
pub use rules::{Answer, Asked, Decision, PolicyFile};
