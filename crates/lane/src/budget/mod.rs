//! Budgets (`AEP_CLINE_BUDGET`, the policy file's `[[budget]]`): money limits on a run, a
//! session and a UTC day. [`account`] is the pure part (the limits, the ledger, the thresholds);
//! [`watch`] is the daemon's (where cost comes from, the notices, the cancel through the hub);
//! [`kept`] keeps the day's spend in the state folder across restarts.

pub mod account;
pub mod doctor;
pub mod kept;
pub mod watch;

pub use account::{BudgetError, Budgets, VARIABLE};
pub use watch::Watch;
