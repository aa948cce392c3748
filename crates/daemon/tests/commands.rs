//! The user commands, each run as the real binary.
//!
//! One test binary gathers these modules (a binary per file linked the whole crate again each
//! time); run one module with `cargo test -p <crate> --test commands <module>::`.

mod cli_tail_validate;
mod doctor;
mod install_hooks;
mod package;
mod people_cli;
mod service;
mod sessions_index;
mod stream_cli;
mod support;
mod usage_cli;
mod usage_tasks_cli;
