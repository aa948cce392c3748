//! Cost: Cline reports none of its own off its own provider (`totalCost` is 0), so it is derived
//! from OpenRouter's per-token prices for the run's model.
//!
//! Prices come from a bundled, dated snapshot of OpenRouter list prices for the models Cline
//! users commonly run ([`SNAPSHOT_DATE`]), overlaid by `--prices FILE`: OpenRouter's models JSON
//! exactly as `GET https://openrouter.ai/api/v1/models` returns it. A provider's own model id
//! (`claude-sonnet-4-5-20250929` on `anthropic`, `anthropic.claude-…-v1:0` on Bedrock) is
//! mapped to the OpenRouter id by [`openrouter_id`]. When no price is known the cost is `null`
//! with a note saying why, never 0.
//!
//! Tiered prices (e.g. above 200K context) are not modelled: like OpenRouter's models JSON, the
//! snapshot carries the base tier.

use crate::usage::TokenClasses;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::LazyLock;

/// The date the bundled snapshot's list prices were taken.
pub const SNAPSHOT_DATE: &str = "2025-12-01";

/// `(OpenRouter id, prompt, completion, cache read, cache write)`, USD per million tokens.
type SnapshotRow = (&'static str, f64, f64, Option<f64>, Option<f64>);

/// The bundled snapshot, USD per million tokens: `(OpenRouter id, prompt, completion, cache
/// read, cache write)`. A missing cache price bills those tokens at the prompt price, as
/// OpenRouter does for a model without a cache discount.
const SNAPSHOT: &[SnapshotRow] = &[
    ("anthropic/claude-opus-4.5", 5.0, 25.0, Some(0.5), Some(6.25)),
    ("anthropic/claude-opus-4.1", 15.0, 75.0, Some(1.5), Some(18.75)),
    ("anthropic/claude-opus-4", 15.0, 75.0, Some(1.5), Some(18.75)),
    ("anthropic/claude-sonnet-4.5", 3.0, 15.0, Some(0.3), Some(3.75)),
    ("anthropic/claude-sonnet-4", 3.0, 15.0, Some(0.3), Some(3.75)),
    ("anthropic/claude-3.7-sonnet", 3.0, 15.0, Some(0.3), Some(3.75)),
    ("anthropic/claude-haiku-4.5", 1.0, 5.0, Some(0.1), Some(1.25)),
    ("anthropic/claude-3.5-haiku", 0.8, 4.0, Some(0.08), Some(1.0)),
    ("openai/gpt-5.1", 1.25, 10.0, Some(0.125), None),
    ("openai/gpt-5", 1.25, 10.0, Some(0.125), None),
    ("openai/gpt-5-codex", 1.25, 10.0, Some(0.125), None),
    ("openai/gpt-5-mini", 0.25, 2.0, Some(0.025), None),
    ("openai/gpt-5-nano", 0.05, 0.4, Some(0.005), None),
    ("openai/gpt-4.1", 2.0, 8.0, Some(0.5), None),
    ("openai/gpt-4.1-mini", 0.4, 1.6, Some(0.1), None),
    ("openai/gpt-4.1-nano", 0.1, 0.4, Some(0.025), None),
    ("openai/gpt-4o", 2.5, 10.0, Some(1.25), None),
    ("openai/gpt-4o-mini", 0.15, 0.6, Some(0.075), None),
    ("openai/o3", 2.0, 8.0, Some(0.5), None),
    ("openai/o4-mini", 1.1, 4.4, Some(0.275), None),
    ("google/gemini-3-pro-preview", 2.0, 12.0, None, None),
    ("google/gemini-2.5-pro", 1.25, 10.0, None, None),
    ("google/gemini-2.5-flash", 0.3, 2.5, None, None),
    ("x-ai/grok-4", 3.0, 15.0, Some(0.75), None),
    ("x-ai/grok-code-fast-1", 0.2, 1.5, Some(0.02), None),
];

/// One model's prices, USD per token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub prompt: f64,
    pub completion: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    Snapshot,
    File,
}

impl PriceSource {
    fn describe(self) -> String {
        match self {
            PriceSource::Snapshot => format!("bundled OpenRouter snapshot {SNAPSHOT_DATE}"),
            PriceSource::File => "--prices file".to_string(),
        }
    }
}

/// Why a prices file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("the prices file is not OpenRouter's models JSON ({0}): pass the body of GET https://openrouter.ai/api/v1/models, an object with a `data` array")]
    Json(#[from] serde_json::Error),
    #[error("model {model:?} has pricing.{field} = {value:?}, which is not a price in USD per token: fix or remove that entry")]
    BadPrice {
        model: String,
        field: &'static str,
        value: String,
    },
}

