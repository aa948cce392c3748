//! The public AEP conformance fixtures and the properties of canonical JSON, capture gating and validation.
//!
//! One test binary gathers these modules (a binary per file linked the whole crate again each
//! time); run one module with `cargo test -p <crate> --test protocol <module>::`.

mod conformance_cloudevents;
mod conformance_redaction;
mod conformance_validate;
mod prop_canonical;
mod prop_gate;
mod prop_validate;
