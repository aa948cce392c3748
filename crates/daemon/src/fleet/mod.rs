//! The fleet console's side (`aep-cline fleet`, docs/fleet.md): every machine's Events, read
//! back from the JetStream stream the daemons publish to, folded into one read model
//! ([`view`]) with the machine records of the key-value bucket ([`health`]), its spend
//! ([`spend`]); filled from the server by [`catch_up`], and commands sent to the owning
//! machine's control subject by [`command`]; `fleet serve` keeps it current
//! ([`follow`]), checkpoints it so a start need not replay the stream ([`checkpoint`]) and
//! serves it as a page ([`serve`]). Sessions are summed up by the same fold as on one
//! machine ([`crate::views::summary`]), so both tell the same story.

pub mod catch_up;
pub mod checkpoint;
pub mod command;
pub mod detail;
pub mod effect;
pub mod follow;
pub mod health;
pub mod metrics;
pub mod position;
pub mod serve;
pub mod spend;
pub mod view;

pub use view::View;
