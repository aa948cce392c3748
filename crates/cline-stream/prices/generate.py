#!/usr/bin/env python3
"""Generates litellm.tsv, the price table bundled in aep-cline, from litellm's price list.

The source is `model_prices_and_context_window.json` as the `litellm` package ships it on PyPI
(inside the wheel as `litellm/model_prices_and_context_window_backup.json`): per-token input,
output, cache-read and cache-write prices for thousands of models, kept by the litellm project.
The version is pinned here, and so is the file's sha256, so the table is reproducible and a
changed upstream file is refused rather than silently taken.

    python3 crates/cline-stream/prices/generate.py            # pip download, then write the table
    python3 crates/cline-stream/prices/generate.py --check    # fail if the committed table differs
    python3 crates/cline-stream/prices/generate.py --wheel litellm-1.110.2-....whl

The only network it uses is pip (PyPI). To move to a newer litellm: change LITELLM_VERSION and
LITELLM_RELEASED (the date PyPI shows for that release), run with --accept-new-sha, commit the
table, and update `LITELLM_VERSION`/`SNAPSHOT_DATE` in src/price.rs (a test checks they agree
with the table's header).

Kept: chat, responses and completion models of the providers Cline users pick (the litellm
providers named in PROVIDERS), with an input and an output price, not both zero (a row priced 0
would make an unpriced model look free; such a model stays "no price"). Each row keeps litellm's
own key and provider, and the four prices in USD per token exactly as litellm writes them
(empty when litellm gives none). Context-size tiers (`*_above_200k_tokens`), batch, flex and
priority prices are not carried: the table prices the base tier, as OpenRouter's list does.
"""

import argparse
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
import zipfile

LITELLM_VERSION = "1.110.2"
LITELLM_RELEASED = "2026-11-20"
SOURCE_SHA256 = "8943af58bf9f979c6a4bef815687117ffa341e462a41faed9be17b5c33d3dcc2"
MEMBER = "litellm/model_prices_and_context_window_backup.json"

# litellm providers whose rows the table keeps: the vendors' own APIs and the gateways and
# hosts Cline has a provider for (see `provider_keys` in src/price.rs for the mapping).
PROVIDERS = {
    "anthropic",
    "openai",
    "text-completion-openai",
    "gemini",
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
    "bedrock",
    "bedrock_converse",
    "deepseek",
    "xai",
    "mistral",
    "codestral",
    "groq",
    "cerebras",
    "sambanova",
    "together_ai",
    "fireworks_ai",
    "nebius",
    "moonshot",
    "zai",
    "minimax",
    "dashscope",
    "vercel_ai_gateway",
}
MODES = {"chat", "responses", "completion"}
FIELDS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
)

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "litellm.tsv"


def download_wheel(into: pathlib.Path) -> pathlib.Path:
    # A fixed platform, so the same wheel is fetched on any machine (the JSON is the same in
    # every wheel of a release; the platform only picks one file).
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
            "--python-version", "3.11", "--implementation", "cp",
            "--dest", str(into), f"litellm=={LITELLM_VERSION}",
        ],
        check=True,
    )
    wheels = sorted(into.glob(f"litellm-{LITELLM_VERSION}-*.whl"))
    if not wheels:
        sys.exit(f"pip downloaded no litellm {LITELLM_VERSION} wheel into {into}")
    return wheels[0]


def price(value, key, field):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        sys.exit(f"{key}: {field} = {value!r} is not a price in USD per token")
    return float(value)


def fmt(value):
    return "" if value is None else repr(value)


def rows(models: dict):
    kept = {}
    for key, entry in models.items():
        if key == "sample_spec" or not isinstance(entry, dict):
            continue
        provider = entry.get("litellm_provider")
        if provider not in PROVIDERS or entry.get("mode") not in MODES:
            continue
        if any(c in key for c in "\t\n\r"):
            sys.exit(f"{key!r}: a key with a tab or a newline cannot be written to the table")
        prices = [price(entry.get(f), key, f) for f in FIELDS]
        prompt, completion = prices[0], prices[1]
        if prompt is None or completion is None or (prompt == 0 and completion == 0):
            continue
        lower = key.lower()
        if lower in kept and kept[lower][1:] != (provider, *prices):
            sys.exit(f"{key!r} and {kept[lower][0]!r} differ only in case but not in price")
        kept[lower] = (key, provider, *prices)
    return [kept[k] for k in sorted(kept)]


def render(models: dict, sha: str) -> str:
    lines = [
        f"# litellm {LITELLM_VERSION} {LITELLM_RELEASED} sha256:{sha}",
        "# Generated by crates/cline-stream/prices/generate.py from litellm's "
        "model_prices_and_context_window.json (PyPI); do not edit by hand.",
        "# key\tlitellm_provider\tinput\toutput\tcache_read\tcache_write (USD per token; empty: not given)",
    ]
    for key, provider, *prices in rows(models):
        lines.append("\t".join([key, provider, *map(fmt, prices)]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=pathlib.Path, help="a litellm wheel already downloaded")
    ap.add_argument("--check", action="store_true", help="compare with the committed table, write nothing")
    ap.add_argument("--accept-new-sha", action="store_true", help="take a source file whose sha256 is not the pinned one (after a version bump)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download_wheel(pathlib.Path(tmp))
        with zipfile.ZipFile(wheel) as z:
            raw = z.read(MEMBER)
    sha = hashlib.sha256(raw).hexdigest()
    if sha != SOURCE_SHA256 and not args.accept_new_sha:
        sys.exit(f"{MEMBER} in {wheel.name} has sha256 {sha}, not the pinned {SOURCE_SHA256}: "
                 "if you bumped LITELLM_VERSION, pin the new sha256 (or pass --accept-new-sha)")
    text = render(json.loads(raw), sha)
    if args.check:
        if OUT.read_text() != text:
            sys.exit(f"{OUT} is not what litellm {LITELLM_VERSION} gives: rerun {pathlib.Path(__file__).name}")
        print(f"{OUT.name}: up to date with litellm {LITELLM_VERSION}")
        return
    OUT.write_text(text)
    print(f"{OUT.name}: {text.count(chr(10)) - 3} models from litellm {LITELLM_VERSION} ({LITELLM_RELEASED}), sha256 {sha}")


if __name__ == "__main__":
    main()
