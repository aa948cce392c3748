//! What the four counts of a 2.x / extension request mean, per provider.
//!
//! The extension core (CLI 2.x, the VS Code extension; core 3.82) records per request
//! `tokensIn`, `tokensOut`, `cacheReads`, `cacheWrites`: the sums of its provider handler's usage
//! chunks. What `tokensIn` holds depends on the handler (`src/core/api/providers/*.ts` at
//! v3.82.0), so the counts are mapped per provider onto [`Tokens`], whose `input` counts the
//! cache reads and not the cache writes, as Cline 3.x records it (uncached input = input − cache
//! reads + cache writes):
//!
//! - [`TokensIn::Excludes`]: `tokensIn` holds neither the reads nor the writes (Anthropic's
//!   `input_tokens`, AWS's, or the handler subtracts them). input = tokensIn + reads.
//! - [`TokensIn::Includes`]: `tokensIn` is the OpenAI-style `prompt_tokens`, reads and writes
//!   inside it; `cacheWrites` is then often `prompt_cache_miss_tokens` (DeepSeek-style: the
//!   uncached part, not an extra charge). input = tokensIn − writes. A real 2.18 run with the
//!   OpenAI-compatible provider: 1000 in / 800 read / 200 write → 200 uncached, 800 cached, not
//!   Cline's own 1000 + 200 (its `totalCost` bills the cached tokens twice).
//!
//! When counts contradict their rule (an "includes" request whose reads and writes exceed
//! `tokensIn`) they cannot include them, and are read as "excludes".

use crate::model::Tokens;

/// Whether a provider's `tokensIn` already counts the cache reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokensIn {
    Excludes,
    Includes,
}

/// The rule of a 2.x provider id (`apiProvider`). Unknown providers (and none) are taken as
/// OpenAI-compatible, like most of the handlers: [`TokensIn::Includes`], checked by the counts.
pub fn rule(provider: Option<&str>) -> TokensIn {
    match provider.unwrap_or("") {
        // input_tokens (Anthropic API, AWS Converse, MiniMax's Anthropic API).
        "anthropic" | "vertex" | "bedrock" | "minimax" => TokensIn::Excludes,
        // Claude Code's stream reports Anthropic's usage; Cline's handler says its input_tokens
        // include the cache (a comment in claude-code.ts), which the API's do not.
        "claude-code" => TokensIn::Excludes,
        // The handler subtracts the cached (and cache-write) tokens from prompt_tokens.
        "openrouter" | "cline" | "vercel-ai-gateway" | "deepseek" | "openai-native" | "groq" | "gemini"
        | "moonshot" => TokensIn::Excludes,
        // prompt_tokens as the API reports it: openai (OpenAI-compatible), xai, fireworks, qwen,
        // doubao, zai, litellm, requesty, openai-codex, hicap, oca, lmstudio, together, nebius,
        // sambanova, cerebras, baseten, huggingface, mistral, ollama, ...
        _ => TokensIn::Includes,
    }
}

/// One request's counts as [`Tokens`], by its provider's rule.
pub fn tokens(provider: Option<&str>, tokens_in: u64, tokens_out: u64, reads: u64, writes: u64) -> Tokens {
    let includes = rule(provider) == TokensIn::Includes && reads.saturating_add(writes) <= tokens_in;
    Tokens {
        input: if includes {
            tokens_in - writes
        } else {
            tokens_in.saturating_add(reads)
        },
        output: tokens_out,
        cache_read: reads,
        cache_write: writes,
    }
}

/// The 3.x name of a 2.x provider id, where they differ: 2.x's `openai` is the
/// OpenAI-compatible provider (3.x `openai-compatible`; OpenAI itself is `openai-native` in both).
pub fn provider_name(provider: &str) -> &str {
    match provider {
        "openai" => "openai-compatible",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_compatible_counts_the_cache_inside_tokens_in() {
        // The real 2.18 request: prompt_tokens 1000, cached 800, prompt_cache_miss_tokens 200.
        let t = tokens(Some("openai"), 1000, 50, 800, 200);
        let c = t.classes();
        assert_eq!((c.uncached_input(), c.cached_input(), c.output()), (Some(200), 800, 50));
        assert_eq!(t.total(), 1050, "every token once");
    }

    #[test]
    fn anthropic_counts_the_cache_beside_tokens_in() {
        // input_tokens 100 (uncached), cache reads 800, cache writes 200.
        let t = tokens(Some("anthropic"), 100, 50, 800, 200);
        let c = t.classes();
        assert_eq!(
            (c.uncached_input(), c.cached_input(), c.cache_creation()),
            (Some(300), 800, 200)
        );
        assert_eq!(t.total(), 1150);
        for p in [
            "bedrock",
            "vertex",
            "openrouter",
            "cline",
            "deepseek",
            "openai-native",
            "gemini",
        ] {
            assert_eq!(tokens(Some(p), 100, 50, 800, 200), t, "{p}");
        }
    }

    #[test]
    fn counts_that_cannot_include_the_cache_are_read_as_excluding_it() {
        // An unknown provider whose reads exceed tokensIn: tokensIn did not include them.
        let t = tokens(Some("somewhere-new"), 100, 5, 800, 0);
        assert_eq!(t.classes().uncached_input(), Some(100));
        assert_eq!(tokens(None, 1000, 5, 800, 0).classes().uncached_input(), Some(200));
    }

    #[test]
    fn openai_is_the_openai_compatible_provider() {
        assert_eq!(provider_name("openai"), "openai-compatible");
        assert_eq!(provider_name("openai-native"), "openai-native");
    }
}