/// Prices by OpenRouter id.
#[derive(Debug, Clone)]
pub struct PriceTable {
    entries: HashMap<String, (Price, PriceSource)>,
}

/// The cost of a run, USD. `uncached_input` includes the cache writes (at the cache-write
/// price when the model has one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    pub currency: &'static str,
    pub total: f64,
    pub uncached_input: f64,
    pub cached_input: f64,
    pub output: f64,
    /// `bundled OpenRouter snapshot <date>` or `--prices file`.
    pub source: String,
}

/// The price lookup for a run, with the reason when there is no cost.
#[derive(Debug, Clone, PartialEq)]
pub enum Pricing {
    Priced(Cost),
    /// No cost, and why (for the summary's `cost_note`).
    Unknown(String),
}

impl PriceTable {
    /// The bundled snapshot.
    pub fn bundled() -> Self {
        let per_token = |per_million: f64| per_million / 1_000_000.0;
        let entries = SNAPSHOT
            .iter()
            .map(|&(id, prompt, completion, read, write)| {
                let price = Price {
                    prompt: per_token(prompt),
                    completion: per_token(completion),
                    cache_read: read.map(per_token),
                    cache_write: write.map(per_token),
                };
                (id.to_string(), (price, PriceSource::Snapshot))
            })
            .collect();
        PriceTable { entries }
    }

    /// Overlays OpenRouter's models JSON (`{"data": [{"id", "canonical_slug", "pricing":
    /// {"prompt", "completion", "input_cache_read", "input_cache_write"}}]}`, prices as decimal
    /// strings in USD per token). A model priced `-1` (OpenRouter's "varies", e.g. its router)
    /// or without prompt and completion prices has no fixed price and is left out. Returns how
    /// many models were priced.
    pub fn overlay_openrouter_json(&mut self, json: &str) -> Result<usize, PriceError> {
        #[derive(Deserialize)]
        struct Models {
            data: Vec<Model>,
        }
        #[derive(Deserialize)]
        struct Model {
            id: String,
            #[serde(default)]
            canonical_slug: Option<String>,
            #[serde(default)]
            pricing: Option<Pricing>,
        }
        #[derive(Deserialize)]
        struct Pricing {
            #[serde(default)]
            prompt: Option<serde_json::Value>,
            #[serde(default)]
            completion: Option<serde_json::Value>,
            #[serde(default)]
            input_cache_read: Option<serde_json::Value>,
            #[serde(default)]
            input_cache_write: Option<serde_json::Value>,
        }
        let models: Models = serde_json::from_str(json)?;
        let mut priced = 0;
        for model in models.data {
            let Some(p) = model.pricing else { continue };
            let field = |field: &'static str, v: &Option<serde_json::Value>| per_token_price(&model.id, field, v);
            let (Some(prompt), Some(completion)) = (field("prompt", &p.prompt)?, field("completion", &p.completion)?)
            else {
                continue;
            };
            let price = Price {
                prompt,
                completion,
                cache_read: field("input_cache_read", &p.input_cache_read)?,
                cache_write: field("input_cache_write", &p.input_cache_write)?,
            };
            if let Some(slug) = model.canonical_slug.filter(|s| *s != model.id) {
                self.entries.insert(slug, (price, PriceSource::File));
            }
            self.entries.insert(model.id, (price, PriceSource::File));
            priced += 1;
        }
        Ok(priced)
    }

    /// The price under an exact OpenRouter id.
    pub fn get(&self, openrouter_id: &str) -> Option<Price> {
        self.entries.get(openrouter_id).map(|(p, _)| *p)
    }

    /// The OpenRouter id a run's model is priced under: the id [`openrouter_id`] maps it to
    /// when that id has a price; else the one priced id whose model part (after the vendor)
    /// is the model id itself, which lets `--prices` price a model whose vendor cannot be told
    /// (an `openai-compatible` proxy's `acme-coder`); else the mapped id, unpriced.
    pub fn resolve(&self, provider: Option<&str>, model_id: &str) -> Option<String> {
        let mapped = openrouter_id(provider, model_id);
        if let Some(id) = mapped.as_ref().filter(|id| self.entries.contains_key(*id)) {
            return Some(id.clone());
        }
        let name = model_id.trim().to_ascii_lowercase();
        let mut by_name = self
            .entries
            .keys()
            .filter(|id| id.split_once('/').is_some_and(|(_, model)| model == name));
        match (by_name.next(), by_name.next()) {
            (Some(only), None) => Some(only.clone()),
            _ => mapped,
        }
    }

