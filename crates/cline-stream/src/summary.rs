//! The run summary: what `--json-summary` prints and `--summary` renders as a table.

use crate::price::Cost;
use crate::usage::TokenClasses;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a run did and cost. Every field is always present; unknown is `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The first `sessionId`/`session_id`/`id` seen; Cline 3.0.65 writes none.
    pub session: Option<String>,
    /// `run_result.model`.
    pub model: Option<ModelSummary>,
    /// `run_result.finishReason` (`completed`, `aborted`, ...).
    pub finish_reason: Option<String>,
    /// From `run_aborted`.
    pub aborted: Option<Abort>,
    pub iterations: Option<u64>,
    pub duration_ms: Option<u64>,
    /// `run_result.text`: the agent's final answer.
    pub text: Option<String>,
    /// Normalized events written, by `type`.
    pub events: BTreeMap<String, u64>,
    pub lines: Lines,
    /// The lead's usage totals (the last record carrying them) plus every subagent's own, as
    /// token classes.
    pub tokens: Option<TokenClasses>,
    /// How subagents were counted, and their share of `tokens`; `null` when none ran.
    pub subagents: Option<SubagentSummary>,
    /// `null` when no price is known; `cost_note` says why.
    pub cost: Option<Cost>,
    pub cost_note: Option<String>,
}

/// The model a run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelSummary {
    pub id: Option<String>,
    pub provider: Option<String>,
    /// The id prices were looked up under.
    pub openrouter_id: Option<String>,
}

/// The subagents' share of a run's tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubagentSummary {
    pub count: u64,
    pub tokens: TokenClasses,
    /// How they were counted.
    pub counted: &'static str,
}

/// A `run_aborted` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Abort {
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// Line accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Lines {
    /// Lines read, blank ones included.
    pub total: u64,
    /// Lines that were records.
    pub records: u64,
    /// Lines skipped as malformed (each reported with its number).
    pub malformed: u64,
}
