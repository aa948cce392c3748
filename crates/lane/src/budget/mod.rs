//! Budgets (`AEP_CLINE_BUDGET`, the policy file's `[[budget]]`): money limits on a run, a
//! session and a UTC day. [`account`] is the pure part (the limits, the ledger, the thresholds);
//! [`watch`] is the daemon's (where cost comes from, when to tell, the cancel through the hub);
//! [`notice`] is what a crossing is told with (the notice and its resolution, planned, pure);
//! [`kept`] keeps the day's spend in the state folder across restarts.

pub mod account;
pub mod doctor;
pub mod kept;
mod notice;
pub mod watch;

pub use account::{BudgetError, Budgets, VARIABLE};
pub use watch::Watch;
