//! The attr-match filter dialect (AEP-0003 §6).
//!
//! Skeleton: filled in by the filter work (see the foundation issue).
