//! Placeholder; the build → gate → validate → serialize benchmark lands with the gating work.
fn main() {}
