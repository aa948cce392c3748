//! What people see and do: sessions summed up ([`summary`]), a session's timeline
//! ([`timeline`]), read from the logs ([`logs`]) or kept live in the daemon ([`index`]), and
//! the owner's local view joined in ([`local`]); the commands a person sends are
//! [`crate::person`]'s. The
//! terminal commands (`aep-cline sessions`, `show`, `approvals`, `approve`, ...) and the
//! dashboard share all of it, so both tell the same story.

pub mod index;
pub mod local;
pub mod logs;
pub mod logs_index;
pub mod numbers;
pub mod summary;
pub mod timeline;

pub use summary::{Pending, State, Summary};
