//! Model ids: a Cline provider's model id as the price table knows it.
//!
//! Two names are looked for. The litellm key under which that provider's own price is listed
//! ([`provider_keys`]: Bedrock's `us.anthropic.claude-…-v1:0` with its regional uplift, Vertex's
//! `vertex_ai/claude-…@date`, `gemini/gemini-2.5-pro`), and the vendor's canonical OpenRouter id
//! ([`openrouter_id`]: `anthropic/claude-sonnet-4.5`), which prices a model reached through a
//! gateway (OpenRouter, Cline's own provider) or a proxy at the vendor's list price.

use regex::Regex;
use std::sync::LazyLock;

static BEDROCK_REGION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:us|eu|apac|au|jp|ca|global|us-gov)\.").expect("static regex"));
static BEDROCK_VERSION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"-v\d+(?::\d+)?$").expect("static regex"));
static DATE_SUFFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2}|-latest|@latest)$").expect("static regex"));
/// `claude-3-7-sonnet` → `claude-3.7-sonnet`; `claude-sonnet-4-5` → `claude-sonnet-4.5`.
static CLAUDE_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^claude-(?:(\d)-(\d)-(.+)|([a-z]+)-(\d)-(\d))$").expect("static regex"));
/// OpenRouter's variants that are priced as the base model (`:thinking`, `:beta`, `:exacto`).
/// `:free` is not among them: it is free on OpenRouter only, so it stays unpriced rather than
/// taking the base model's price.
static SAME_PRICE_VARIANT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r":(?:thinking|beta|exacto)$").expect("static regex"));

/// Whether a model id names a dated (or `-latest`) snapshot of a model: the undated alias is the
/// one a canonical id takes its price from.
pub(super) fn is_dated(model_id: &str) -> bool {
    DATE_SUFFIX.is_match(model_id)
}

/// The OpenRouter id of a provider's model id, or `None` when the vendor cannot be told.
///
/// An id that already has a vendor (`anthropic/claude-sonnet-4.5` from the `openrouter` or
/// `cline` providers) is used as is, less a variant OpenRouter prices as the base model
/// (`:thinking`). Otherwise the id is cleaned of Bedrock region/vendor prefixes and version
/// suffixes, Vertex `@date` and dated snapshots, Anthropic's dashed versions become dotted, and
/// the vendor is inferred from the model family (then from the provider name).
pub fn openrouter_id(provider: Option<&str>, model_id: &str) -> Option<String> {
    let id = model_id.trim().to_ascii_lowercase();
    if id.contains('/') {
        return Some(SAME_PRICE_VARIANT.replace(&id, "").into_owned());
    }
    let id = BEDROCK_REGION.replace(&id, "");
    let id = BEDROCK_VERSION.replace(&id, "");
    let (bedrock_vendor, id) = match id.split_once('.') {
        Some((vendor, rest)) if ["anthropic", "meta", "amazon", "mistral", "deepseek"].contains(&vendor) => {
            (Some(vendor.to_string()), rest.to_string())
        }
        _ => (None, id.to_string()),
    };
    let id = DATE_SUFFIX.replace(&id, "").into_owned();
    let id = match CLAUDE_VERSION.captures(&id) {
        Some(c) if c.get(1).is_some() => format!("claude-{}.{}-{}", &c[1], &c[2], &c[3]),
        Some(c) => format!("claude-{}-{}.{}", &c[4], &c[5], &c[6]),
        None => id,
    };
    let vendor = vendor_of_family(&id)
        .map(str::to_string)
        .or(bedrock_vendor.map(|v| if v == "mistral" { "mistralai".to_string() } else { v }))
        .or_else(|| provider.and_then(vendor_of_provider).map(str::to_string))?;
    Some(format!("{vendor}/{id}"))
}

fn vendor_of_family(id: &str) -> Option<&'static str> {
    const FAMILIES: &[(&str, &str)] = &[
        ("claude-", "anthropic"),
        ("gpt-", "openai"),
        ("chatgpt-", "openai"),
        ("o1", "openai"),
        ("o3", "openai"),
        ("o4", "openai"),
        ("codex-", "openai"),
        ("gemini-", "google"),
        ("gemma-", "google"),
        ("grok-", "x-ai"),
        ("deepseek-", "deepseek"),
        ("mistral-", "mistralai"),
        ("codestral", "mistralai"),
        ("devstral", "mistralai"),
        ("kimi-", "moonshotai"),
        ("qwen", "qwen"),
        ("glm-", "z-ai"),
        ("minimax-", "minimax"),
    ];
    FAMILIES
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, v)| *v)
}

