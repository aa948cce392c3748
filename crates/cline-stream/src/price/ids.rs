//! Model ids: a Cline provider's model id as the price table knows it.
//!
//! Two names are looked for. The litellm key under which that provider's own price is listed
//! ([`provider_keys`]: Bedrock's `us.anthropic.claude-…-v1:0` with its regional uplift, Vertex's
//! `vertex_ai/claude-…@date`, `gemini/gemini-2.5-pro`), and the vendor's canonical OpenRouter id
//! ([`openrouter_id`]: `anthropic/claude-sonnet-4.5`), which prices a model reached through a
//! gateway (OpenRouter, Cline's own provider) or a proxy at the vendor's list price.

/// Bedrock's cross-region inference profiles prefix the model id with a geography.
const BEDROCK_REGIONS: &[&str] = &["us.", "eu.", "apac.", "au.", "jp.", "ca.", "global.", "us-gov."];
/// OpenRouter's variants that are priced as the base model. `:free` is not among them: it is
/// free on OpenRouter only, so it stays unpriced rather than taking the base model's price.
const SAME_PRICE_VARIANTS: &[&str] = &[":thinking", ":beta", ":exacto"];

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// `id` less a Bedrock version suffix (`-v1:0`, `-v2`).
fn strip_bedrock_version(id: &str) -> &str {
    let Some(at) = id.rfind("-v") else { return id };
    let version = &id[at + 2..];
    let (major, minor) = version.split_once(':').unwrap_or((version, "0"));
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if all_digits(major) && all_digits(minor) {
        &id[..at]
    } else {
        id
    }
}

/// `id` less a date or `latest` suffix (`-20250929`, `@20250929`, `-2024-08-06`, `-latest`,
/// `@latest`), or `None` when it has none.
fn undated(id: &str) -> Option<&str> {
    if let Some(rest) = id.strip_suffix("-latest").or_else(|| id.strip_suffix("@latest")) {
        return Some(rest);
    }
    let (head, tail) = id.split_at_checked(id.len().checked_sub(9)?)?;
    if (tail.starts_with('-') || tail.starts_with('@')) && digits(&tail[1..], 8) {
        return Some(head);
    }
    let (head, tail) = id.split_at_checked(id.len().checked_sub(11)?)?;
    let b = tail.as_bytes();
    (b[0] == b'-'
        && b[5] == b'-'
        && b[8] == b'-'
        && digits(&tail[1..5], 4)
        && digits(&tail[6..8], 2)
        && digits(&tail[9..], 2))
    .then_some(head)
}

/// Anthropic's dashed versions dotted, as OpenRouter writes them: `claude-3-7-sonnet` →
/// `claude-3.7-sonnet`, `claude-sonnet-4-5` → `claude-sonnet-4.5`.
fn dotted_claude(id: &str) -> Option<String> {
    let rest = id.strip_prefix("claude-")?;
    let b = rest.as_bytes();
    if b.len() > 4 && b[0].is_ascii_digit() && b[1] == b'-' && b[2].is_ascii_digit() && b[3] == b'-' {
        return Some(format!("claude-{}.{}-{}", &rest[..1], &rest[2..3], &rest[4..]));
    }
    let (family, version) = rest.split_once('-')?;
    let v = version.as_bytes();
    (!family.is_empty()
        && family.bytes().all(|c| c.is_ascii_lowercase())
        && v.len() == 3
        && v[0].is_ascii_digit()
        && v[1] == b'-'
        && v[2].is_ascii_digit())
    .then(|| format!("claude-{family}-{}.{}", &version[..1], &version[2..]))
}

/// Whether a model id names a dated (or `-latest`) snapshot of a model: the undated alias is the
/// one a canonical id takes its price from.
pub(super) fn is_dated(model_id: &str) -> bool {
    undated(model_id).is_some()
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
        let base = SAME_PRICE_VARIANTS.iter().find_map(|v| id.strip_suffix(v));
        return Some(base.map_or(id.clone(), str::to_string));
    }
    let id = BEDROCK_REGIONS.iter().find_map(|r| id.strip_prefix(r)).unwrap_or(&id);
    let id = strip_bedrock_version(id);
    let (bedrock_vendor, id) = match id.split_once('.') {
        Some((vendor, rest)) if ["anthropic", "meta", "amazon", "mistral", "deepseek"].contains(&vendor) => {
            (Some(vendor), rest)
        }
        _ => (None, id),
    };
    let id = undated(id).unwrap_or(id);
    let id = dotted_claude(id).unwrap_or_else(|| id.to_string());
    let vendor = vendor_of_family(&id)
        .map(str::to_string)
        .or(bedrock_vendor
            .map(|v| if v == "mistral" { "mistralai" } else { v })
            .map(str::to_string))
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
    NAMESPACES
        .iter()
        .find(|n| n.providers.contains(&provider))
        .map(|n| (n.prefixes, n.owners))
}

