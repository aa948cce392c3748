//! Cost: Cline reports none of its own off its own provider (`totalCost` is 0), and where it
//! does it is not comparable (it bills cached tokens twice with some providers), so cost is
//! derived from list prices for the run's model.
//!
//! Prices come from a bundled table generated from litellm's
//! `model_prices_and_context_window.json` ([`LITELLM_VERSION`], released [`SNAPSHOT_DATE`]; see
//! `prices/generate.py`), overlaid by `--prices FILE`: OpenRouter's models JSON exactly as
//! `GET https://openrouter.ai/api/v1/models` returns it. A model is priced, in order: by the
//! `--prices` file under its OpenRouter id, or under its own model id when the file's id has no
//! vendor part (`"fake-model"` prices `fake-model` from any provider); by its provider's own row in the table (Bedrock's
//! `us.anthropic.claude-…-v1:0` with the regional uplift, `vertex_ai/claude-…@date`,
//! `gemini/gemini-2.5-pro`, Groq's, Together's, ...; [`ids::provider_keys`]); by the vendor's list
//! price under its OpenRouter id ([`openrouter_id`]: `anthropic/claude-sonnet-4.5`, for
//! OpenRouter, Cline's own provider and proxies); else by the one priced id that has the model's
//! name. When no price is known the cost is `null` with a note saying why, never 0.
//!
//! Tiered prices (e.g. above 200K context) are not modelled: like OpenRouter's models JSON, the
//! table carries the base tier.

mod bundled;
mod ids;

use crate::usage::TokenClasses;
use bundled::{Bundled, BUNDLED};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

pub use ids::openrouter_id;

/// The litellm release the bundled table was generated from (`prices/litellm.tsv`'s header; a
/// test checks that they agree).
pub const LITELLM_VERSION: &str = "1.110.2";

/// The date of that release on PyPI: the date of the bundled list prices.
pub const SNAPSHOT_DATE: &str = "2026-11-20";

/// The bundled prices, in words, for `--help` texts and JSON outputs.
pub const PRICES_SNAPSHOT: &str = "litellm 1.110.2 model_prices_and_context_window.json (PyPI release of 2026-11-20)";

/// The dearest price a prices file may give, USD per million tokens: far above any model's
/// list price, and low enough that no token count (a `u64`) makes a cost overflow.
pub const MAX_USD_PER_MILLION: f64 = 10_000.0;

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
    fn describe(self, key: &str) -> String {
        match self {
            PriceSource::Snapshot => format!("bundled litellm {LITELLM_VERSION} ({SNAPSHOT_DATE}) {key}"),
            PriceSource::File => "--prices file".to_string(),
        }
    }
}

/// Why a prices file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error("the prices file is not OpenRouter's models JSON ({0}): pass the body of GET https://openrouter.ai/api/v1/models, an object with a `data` array")]
    Json(#[from] serde_json::Error),
    #[error(
        "entry {index} of `data` (model {model:?}{line}) has pricing.{field} = {value}, {why}: a price is USD per token, \
         a finite number from 0 to {max} ({MAX_USD_PER_MILLION} USD per million tokens), or OpenRouter's -1 (it varies: \
         the model is left unpriced); fix or remove that entry",
        line = match line { Some(l) => format!(", line {l}"), None => String::new() },
        max = MAX_USD_PER_MILLION / 1e6,
    )]
    BadPrice {
        /// The entry's place in `data`, from 0.
        index: usize,
        model: String,
        /// The line of the file where the model's id is, from 1.
        line: Option<usize>,
        field: &'static str,
        value: String,
        why: &'static str,
    },
}

/// Prices: the bundled table, overlaid by a `--prices` file (by OpenRouter id).
#[derive(Debug, Clone)]
pub struct PriceTable {
    /// Parsed on first use: a run that prices nothing never pays for it.
    bundled: &'static LazyLock<Bundled>,
    overlay: HashMap<String, Price>,
    /// Models the file names without a fixed price (OpenRouter's -1, or no prompt or
    /// completion price), so a cost note blames the file, not the bundled table.
    unpriced: HashSet<String>,
}