fn vendor_of_provider(provider: &str) -> Option<&'static str> {
    Some(match provider {
        "anthropic" | "claude-code" => "anthropic",
        "openai" | "openai-native" | "openai-codex" | "openai-codex-cli" => "openai",
        "gemini" | "google" => "google",
        "xai" | "x-ai" => "x-ai",
        "deepseek" => "deepseek",
        "mistral" => "mistralai",
        "moonshot" => "moonshotai",
        "qwen" | "qwen-code" => "qwen",
        "zai" | "z-ai" => "z-ai",
        "minimax" => "minimax",
        _ => return None,
    })
}

/// Where a Cline provider's own prices are in litellm's list: the key prefixes its models are
/// listed under (`""` for a bare key) and the litellm providers those rows must belong to, so
/// that a bare `gpt-oss-120b` on Groq is never priced as OpenAI's. Providers that route to many
/// vendors under the vendors' ids (`openrouter`, `cline`, `requesty`), proxies whose endpoint
/// cannot be told (`openai-compatible`, `openai` in Cline 2.x) and local models (`ollama`,
/// `lmstudio`) have none: they are priced by [`openrouter_id`].
fn litellm_namespace(provider: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match provider {
        "anthropic" | "claude-code" => (&[""], &["anthropic"]),
        "openai-native" | "openai-codex" | "openai-codex-cli" => (&[""], &["openai", "text-completion-openai"]),
        "bedrock" => (&["", "bedrock/"], &["bedrock", "bedrock_converse"]),
        "vertex" => (
            &["vertex_ai/", ""],
            &[
                "vertex_ai",
                "vertex_ai-language-models",
                "vertex_ai-anthropic_models",
                "vertex_ai-mistral_models",
                "vertex_ai-deepseek_models",
                "vertex_ai-llama_models",
                "vertex_ai-openai_models",
                "vertex_ai-qwen_models",
                "vertex_ai-zai_models",
                "vertex_ai-moonshot_models",
                "vertex_ai-minimax_models",
            ],
        ),
        "gemini" => (&["gemini/"], &["gemini"]),
        "deepseek" => (&["deepseek/", ""], &["deepseek"]),
        "xai" => (&["xai/"], &["xai"]),
        "mistral" => (&["mistral/", "codestral/"], &["mistral", "codestral"]),
        "groq" => (&["groq/"], &["groq"]),
        "cerebras" => (&["cerebras/"], &["cerebras"]),
        "sambanova" => (&["sambanova/"], &["sambanova"]),
        "together" => (&["together_ai/"], &["together_ai"]),
        "fireworks" => (&["fireworks_ai/"], &["fireworks_ai"]),
        "nebius" => (&["nebius/"], &["nebius"]),
        "moonshot" => (&["moonshot/"], &["moonshot"]),
        "zai" => (&["zai/"], &["zai"]),
        "minimax" => (&["minimax/"], &["minimax"]),
        "qwen" => (&["dashscope/"], &["dashscope"]),
        "vercel-ai-gateway" => (&["vercel_ai_gateway/"], &["vercel_ai_gateway"]),
        // A LiteLLM proxy's model names are litellm's own keys when the proxy keeps them.
        "litellm" => (&[""], &[]),
        _ => return None,
    })
}

/// The litellm keys (lowercase) a provider's model may be listed under, in order, each with
/// the litellm providers its row must belong to (empty: any).
pub(super) fn provider_keys(provider: Option<&str>, model_id: &str) -> Vec<(String, &'static [&'static str])> {
    let Some((prefixes, owners)) = provider.and_then(litellm_namespace) else {
        return Vec::new();
    };
    let model = model_id.trim().to_ascii_lowercase();
    let model = model.strip_prefix("models/").unwrap_or(&model); // Gemini's REST form
    let mut keys: Vec<(String, &'static [&'static str])> = Vec::with_capacity(prefixes.len());
    for prefix in prefixes {
        // The id may already carry the prefix (`gemini/gemini-2.5-pro`).
        let key = if model.starts_with(prefix) {
            model.to_string()
        } else {
            format!("{prefix}{model}")
        };
        if !keys.iter().any(|(k, _)| *k == key) {
            keys.push((key, owners));
        }
    }
    keys
}

/// The canonical vendor (OpenRouter's name for it) of a litellm provider that is the vendor's
/// own API, with the prefix its keys carry.
pub(super) fn vendor_api(litellm_provider: &str) -> Option<(&'static str, &'static str)> {
    Some(match litellm_provider {
        "anthropic" => ("anthropic", ""),
        "openai" => ("openai", ""),
        "gemini" => ("google", "gemini/"),
        "xai" => ("x-ai", "xai/"),
        "deepseek" => ("deepseek", "deepseek/"),
        "mistral" => ("mistralai", "mistral/"),
        "codestral" => ("mistralai", "codestral/"),
        "moonshot" => ("moonshotai", "moonshot/"),
        "zai" => ("z-ai", "zai/"),
        "minimax" => ("minimax", "minimax/"),
        "dashscope" => ("qwen", "dashscope/"),
        _ => return None,
    })
}