    /// Prices `classes` for the model a run reported.
    pub fn cost(&self, provider: Option<&str>, model_id: Option<&str>, classes: &TokenClasses) -> Pricing {
        let Some(model_id) = model_id.filter(|m| !m.is_empty()) else {
            return Pricing::Unknown("the stream named no model (no run_result.model.id)".to_string());
        };
        let provider_text = provider.unwrap_or("no provider");
        let Some(id) = self.resolve(provider, model_id) else {
            return Pricing::Unknown(format!(
                "no OpenRouter id is known for model {model_id:?} ({provider_text}); pass --prices FILE with OpenRouter's models JSON"
            ));
        };
        let Some((price, source)) = self.entries.get(&id) else {
            return Pricing::Unknown(format!(
                "no price for model {model_id:?} ({provider_text}) under OpenRouter id {id:?}; pass --prices FILE with OpenRouter's models JSON"
            ));
        };
        match cost_of(classes, price) {
            Some((uncached_input, cached_input, output)) => Pricing::Priced(Cost {
                currency: "USD",
                total: round(uncached_input + cached_input + output),
                uncached_input: round(uncached_input),
                cached_input: round(cached_input),
                output: round(output),
                source: source.describe(),
            }),
            None => Pricing::Unknown(
                "the usage totals contradict each other (cache reads exceed input tokens), so uncached input is not determinable".to_string(),
            ),
        }
    }
}

/// `(uncached input, cached input, output)` in USD; each token class is priced exactly once.
fn cost_of(classes: &TokenClasses, price: &Price) -> Option<(f64, f64, f64)> {
    let uncached = classes.uncached_input()?;
    let writes = classes.cache_creation();
    let fresh = uncached - writes;
    let uncached_cost = fresh as f64 * price.prompt + writes as f64 * price.cache_write.unwrap_or(price.prompt);
    let cached_cost = classes.cached_input() as f64 * price.cache_read.unwrap_or(price.prompt);
    let output_cost = classes.output() as f64 * price.completion;
    Some((uncached_cost, cached_cost, output_cost))
}

/// Ten decimal places: far below a cent, and free of float noise in the JSON.
fn round(usd: f64) -> f64 {
    (usd * 1e10).round() / 1e10
}

/// A price field of OpenRouter's JSON: a decimal string (or number), USD per token. `None` when
/// absent or negative (OpenRouter's "-1": the price varies).
fn per_token_price(
    model: &str,
    field: &'static str,
    value: &Option<serde_json::Value>,
) -> Result<Option<f64>, PriceError> {
    let bad = |v: &serde_json::Value| PriceError::BadPrice {
        model: model.to_string(),
        field,
        value: v.to_string(),
    };
    let parsed = match value {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(v @ serde_json::Value::String(s)) => s.trim().parse::<f64>().map_err(|_| bad(v))?,
        Some(v @ serde_json::Value::Number(n)) => n.as_f64().ok_or_else(|| bad(v))?,
        Some(v) => return Err(bad(v)),
    };
    if !parsed.is_finite() {
        return Err(bad(value.as_ref().expect("checked above")));
    }
    Ok((parsed >= 0.0).then_some(parsed))
}

static BEDROCK_REGION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:us|eu|apac|au|jp|ca|global)\.").expect("static regex"));
static BEDROCK_VERSION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"-v\d+(?::\d+)?$").expect("static regex"));
static DATE_SUFFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2}|-latest|@latest)$").expect("static regex"));
/// `claude-3-7-sonnet` → `claude-3.7-sonnet`; `claude-sonnet-4-5` → `claude-sonnet-4.5`.
static CLAUDE_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^claude-(?:(\d)-(\d)-(.+)|([a-z]+)-(\d)-(\d))$").expect("static regex"));

/// The OpenRouter id of a provider's model id, or `None` when the vendor cannot be told.
///
/// An id that already has a vendor (`anthropic/claude-sonnet-4.5` from the `openrouter` or
/// `cline` providers) is used as is. Otherwise the id is cleaned of Bedrock region/vendor
/// prefixes and version suffixes, Vertex `@date` and dated snapshots, Anthropic's dashed
/// versions become dotted, and the vendor is inferred from the model family (then from the
/// provider name).
pub fn openrouter_id(provider: Option<&str>, model_id: &str) -> Option<String> {
    let id = model_id.trim().to_ascii_lowercase();
    if id.contains('/') {
        return Some(id);
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
    ];
    FAMILIES
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, v)| *v)
}

