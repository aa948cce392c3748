//! The redaction pipeline (AEP-0003 §9.4) for text and JSON values.
//!
//! Skeleton: filled in by the redaction work (see the foundation issue).
