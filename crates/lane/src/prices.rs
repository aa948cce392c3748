//! The price table the daemon's live usage and `aep-cline usage` price model calls with: the
//! bundled one (litellm's), and over it a file of the operator's for models it lacks (a private
//! model behind an OpenAI-compatible proxy): `AEP_CLINE_PRICES` for both, `--prices` for
//! `usage`. One format, OpenRouter's models JSON, so the same file serves both.

use anyhow::Context;
use cline_stream::PriceTable;
use std::path::Path;

/// The variable both read.
pub const VARIABLE: &str = "AEP_CLINE_PRICES";

/// The bundled table, with `file` over it; a file that cannot be read or used is an error that
/// names it (the daemon refuses to start on it rather than price runs wrongly).
pub fn load(file: Option<&Path>) -> anyhow::Result<PriceTable> {
    let mut prices = PriceTable::bundled();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the prices file {} ({VARIABLE}, --prices)", path.display()))?;
        let priced = prices.overlay_openrouter_json(&text).map_err(|e| match e {
            cline_stream::PriceError::Json(_) => anyhow::anyhow!(
                "cannot use the prices file {}: {e}; it must be OpenRouter's models JSON, {{\"data\": [{{\"id\": \"vendor/model\", \
                 \"pricing\": {{\"prompt\": \"0.000003\", \"completion\": \"0.000015\"}}}}]}} (USD per token)",
                path.display()
            ),
            bad => anyhow::anyhow!("cannot use the prices file {} ({VARIABLE}, --prices): {bad}", path.display()),
        })?;
        tracing::info!(file = %path.display(), models = priced, "prices over the bundled table");
    }
    Ok(prices)
}