/// Cline providers, the key prefixes of their models in litellm's list, and the litellm
/// providers those rows belong to. The owners named here are exactly `prices/providers.txt`,
/// the rows the bundled table keeps (a test checks it).
struct Namespace {
    providers: &'static [&'static str],
    prefixes: &'static [&'static str],
    owners: &'static [&'static str],
}

const NAMESPACES: &[Namespace] = &[
    Namespace {
        providers: &["anthropic", "claude-code"],
        prefixes: &[""],
        owners: &["anthropic"],
    },
    Namespace {
        providers: &["openai-native", "openai-codex", "openai-codex-cli"],
        prefixes: &[""],
        owners: &["openai", "text-completion-openai"],
    },
    Namespace {
        providers: &["bedrock"],
        prefixes: &["", "bedrock/"],
        owners: &["bedrock", "bedrock_converse"],
    },
    Namespace {
        providers: &["vertex"],
        prefixes: &["vertex_ai/", ""],
        owners: &[
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
    },
    Namespace {
        providers: &["gemini"],
        prefixes: &["gemini/"],
        owners: &["gemini"],
    },
    Namespace {
        providers: &["deepseek"],
        prefixes: &["deepseek/", ""],
        owners: &["deepseek"],
    },
    Namespace {
        providers: &["xai"],
        prefixes: &["xai/"],
        owners: &["xai"],
    },
    Namespace {
        providers: &["mistral"],
        prefixes: &["mistral/", "codestral/"],
        owners: &["mistral", "codestral"],
    },
    Namespace {
        providers: &["groq"],
        prefixes: &["groq/"],
        owners: &["groq"],
    },
    Namespace {
        providers: &["cerebras"],
        prefixes: &["cerebras/"],
        owners: &["cerebras"],
    },
    Namespace {
        providers: &["sambanova"],
        prefixes: &["sambanova/"],
        owners: &["sambanova"],
    },
    Namespace {
        providers: &["together"],
        prefixes: &["together_ai/"],
        owners: &["together_ai"],
    },
    Namespace {
        providers: &["fireworks"],
        prefixes: &["fireworks_ai/"],
        owners: &["fireworks_ai"],
    },
    Namespace {
        providers: &["nebius"],
        prefixes: &["nebius/"],
        owners: &["nebius"],
    },
    Namespace {
        providers: &["moonshot"],
        prefixes: &["moonshot/"],
        owners: &["moonshot"],
    },
    Namespace {
        providers: &["zai"],
        prefixes: &["zai/"],
        owners: &["zai"],
    },
    Namespace {
        providers: &["minimax"],
        prefixes: &["minimax/"],
        owners: &["minimax"],
    },
    Namespace {
        providers: &["qwen"],
        prefixes: &["dashscope/"],
        owners: &["dashscope"],
    },
    Namespace {
        providers: &["vercel-ai-gateway"],
        prefixes: &["vercel_ai_gateway/"],
        owners: &["vercel_ai_gateway"],
    },
    // A LiteLLM proxy's model names are litellm's own keys when the proxy keeps them.
    Namespace {
        providers: &["litellm"],
        prefixes: &[""],
        owners: &[],
    },
];

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
    fn the_mapping_names_exactly_the_providers_the_table_keeps() {
        let kept: std::collections::BTreeSet<&str> = include_str!("../../prices/providers.txt")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let mapped: std::collections::BTreeSet<&str> =
            NAMESPACES.iter().flat_map(|n| n.owners.iter().copied()).collect();
        assert_eq!(
            mapped, kept,
            "src/price/ids.rs and prices/providers.txt must name the same litellm providers"
        );
        let table = include_str!("../../prices/litellm.tsv");
        for row in table.lines().filter(|l| !l.starts_with('#')) {
            let provider = row.split('\t').nth(1).unwrap_or_default();
            assert!(
                kept.contains(provider),
                "the bundled table holds a row of {provider:?}, which providers.txt does not keep"
            );
        }
    }

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
    fn dates_versions_and_claude_versions_are_read_exactly() {
        assert_eq!(undated("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(undated("claude-sonnet-4-5@20250929"), Some("claude-sonnet-4-5"));
        assert_eq!(undated("claude-3-5-haiku-latest"), Some("claude-3-5-haiku"));
        assert_eq!(undated("gpt-5"), None);
        assert_eq!(undated("o3-1234567"), None);
        assert_eq!(undated("model-2024-8-06"), None);
        assert_eq!(
            strip_bedrock_version("claude-3-haiku-20240307-v1:0"),
            "claude-3-haiku-20240307"
        );
        assert_eq!(strip_bedrock_version("claude-opus-4-6-v1"), "claude-opus-4-6");
        assert_eq!(strip_bedrock_version("nova-pro-v1x"), "nova-pro-v1x");
        assert_eq!(dotted_claude("claude-3-7-sonnet").as_deref(), Some("claude-3.7-sonnet"));
        assert_eq!(dotted_claude("claude-haiku-4-5").as_deref(), Some("claude-haiku-4.5"));
        assert_eq!(dotted_claude("claude-sonnet-4").as_deref(), None);
        assert_eq!(dotted_claude("claude-opus-4-10"), None);
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