fn vendor_of_provider(provider: &str) -> Option<&'static str> {
    Some(match provider {
        "anthropic" | "claude-code" => "anthropic",
        "openai" | "openai-native" | "openai-codex" => "openai",
        "gemini" | "google" => "google",
        "xai" | "x-ai" => "x-ai",
        "deepseek" => "deepseek",
        "mistral" => "mistralai",
        "moonshot" => "moonshotai",
        "qwen" | "qwen-code" => "qwen",
        "zai" | "z-ai" => "z-ai",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::ClineUsage;

    fn classes(input: u64, output: u64, read: u64, write: u64) -> TokenClasses {
        TokenClasses::from_cline(&ClineUsage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cache_read_tokens: Some(read),
            cache_write_tokens: Some(write),
            total_cost: None,
        })
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
            ("cline", "x-ai/grok-code-fast-1", "x-ai/grok-code-fast-1"),
            ("openai-compatible", "gpt-4.1-mini", "openai/gpt-4.1-mini"),
            ("deepseek", "chat-model", "deepseek/chat-model"),
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
    fn a_known_model_is_priced_once_per_class() {
        let table = PriceTable::bundled();
        let Pricing::Priced(cost) = table.cost(
            Some("anthropic"),
            Some("claude-sonnet-4-5-20250929"),
            &classes(1_000_000, 100_000, 400_000, 200_000),
        ) else {
            panic!("sonnet 4.5 is in the snapshot")
        };
        // fresh 600K × $3/M + writes 200K × $3.75/M; reads 400K × $0.30/M; output 100K × $15/M.
        assert_eq!(cost.uncached_input, 2.55);
        assert_eq!(cost.cached_input, 0.12);
        assert_eq!(cost.output, 1.5);
        assert_eq!(cost.total, 4.17);
        assert!(cost.source.contains(SNAPSHOT_DATE));
    }

    #[test]
    fn an_unknown_price_is_no_cost_with_a_reason() {
        let table = PriceTable::bundled();
        let c = classes(246, 90, 200, 0);
        let Pricing::Unknown(why) = table.cost(Some("openai-compatible"), Some("fake-model"), &c) else {
            panic!("fake-model has no price")
        };
        assert!(why.contains("fake-model") && why.contains("--prices"), "{why}");
        assert!(
            matches!(table.cost(Some("openai"), Some("gpt-99"), &c), Pricing::Unknown(w) if w.contains("openai/gpt-99"))
        );
        assert!(matches!(table.cost(None, None, &c), Pricing::Unknown(_)));
        let contradictory = classes(10, 1, 50, 0);
        assert!(
            matches!(table.cost(Some("openai"), Some("gpt-4o"), &contradictory), Pricing::Unknown(w) if w.contains("contradict"))
        );
    }

    #[test]
    fn openrouter_models_json_overlays_the_snapshot() {
        let json = r#"{"data":[
            {"id":"acme/fake-model","canonical_slug":"acme/fake-model-2025","pricing":{"prompt":"0.000001","completion":"0.000002","request":"0","input_cache_read":"0.0000001"}},
            {"id":"openai/gpt-4o","pricing":{"prompt":"0.000005","completion":"0.00002"}},
            {"id":"openrouter/auto","pricing":{"prompt":"-1","completion":"-1"}},
            {"id":"no/pricing"}
        ]}"#;
        let mut table = PriceTable::bundled();
        assert_eq!(table.overlay_openrouter_json(json).unwrap(), 2);
        assert_eq!(table.get("acme/fake-model").unwrap().cache_read, Some(0.0000001));
        assert!(table.get("acme/fake-model-2025").is_some());
        assert_eq!(table.get("openai/gpt-4o").unwrap().prompt, 0.000005);
        assert!(table.get("openrouter/auto").is_none());
        // The vendor of `fake-model` cannot be told, but exactly one priced id is that model.
        assert_eq!(
            table.resolve(Some("openai-compatible"), "fake-model").as_deref(),
            Some("acme/fake-model")
        );
        let Pricing::Priced(cost) =
            table.cost(Some("openai-compatible"), Some("fake-model"), &classes(246, 90, 200, 0))
        else {
            panic!()
        };
        assert_eq!(cost.source, "--prices file");
        assert_eq!(cost.total, round(46e-6 + 200e-7 + 180e-6));
    }

    #[test]
    fn bad_prices_files_are_refused_with_the_reason() {
        let mut table = PriceTable::bundled();
        let err = table.overlay_openrouter_json("[1,2]").unwrap_err().to_string();
        assert!(err.contains("models JSON"), "{err}");
        let err = table
            .overlay_openrouter_json(r#"{"data":[{"id":"a/b","pricing":{"prompt":"cheap","completion":"0"}}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a/b") && err.contains("pricing.prompt") && err.contains("cheap"),
            "{err}"
        );
    }
}
