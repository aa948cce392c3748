//! Capture gating (AEP-0002 §5.1) and down-leveling at a hop (AEP-0001 §8.2), driven by the
//! `x-aep-capture` annotations generated from the vendored schemas.
//!
//! Skeleton: filled in by the capture work (see the foundation issue).