/// A model's price and where it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceMatch {
    pub price: Price,
    /// `bundled litellm <version> (<date>) <litellm key>` or `--prices file`.
    pub source: String,
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
    /// `bundled litellm <version> (<date>) <litellm key>` or `--prices file`.
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
    /// The bundled table (parsed once per process, on first use).
    pub fn bundled() -> Self {
        PriceTable {
            bundled: &BUNDLED,
            overlay: HashMap::new(),
            unpriced: HashSet::new(),
        }
    }

    /// Overlays OpenRouter's models JSON (`{"data": [{"id", "canonical_slug", "pricing":
    /// {"prompt", "completion", "input_cache_read", "input_cache_write"}}]}`, prices as decimal
    /// strings in USD per token). A model priced `-1` (OpenRouter's "varies", e.g. its router)
    /// or without prompt and completion prices has no fixed price and is left out. Any other
    /// price that is not a finite number from 0 to [`MAX_USD_PER_MILLION`] refuses the whole
    /// file, naming the entry: a cost from it would be infinite or negative. Returns how many
    /// models were priced.
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
        for (index, model) in models.data.into_iter().enumerate() {
            let Some(p) = model.pricing else {
                self.unpriced.insert(model.id.to_ascii_lowercase());
                continue;
            };
            let field = |field: &'static str, v: &Option<serde_json::Value>| {
                per_token_price(v).map_err(|why| PriceError::BadPrice {
                    index,
                    model: model.id.clone(),
                    line: line_of(json, &model.id),
                    field,
                    value: v.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    why,
                })
            };
            let (Some(prompt), Some(completion)) = (field("prompt", &p.prompt)?, field("completion", &p.completion)?)
            else {
                self.unpriced.insert(model.id.to_ascii_lowercase());
                continue;
            };
            let price = Price {
                prompt,
                completion,
                cache_read: field("input_cache_read", &p.input_cache_read)?,
                cache_write: field("input_cache_write", &p.input_cache_write)?,
            };
            if let Some(slug) = model.canonical_slug.filter(|s| *s != model.id) {
                self.overlay.insert(slug.to_ascii_lowercase(), price);
            }
            self.overlay.insert(model.id.to_ascii_lowercase(), price);
            priced += 1;
        }
        Ok(priced)
    }

    /// The price under an exact OpenRouter id: the `--prices` file's, else the vendor's list
    /// price from the bundled table.
    pub fn get(&self, openrouter_id: &str) -> Option<Price> {
        self.overlay
            .get(openrouter_id)
            .copied()
            .or_else(|| self.bundled.by_openrouter_id(openrouter_id).map(|row| row.price))
    }

    /// The OpenRouter id a run's model is priced under: the id [`openrouter_id`] maps it to
    /// when that id has a price; else the one priced id whose model part (after the vendor)
    /// is the model id itself, which lets `--prices` price a model whose vendor cannot be told
    /// (an `openai-compatible` proxy's `acme-coder`); else the mapped id, unpriced.
    pub fn resolve(&self, provider: Option<&str>, model_id: &str) -> Option<String> {
        let mapped = openrouter_id(provider, model_id);
        if let Some(id) = mapped.as_ref().filter(|id| self.overlay.contains_key(*id)) {
            return Some(id.clone());
        }
        if let Some(id) = self.vendorless(model_id) {
            return Some(id);
        }
        if let Some(id) = mapped.as_ref().filter(|id| self.get(id).is_some()) {
            return Some(id.clone());
        }
        self.by_name(model_id).or(mapped)
    }

    /// The file's id that is `model_id` itself with no vendor part (`"fake-model"`): the
    /// operator priced that model, whichever provider serves it.
    fn vendorless(&self, model_id: &str) -> Option<String> {
        let name = model_id.trim().to_ascii_lowercase();
        (!name.contains('/') && self.overlay.contains_key(&name)).then_some(name)
    }

    /// The one priced id whose model part is `model_id`: in the `--prices` file, else in the
    /// bundled table.
    fn by_name(&self, model_id: &str) -> Option<String> {
        let name = model_id.trim().to_ascii_lowercase();
        let mut in_file = self
            .overlay
            .keys()
            .filter(|id| id.split_once('/').is_some_and(|(_, model)| model == name));
        match (in_file.next(), in_file.next()) {
            (Some(only), None) => Some(only.clone()),
            (Some(_), Some(_)) => None,
            (None, _) => self.bundled.by_name(&name).map(str::to_string),
        }
    }

    /// A model's price, by the order in the module's documentation, or `None`.
    pub fn price(&self, provider: Option<&str>, model_id: &str) -> Option<PriceMatch> {
        let file = |price: Price| PriceMatch {
            price,
            source: PriceSource::File.describe(""),
        };
        let bundled = |row: &bundled::Row| PriceMatch {
            price: row.price,
            source: PriceSource::Snapshot.describe(row.key),
        };
        let mapped = openrouter_id(provider, model_id);
        if let Some(price) = mapped.as_ref().and_then(|id| self.overlay.get(id)) {
            return Some(file(*price));
        }
        if let Some(price) = self.vendorless(model_id).and_then(|id| self.overlay.get(&id)) {
            return Some(file(*price));
        }
        for (key, owners) in ids::provider_keys(provider, model_id) {
            if let Some(row) = self.bundled.by_key(&key, owners) {
                return Some(bundled(row));
            }
        }
        if let Some(row) = mapped.as_ref().and_then(|id| self.bundled.by_openrouter_id(id)) {
            return Some(bundled(row));
        }
        let id = self.by_name(model_id)?;
        match self.overlay.get(&id) {
            Some(price) => Some(file(*price)),
            None => self.bundled.by_openrouter_id(&id).map(bundled),
        }
    }

    /// Prices `classes` for the model a run reported.
    pub fn cost(&self, provider: Option<&str>, model_id: Option<&str>, classes: &TokenClasses) -> Pricing {
        let Some(model_id) = model_id.filter(|m| !m.is_empty()) else {
            return Pricing::Unknown("the stream named no model (no run_result.model.id)".to_string());
        };
        let provider_text = provider.unwrap_or("no provider");
        let Some(found) = self.price(provider, model_id) else {
            let mapped = openrouter_id(provider, model_id);
            let name = model_id.trim().to_ascii_lowercase();
            let in_file = self.unpriced.iter().find(|id| {
                Some(id.as_str()) == mapped.as_deref()
                    || **id == name
                    || id.split_once('/').is_some_and(|(_, model)| model == name)
            });
            if let Some(id) = in_file {
                return Pricing::Unknown(format!(
                    "model {model_id:?} ({provider_text}) is in the prices file as {id:?} without a fixed price \
                     (pricing.prompt and pricing.completion, or OpenRouter's -1: it varies), and the bundled \
                     {PRICES_SNAPSHOT} has none; give both prices in USD per token"
                ));
            }
            let under = match mapped {
                Some(id) => format!(" (nor under OpenRouter id {id:?})"),
                None => String::new(),
            };
            return Pricing::Unknown(format!(
                "no price for model {model_id:?} ({provider_text}) in the bundled {PRICES_SNAPSHOT}{under}; pass --prices FILE with OpenRouter's models JSON"
            ));
        };
        match cost_of(classes, &found.price) {
            // A price past the bound (not from a file, which is refused) could still overflow.
            Some((u, c, o)) if ![u, c, o, u + c + o].iter().all(|x| x.is_finite()) => Pricing::Unknown(format!(
                "the cost of model {model_id:?} ({provider_text}) at the price of the {} is too large to be a number; \
                 check that price (USD per token)",
                found.source
            )),
            Some((uncached_input, cached_input, output)) => Pricing::Priced(Cost {
                currency: "USD",
                total: round(uncached_input + cached_input + output),
                uncached_input: round(uncached_input),
                cached_input: round(cached_input),
                output: round(output),
                source: found.source,
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
/// absent or exactly -1 (OpenRouter's "the price varies"); else why it is no price.
fn per_token_price(value: &Option<serde_json::Value>) -> Result<Option<f64>, &'static str> {
    let parsed = match value {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().map_err(|_| "which is not a number")?,
        Some(serde_json::Value::Number(n)) => n.as_f64().ok_or("which is not a number")?,
        Some(_) => return Err("which is not a number"),
    };
    if parsed == -1.0 {
        return Ok(None);
    }
    if !parsed.is_finite() {
        return Err("which is not a finite number");
    }
    if parsed < 0.0 {
        return Err("which is negative");
    }
    if parsed > MAX_USD_PER_MILLION / 1e6 {
        return Err("which is above the bound");
    }
    Ok(Some(parsed))
}

/// The line (from 1) where `id` first appears as a JSON string in `json`, to point at an entry.
fn line_of(json: &str, id: &str) -> Option<usize> {
    let quoted = serde_json::to_string(id).ok()?;
    let at = json.find(&quoted)?;
    Some(json[..at].matches('\n').count() + 1)
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

    /// The litellm row and the total, exact, for 1M input tokens of which 400K cache reads and
    /// 200K cache writes, and 100K output: fresh 600K × input + 200K × cache write + 400K × cache
    /// read + 100K × output (a missing cache price is the input price), prices from
    /// prices/litellm.tsv.
    #[test]
    fn each_providers_model_is_priced_by_its_own_row_to_the_cent() {
        let table = PriceTable::bundled();
        for (provider, model, row, total) in [
            // $3 / $15, read $0.30, write $3.75.
            (
                "anthropic",
                "claude-sonnet-4-5-20250929",
                "claude-sonnet-4-5-20250929",
                4.17,
            ),
            ("claude-code", "claude-haiku-4-5", "claude-haiku-4-5", 1.39),
            // Bedrock's US cross-region profile carries a 10% uplift ($3.30 / $16.50); global does not.
            (
                "bedrock",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                4.587,
            ),
            (
                "bedrock",
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                4.17,
            ),
            // $5 / $25, read $0.50, write $6.25.
            (
                "vertex",
                "claude-opus-4-5@20251101",
                "vertex_ai/claude-opus-4-5@20251101",
                6.95,
            ),
            // $0.30 / $2.50, read $0.03, no write price.
            ("vertex", "gemini-2.5-flash", "gemini-2.5-flash", 0.502),
            ("gemini", "gemini-2.5-flash", "gemini/gemini-2.5-flash", 0.502),
            // $1.25 / $10, read $0.125.
            ("openai-native", "gpt-5", "gpt-5", 2.05),
            // gpt-4o's first snapshot: $5 / $15, no cache price.
            ("openai-native", "gpt-4o-2024-05-13", "gpt-4o-2024-05-13", 7.5),
            // $0.28 / $0.42, read $0.028; litellm's write price 0 means "billed as input".
            ("deepseek", "deepseek-chat", "deepseek/deepseek-chat", 0.2772),
            // $1 / $2, read $0.20 (the 2025 snapshot had $0.20 / $1.50).
            ("xai", "grok-code-fast-1", "xai/grok-code-fast-1", 1.08),
            (
                "mistral",
                "devstral-medium-latest",
                "mistral/devstral-medium-latest",
                0.536,
            ),
            // Groq's own price for gpt-oss, not OpenAI's.
            ("groq", "openai/gpt-oss-120b", "groq/openai/gpt-oss-120b", 0.21),
            (
                "together",
                "moonshotai/Kimi-K2-Instruct",
                "together_ai/moonshotai/Kimi-K2-Instruct",
                1.5,
            ),
            ("zai", "glm-4.6", "zai/glm-4.6", 0.744),
            ("minimax", "MiniMax-M2", "minimax/MiniMax-M2", 0.387),
            // Through a gateway or a proxy: the vendor's list price under the OpenRouter id.
            ("openrouter", "anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", 4.17),
            (
                "cline",
                "anthropic/claude-sonnet-4.5:thinking",
                "claude-sonnet-4-5",
                4.17,
            ),
            (
                "openrouter",
                "google/gemini-2.5-flash",
                "gemini/gemini-2.5-flash",
                0.502,
            ),
            ("openrouter", "x-ai/grok-code-fast-1", "xai/grok-code-fast-1", 1.08),
            ("openai-compatible", "gpt-5", "gpt-5", 2.05),
            // litellm no longer lists Sonnet 4 at Anthropic; the Vercel gateway's list price fills in.
            (
                "anthropic",
                "claude-sonnet-4-20250514",
                "vercel_ai_gateway/anthropic/claude-sonnet-4",
                4.17,
            ),
            ("litellm", "claude-sonnet-4-5", "claude-sonnet-4-5", 4.17),
        ] {
            let Pricing::Priced(cost) = table.cost(
                Some(provider),
                Some(model),
                &classes(1_000_000, 100_000, 400_000, 200_000),
            ) else {
                panic!("{provider} {model} has no price")
            };
            assert_eq!(
                cost.source,
                format!("bundled litellm {LITELLM_VERSION} ({SNAPSHOT_DATE}) {row}"),
                "{provider} {model}"
            );
            assert_eq!(cost.total, total, "{provider} {model}");
            assert_eq!(
                (cost.total * 100.0).round(),
                (total * 100.0).round(),
                "{provider} {model}: to the cent"
            );
        }
    }

    #[test]
    fn a_providers_model_is_not_priced_by_another_providers_row() {
        let table = PriceTable::bundled();
        // A Bedrock id on the anthropic provider is not priced by Bedrock's row.
        let m = table.price(Some("anthropic"), "claude-sonnet-4-5-20250929").unwrap();
        assert!(m.source.ends_with(" claude-sonnet-4-5-20250929"), "{}", m.source);
        // OpenRouter's `:free` variant is free on OpenRouter only: no price rather than the base one.
        assert!(table.price(Some("openrouter"), "qwen/qwen3-coder:free").is_none());
        // Local models have no price.
        assert!(table.price(Some("ollama"), "llama3.1:8b").is_none());
        assert!(table.price(Some("lmstudio"), "qwen2.5-coder-7b-instruct").is_none());
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
            {"id":"anthropic/claude-sonnet-4.5","pricing":{"prompt":"0.000004","completion":"0.00002"}},
            {"id":"openrouter/auto","pricing":{"prompt":"-1","completion":"-1"}},
            {"id":"no/pricing"}
        ]}"#;
        let mut table = PriceTable::bundled();
        assert_eq!(table.overlay_openrouter_json(json).unwrap(), 3);
        assert_eq!(table.get("acme/fake-model").unwrap().cache_read, Some(0.0000001));
        assert!(table.get("acme/fake-model-2025").is_some());
        assert_eq!(table.get("openai/gpt-4o").unwrap().prompt, 0.000005);
        assert!(table.get("openrouter/auto").is_none());
        // The file wins over the bundled table, a provider's own row included.
        let m = table
            .price(Some("bedrock"), "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
            .unwrap();
        assert_eq!((m.source.as_str(), m.price.prompt), ("--prices file", 0.000004));
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

    #[test]
    fn a_price_that_is_not_finite_or_is_negative_or_huge_refuses_the_file_naming_its_entry() {
        for (price, why) in [
            (r#""1e308""#, "above the bound"),
            ("1e308", "above the bound"),
            (r#""0.011""#, "above the bound"),
            (r#""NaN""#, "not a finite number"),
            (r#""inf""#, "not a finite number"),
            (r#""-0.000001""#, "negative"),
            ("-2", "negative"),
        ] {
            let json = format!(
                "{{\"data\": [\n  {{\"id\": \"ok/model\", \"pricing\": {{\"prompt\": \"0\", \"completion\": \"0\"}}}},\n  \
                 {{\"id\": \"acme/bad\", \"pricing\": {{\"prompt\": \"0.000001\", \"completion\": {price}}}}}\n]}}"
            );
            let err = PriceTable::bundled()
                .overlay_openrouter_json(&json)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(r#"entry 1 of `data` (model "acme/bad", line 3) has pricing.completion"#)
                    && err.contains(why)
                    && err.contains("fix or remove that entry")
                    && err.contains("10000 USD per million tokens"),
                "{price}: {err}"
            );
        }
        // The dearest price allowed, and OpenRouter's -1 (no fixed price), are taken.
        let json = r#"{"data":[{"id":"a/top","pricing":{"prompt":"0.01","completion":0.01}},
            {"id":"a/varies","pricing":{"prompt":"-1","completion":"-1"}}]}"#;
        assert_eq!(PriceTable::bundled().overlay_openrouter_json(json).unwrap(), 1);
    }

    #[test]
    fn a_model_the_file_leaves_unpriced_is_said_to_be_the_files_doing() {
        let mut table = PriceTable::bundled();
        let json = r#"{"data":[{"id":"acme/varies","pricing":{"prompt":"-1","completion":"-1"}},{"id":"acme/none"}]}"#;
        table.overlay_openrouter_json(json).unwrap();
        for model in ["varies", "none"] {
            let Pricing::Unknown(why) = table.cost(Some("openai-compatible"), Some(model), &classes(10, 1, 0, 0))
            else {
                panic!("{model} has no price")
            };
            assert!(
                why.contains("is in the prices file") && why.contains(&format!("acme/{model}")),
                "{why}"
            );
        }
    }

    #[test]
    fn an_id_without_a_vendor_prices_that_model_from_any_provider() {
        // #35: `{"id": "fake-model"}` was loaded (models=1) and could never match.
        let mut table = PriceTable::bundled();
        let json = r#"{"data":[{"id":"fake-model","pricing":{"prompt":"0.000001","completion":"0.000002"}},
            {"id":"gpt-4o","pricing":{"prompt":"0.00001","completion":"0.00001"}}]}"#;
        assert_eq!(table.overlay_openrouter_json(json).unwrap(), 2);
        for provider in [Some("openai-compatible"), Some("openrouter"), Some("ollama"), None] {
            let Pricing::Priced(cost) = table.cost(provider, Some("fake-model"), &classes(1000, 100, 0, 0)) else {
                panic!("{provider:?}: fake-model is priced by the file")
            };
            assert_eq!(
                (cost.source.as_str(), cost.total),
                ("--prices file", round(1000e-6 + 200e-6))
            );
            assert_eq!(table.resolve(provider, "Fake-Model").as_deref(), Some("fake-model"));
        }
        // The operator's price for that exact id wins over the bundled table's.
        let m = table.price(Some("openai"), "gpt-4o").unwrap();
        assert_eq!((m.source.as_str(), m.price.prompt), ("--prices file", 0.00001));
        // Only that exact id: another model is not priced by it.
        assert!(table.price(Some("openai-compatible"), "fake-model-2").is_none());
    }

    #[test]
    fn no_token_count_makes_a_cost_overflow() {
        let mut table = PriceTable::bundled();
        let json =
            r#"{"data":[{"id":"a/top","pricing":{"prompt":"0.01","completion":"0.01","input_cache_read":"0.01"}}]}"#;
        table.overlay_openrouter_json(json).unwrap();
        let most = classes(u64::MAX, u64::MAX, u64::MAX / 2, u64::MAX / 2);
        let Pricing::Priced(cost) = table.cost(Some("openrouter"), Some("a/top"), &most) else {
            panic!("priced")
        };
        assert!(cost.total.is_finite() && cost.total > 1e17, "{cost:?}");
        // A price past the bound (only a table built here can hold one) is no cost, never infinity.
        table.overlay.insert(
            "a/huge".into(),
            Price {
                prompt: f64::MAX,
                completion: f64::MAX,
                cache_read: None,
                cache_write: None,
            },
        );
        let Pricing::Unknown(why) = table.cost(Some("openrouter"), Some("a/huge"), &classes(10, 10, 0, 0)) else {
            panic!("an infinite cost")
        };
        assert!(why.contains("too large to be a number"), "{why}");
    }
}
