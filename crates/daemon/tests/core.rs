//! The daemon's own life: hooks in, the spool, limits, faults, crashes, history and safety.
//!
//! One test binary gathers these modules (a binary per file linked the whole crate again each
//! time); run one module with `cargo test -p <crate> --test core <module>::`.

mod cline2_replay;
mod crash_campaign;
mod daemon_lifecycle;
mod guard_hook;
mod history;
mod hook_pipeline;
mod hub_stub;
mod hub_tap;
mod ingest_faults;
mod input_robustness;
mod limits;
mod policy_corpus;
mod safety;
mod spool_limit;
mod support;
