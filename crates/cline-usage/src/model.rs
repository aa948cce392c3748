//! The public model: one model call, one session.

use crate::problem::Problem;
use cline_stream::{ClineUsage, TokenClasses};
use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Cline's four counts for one model call (`metrics`), or a sum of calls. `input` includes the
/// cache reads, as everywhere in Cline; [`Tokens::classes`] splits them by the one rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    /// The billing classes (`cline_stream::TokenClasses::from_cline`: uncached input =
    /// input − cache reads + cache writes, cached = cache reads). Summing counts and then
    /// classifying equals classifying each call and summing, for every call whose counts are
    /// consistent (cache reads ≤ input).
    pub fn classes(&self) -> TokenClasses {
        TokenClasses::from_cline(&self.as_cline())
    }

    /// As Cline's usage record (for the price lookup).
    pub fn as_cline(&self) -> ClineUsage {
        ClineUsage {
            input_tokens: Some(self.input),
            output_tokens: Some(self.output),
            cache_read_tokens: Some(self.cache_read),
            cache_write_tokens: Some(self.cache_write),
            total_cost: None,
        }
    }

    /// Every token once: input (cache reads included) + cache writes + output.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.cache_write).saturating_add(self.output)
    }

    /// The largest of the four counts.
    pub fn largest(&self) -> u64 {
        self.input.max(self.output).max(self.cache_read).max(self.cache_write)
    }

    pub fn is_zero(&self) -> bool {
        *self == Tokens::default()
    }
}

/// Saturating: a sum never wraps around to a small, plausible-looking number (the readers
/// refuse any call past `MAX_CALL_TOKENS`, so a real history never gets near the bound).
impl AddAssign for Tokens {
    fn add_assign(&mut self, o: Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.output = self.output.saturating_add(o.output);
        self.cache_read = self.cache_read.saturating_add(o.cache_read);
        self.cache_write = self.cache_write.saturating_add(o.cache_write);
    }
}

/// Which agent of a session made a call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub enum Agent {
    /// The session's own (root) agent: `<id>.messages.json`.
    Lead,
    /// A subagent the session spawned (`spawn_agent`): `agent_<id>.messages.json`; its agent id.
    Subagent(String),
}

/// One model call, from one assistant message's `metrics` and `modelInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCall {
    /// The message's `ts`, epoch milliseconds.
    pub time_ms: Option<i64>,
    /// The session id of the agent that made it: the root session's, or a subagent's own
    /// (`<root>__<agent id>`, as Cline names it).
    pub session: String,
    /// The root session, for a subagent's call.
    pub parent: Option<String>,
    pub agent: Agent,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tokens: Tokens,
}

/// One root session and everything its agents did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Session {
    pub id: String,
    /// `workspace_root` (else `cwd`).
    pub workspace: Option<String>,
    pub status: Option<String>,
    /// Cline is still running it: no end recorded and its process is alive.
    pub running: bool,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    /// The app on Cline's SDK that ran it (the session file's `source`: `cli`, ...).
    pub app: Option<String>,
    /// The session's configured provider and model (each call also names its own).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Every model call, the lead's first, then each subagent's, each in file order.
    pub calls: Vec<ModelCall>,
    /// The subagents found (agent ids), in name order.
    pub subagents: Vec<String>,
    /// What Cline itself recorded the session cost, USD (2.x `taskHistory.json` `totalCost`):
    /// shown beside the report's own price, never added to it (with the OpenAI-compatible
    /// provider it bills the cached tokens twice).
    pub cline_cost: Option<f64>,
    /// Files that could not be used; their calls are left out.
    #[serde(skip)]
    pub problems: Vec<Problem>,
}

impl Session {
    /// The sum of the calls `keep` selects.
    pub fn tokens_where(&self, mut keep: impl FnMut(&ModelCall) -> bool) -> Tokens {
        let mut t = Tokens::default();
        for c in self.calls.iter().filter(|c| keep(c)) {
            t += c.tokens;
        }
        t
    }

    /// All calls, subagents included.
    pub fn tokens(&self) -> Tokens {
        self.tokens_where(|_| true)
    }
}
