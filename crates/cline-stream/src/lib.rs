//! The normalizer for `cline --json` output: harness events, token usage and cost.
//!
//! Skeleton until the stream normalizer lands.