/// The Cline provider name whose vendor is `vendor` (for [`openrouter_id`]'s last resort).
pub(super) fn provider_of_vendor(vendor: &str) -> &'static str {
    match vendor {
        "anthropic" => "anthropic",
        "openai" => "openai-native",
        "google" => "gemini",
        "x-ai" => "xai",
        "deepseek" => "deepseek",
        "mistralai" => "mistral",
        "moonshotai" => "moonshot",
        "z-ai" => "zai",
        "minimax" => "minimax",
        "qwen" => "qwen",
        _ => "",
    }
}

/// OpenRouter's vendor name for a vendor in the Vercel AI Gateway's ids.
pub(super) fn openrouter_vendor(gateway_vendor: &str) -> &str {
    match gateway_vendor {
        "xai" => "x-ai",
        "mistral" => "mistralai",
        "zai" => "z-ai",
        "alibaba" => "qwen",
        "meta" => "meta-llama",
        "amazon" => "amazon",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_map_to_openrouter_ids() {
        for (provider, id, want) in [
            ("anthropic", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4.5"),
            ("anthropic", "claude-sonnet-4-20250514", "anthropic/claude-sonnet-4"),
            ("anthropic", "claude-opus-4-1-20250805", "anthropic/claude-opus-4.1"),
            ("anthropic", "claude-3-7-sonnet-20250219", "anthropic/claude-3.7-sonnet"),
            ("anthropic", "claude-3-5-haiku-latest", "anthropic/claude-3.5-haiku"),
            (
                "bedrock",
                "us.anthropic.claude-sonnet-4-20250514-v1:0",
                "anthropic/claude-sonnet-4",
            ),
            (
                "bedrock",
                "anthropic.claude-3-7-sonnet-20250219-v1:0",
                "anthropic/claude-3.7-sonnet",
            ),
            ("vertex", "claude-sonnet-4-5@20250929", "anthropic/claude-sonnet-4.5"),
            ("openai-native", "gpt-4o-2024-08-06", "openai/gpt-4o"),
            ("openai", "gpt-5", "openai/gpt-5"),
            ("gemini", "gemini-2.5-pro", "google/gemini-2.5-pro"),
            ("xai", "grok-code-fast-1", "x-ai/grok-code-fast-1"),
            (
                "openrouter",
                "anthropic/claude-sonnet-4.5",
                "anthropic/claude-sonnet-4.5",
            ),
            (
                "openrouter",
                "anthropic/claude-3.7-sonnet:thinking",
                "anthropic/claude-3.7-sonnet",
            ),
            ("openrouter", "qwen/qwen3-coder:free", "qwen/qwen3-coder:free"),
            ("cline", "x-ai/grok-code-fast-1", "x-ai/grok-code-fast-1"),
            ("openai-compatible", "gpt-4.1-mini", "openai/gpt-4.1-mini"),
            ("deepseek", "chat-model", "deepseek/chat-model"),
            ("minimax", "MiniMax-M2", "minimax/minimax-m2"),
        ] {
            assert_eq!(
                openrouter_id(Some(provider), id).as_deref(),
                Some(want),
                "{provider} {id}"
            );
        }
        assert_eq!(openrouter_id(Some("openai-compatible"), "fake-model"), None);
        assert_eq!(openrouter_id(None, "fake-model"), None);
    }

    #[test]
    fn provider_keys_follow_litellm_prefixes() {
        let keys =
            |p: &str, m: &str| -> Vec<String> { provider_keys(Some(p), m).into_iter().map(|(k, _)| k).collect() };
        assert_eq!(keys("gemini", "gemini-2.5-pro"), ["gemini/gemini-2.5-pro"]);
        assert_eq!(keys("gemini", "models/gemini-2.5-pro"), ["gemini/gemini-2.5-pro"]);
        assert_eq!(keys("gemini", "gemini/gemini-2.5-pro"), ["gemini/gemini-2.5-pro"]);
        assert_eq!(
            keys("vertex", "claude-sonnet-4-5@20250929"),
            ["vertex_ai/claude-sonnet-4-5@20250929", "claude-sonnet-4-5@20250929"]
        );
        assert_eq!(
            keys("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            [
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
            ]
        );
        assert_eq!(
            keys("deepseek", "deepseek-chat"),
            ["deepseek/deepseek-chat", "deepseek-chat"]
        );
        assert_eq!(keys("anthropic", "Claude-Sonnet-4-5"), ["claude-sonnet-4-5"]);
        assert!(keys("openrouter", "anthropic/claude-sonnet-4.5").is_empty());
        assert!(keys("openai-compatible", "gpt-4o").is_empty());
        assert!(provider_keys(None, "gpt-4o").is_empty());
    }
}
