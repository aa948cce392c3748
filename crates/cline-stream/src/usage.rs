//! Token usage: Cline's cumulative totals and the billing classes derived from them.
//!
//! Cline's `inputTokens` already includes the cache reads (`cacheReadTokens`), and cache writes
//! (`cacheWriteTokens`) are billed as input but are not inside `inputTokens`. So:
//!
//! | class            | value                                             |
//! |------------------|---------------------------------------------------|
//! | `uncached_input` | `inputTokens − cacheReadTokens + cacheWriteTokens` |
//! | `cached_input`   | `cacheReadTokens`                                 |
//! | `cache_creation` | `cacheWriteTokens` (reported; already in uncached) |
//! | `output`         | `outputTokens`                                    |
//! | `reasoning`      | `null`: Cline does not report it (never 0)         |
//!
//! Reading `inputTokens` as uncached and the cache reads again as cached would bill every
//! cached read twice; [`TokenClasses`] can only be built by [`TokenClasses::from_cline`], so
//! that mistake cannot be made elsewhere.

use serde::{Deserialize, Serialize};

/// Cline's cumulative usage totals (`run_result.usage`, `aggregateUsage`, `done.usage`). Every
/// number is a running total for the session, so the last record carrying usage wins (Last
/// aggregation); summing records would count every earlier iteration again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClineUsage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_tokens: Option<u64>,
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
    /// Cline's own cost figure: 0 unless the run went through Cline's own provider.
    #[serde(default)]
    pub total_cost: Option<f64>,
}

/// The token classes of one run, in the names every cost calculation uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenClasses {
    uncached_input: Option<u64>,
    cached_input: u64,
    cache_creation: u64,
    output: u64,
    /// Always `null`: Cline does not report reasoning tokens, and 0 would be a false claim.
    reasoning: Option<u64>,
    /// Always `true`: Cline's `inputTokens` counts the cache reads (see the module docs).
    input_includes_cache: bool,
}

impl TokenClasses {
    /// The classes of Cline's totals. An absent count is 0 (Cline omits zero cache counts on
    /// some records). When the cache reads exceed `inputTokens` the totals contradict the
    /// "input includes cache" rule and `uncached_input` is `None` (not determinable).
    pub fn from_cline(usage: &ClineUsage) -> Self {
        let input = usage.input_tokens.unwrap_or(0);
        let cache_read = usage.cache_read_tokens.unwrap_or(0);
        let cache_write = usage.cache_write_tokens.unwrap_or(0);
        TokenClasses {
            uncached_input: input
                .checked_sub(cache_read)
                .and_then(|fresh| fresh.checked_add(cache_write)),
            cached_input: cache_read,
            cache_creation: cache_write,
            output: usage.output_tokens.unwrap_or(0),
            reasoning: None,
            input_includes_cache: true,
        }
    }

    /// Input tokens billed at the input (or cache-write) price, cache writes included.
    pub fn uncached_input(&self) -> Option<u64> {
        self.uncached_input
    }

    /// Input tokens read from the prompt cache.
    pub fn cached_input(&self) -> u64 {
        self.cached_input
    }

    /// Input tokens written to the prompt cache; already counted in [`Self::uncached_input`].
    pub fn cache_creation(&self) -> u64 {
        self.cache_creation
    }

    pub fn output(&self) -> u64 {
        self.output
    }

    /// Never reported by Cline.
    pub fn reasoning(&self) -> Option<u64> {
        self.reasoning
    }

    /// All input tokens, each counted once: uncached plus cached.
    pub fn total_input(&self) -> Option<u64> {
        self.uncached_input.map(|u| u.saturating_add(self.cached_input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> ClineUsage {
        ClineUsage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cache_read_tokens: Some(read),
            cache_write_tokens: Some(write),
            total_cost: Some(0.0),
        }
    }

    #[test]
    fn the_real_run_result_splits_into_classes() {
        // json-stream.jsonl's run_result: inputTokens 246, cacheReadTokens 200.
        let c = TokenClasses::from_cline(&usage(246, 90, 200, 0));
        assert_eq!(c.uncached_input(), Some(46));
        assert_eq!(c.cached_input(), 200);
        assert_eq!(c.cache_creation(), 0);
        assert_eq!(c.output(), 90);
        assert_eq!(c.reasoning(), None);
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["reasoning"], serde_json::Value::Null);
        assert_eq!(json["input_includes_cache"], true);
    }

    #[test]
    fn cache_writes_are_billed_as_uncached_input() {
        let c = TokenClasses::from_cline(&usage(1000, 10, 300, 50));
        assert_eq!(c.uncached_input(), Some(750));
        assert_eq!(c.cache_creation(), 50);
    }

    #[test]
    fn contradictory_totals_are_not_determinable_rather_than_wrapped() {
        let c = TokenClasses::from_cline(&usage(10, 1, 50, 0));
        assert_eq!(c.uncached_input(), None);
        assert_eq!(c.total_input(), None);
    }

    #[test]
    fn absent_counts_are_zero() {
        let c = TokenClasses::from_cline(&ClineUsage {
            input_tokens: Some(5),
            ..ClineUsage::default()
        });
        assert_eq!((c.uncached_input(), c.cached_input(), c.output()), (Some(5), 0, 0));
    }

    proptest! {
        /// Double counting is impossible: every cached read is counted exactly once, so the
        /// classes add up to Cline's input plus the cache writes, never to input + cache reads.
        #[test]
        fn cache_reads_are_counted_exactly_once(
            read in 0u64..1_000_000_000,
            fresh in 0u64..1_000_000_000,
            write in 0u64..1_000_000_000,
            out in 0u64..1_000_000_000,
        ) {
            let input = read + fresh;
            let c = TokenClasses::from_cline(&usage(input, out, read, write));
            prop_assert_eq!(c.total_input(), Some(input + write));
            prop_assert_eq!(c.uncached_input().unwrap() + c.cached_input(), input + write);
            if read > 0 {
                prop_assert!(c.total_input().unwrap() < input + read + write);
            }
        }
    }
}
