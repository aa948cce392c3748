//! `aep-cline stream`: normalizes a `cline --json` stream into documented events, a usage and
//! cost summary, or AEP events. The mapping lives in `cline-stream`; this is the command edge:
//! files, standard streams, the summary table and the exit code.

use crate::views::numbers;
use anyhow::Context;
use clap::Args;
use cline_stream::{Format, PriceTable, StreamError, Summary, PRICES_SNAPSHOT};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;

/// The exit code when the stream was processed to its end but some lines were malformed.
const EXIT_MALFORMED: i32 = 3;

/// Normalize a `cline --json` stream: what Cline did, and what it cost.
///
/// Reads the JSONL that `cline --json "task"` writes (a file, or standard input while Cline
/// runs) line by line, in constant memory, and writes one normalized event per line on
/// standard output: `agent_message`, `reasoning`, `command`, `read`, `write`, `search`,
/// `list`, `skill`, `error`, `aborted` and `unknown`. Every event has `type`, `line` (of the
/// input) and `ts`; the full schema is in crates/cline-stream/README.md.
///
/// Tokens come from the run's cumulative totals, split into uncached input (cache writes
/// included), cached input, cache creation and output; Cline's `inputTokens` already counts
/// the cache reads, so they are never billed twice. Cost is derived from list prices for the
/// run's model (Cline reports none off its own provider): a table bundled from litellm's
/// model_prices_and_context_window.json (see --prices), or OpenRouter's models JSON with
/// --prices; with no known price the cost is null and the summary says why.
///
/// Cline 2.x streams (`cline@2.18`: say/ask records) are read too: the run ends at
/// `completion_result` or fails at `api_req_failed`, the model is each record's `modelInfo`,
/// retries (`error_retry`) are counted. They carry no token counts: those are in 2.x's task
/// history on disk, which `aep-cline usage` reads; the summary's cost_note says so.
///
/// A malformed line is reported on standard error with its line number and the reason, and the
/// stream goes on; a line longer than 64 MiB is malformed too, read through without being held.
///
/// Exit status: 0 when every line was read; 3 when the stream was read to its end but some
/// lines were malformed and skipped (the output is otherwise complete); 1 when the input or
/// the prices file cannot be read, or the output cannot be written; 2 on a usage error. A
/// reader that closes the pipe early (`| head`) ends the command quietly with 0.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  cline --json \"fix the tests\" | aep-cline stream --summary
  aep-cline stream run.jsonl --json-summary | jq .cost.total
  aep-cline stream run.jsonl --aep > run.aep.jsonl
  curl -s https://openrouter.ai/api/v1/models > prices.json
  aep-cline stream run.jsonl --summary --prices prices.json > /dev/null")]
pub struct StreamArgs {
    /// The stream to read: a file written by `cline --json`, or `-` for standard input.
    #[arg(value_name = "FILE|-", default_value = "-")]
    pub input: PathBuf,

    /// After the stream, print a table of tokens and cost on standard error (standard output
    /// stays machine-readable).
    #[arg(long)]
    pub summary: bool,

    /// Print only the run summary, one JSON object on standard output, instead of the events:
    /// session, model, finish reason, event counts, token classes, cost (null when unknown)
    /// and cost_note.
    #[arg(long, conflicts_with = "aep")]
    pub json_summary: bool,

    /// Write the run as AEP 0.1 events instead of normalized events: run.started,
    /// tool.requested / tool.completed / tool.failed, error.raised, and run.finished (or
    /// run.cancelled / run.failed) with gen_ai.usage.* and cost. Capture is metadata: names,
    /// ids, digests and counts, no free text. AEP_HOST sets the host in `source`.
    #[arg(long)]
    pub aep: bool,

    /// With --aep: put the events on this AEP session instead of a fresh one. Cline 3.0.65's
    /// --json output names no session; pass the run's `sessionContext.rootSessionId` (the id the
    /// hooks and the hub use) to show this run beside the daemon's session. The stream stays
    /// its own emitter (`source` …/session/ID/stream, positions from 0), so the daemon's log and
    /// this output validate together (AEP-0001 §5.2).
    #[arg(long, value_name = "ID", requires = "aep")]
    pub session: Option<String>,

    /// Price the run with OpenRouter's models JSON, over the bundled list prices.
    #[arg(long, value_name = "FILE", long_help = prices_help())]
    pub prices: Option<PathBuf>,
}

/// `--prices`'s long help: names the bundled table, so `--help` tells how old its prices are.
/// (A constant, not the table's own count: clap builds this text on every start.)
fn prices_help() -> String {
    format!(
        "Price the run with OpenRouter's models JSON (the body of GET \
         https://openrouter.ai/api/v1/models), over the bundled list prices: {PRICES_SNAPSHOT}, \
         by the provider's own row (Anthropic, OpenAI, Bedrock, Vertex, Gemini, DeepSeek, xAI, \
         Mistral, Groq, ...) or, through a gateway (OpenRouter, Cline), the vendor's list price."
    )
}

/// Runs the command. Exits the process with status 3 itself when lines were malformed.
pub fn run(args: StreamArgs) -> anyhow::Result<()> {
    let mut prices = PriceTable::bundled();
    if let Some(path) = &args.prices {
        let json =
            std::fs::read_to_string(path).with_context(|| format!("cannot read the prices file {}", path.display()))?;
        prices
            .overlay_openrouter_json(&json)
            .with_context(|| format!("cannot use the prices file {}", path.display()))?;
    }
    let format = if args.json_summary {
        Format::Summary
    } else if args.aep {
        Format::Aep {
            host: crate::state::host(),
            session: args.session.clone(),
        }
    } else {
        Format::Events
    };

    let reader: Box<dyn BufRead> = if args.input.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        let file = File::open(&args.input).with_context(|| {
            format!(
                "cannot open {}: pass a file written by `cline --json`, or - for standard input",
                args.input.display()
            )
        })?;
        Box::new(BufReader::with_capacity(256 * 1024, file))
    };
    let mut out = BufWriter::with_capacity(256 * 1024, io::stdout().lock());
    let mut report = |e: &cline_stream::LineError| {
        let _ = writeln!(io::stderr().lock(), "aep-cline stream: {e}");
    };

    let summary = match cline_stream::run(reader, &mut out, &format, &prices, &mut report) {
        Ok(summary) => summary,
        Err(StreamError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(e).context("aep-cline stream stopped"),
    };
    let written = if args.json_summary {
        serde_json::to_writer(&mut out, &summary)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
    } else {
        out.flush()
    };
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("cannot write the output")?,
    }
    drop(out);
    if args.summary {
        let _ = io::stderr().lock().write_all(table(&summary).as_bytes());
    }
    if summary.lines.malformed > 0 {
        eprintln!(
            "aep-cline stream: {} malformed line(s) skipped (reported above); exit status {EXIT_MALFORMED}",
            summary.lines.malformed
        );
        std::process::exit(EXIT_MALFORMED);
    }
    Ok(())
}

/// The human summary: the run, then a table of token classes with their cost.
fn table(s: &Summary) -> String {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    let mut t = String::from("\ncline run summary\n");
    let mut row = |label: &str, value: String| t.push_str(&format!("  {label:<14} {value}\n"));
    row("session", or_dash(s.session.clone()));
    row(
        "model",
        match &s.model {
            Some(m) => format!(
                "{} ({}), OpenRouter id {}",
                or_dash(m.id.clone()),
                or_dash(m.provider.clone()),
                or_dash(m.openrouter_id.clone())
            ),
            None => "-".to_string(),
        },
    );
    let mut finish = vec![or_dash(s.finish_reason.clone())];
    finish.extend(s.iterations.map(|i| format!("{i} iteration(s)")));
    finish.extend(s.duration_ms.map(|ms| format!("{ms} ms")));
    if s.retries > 0 {
        finish.push(format!("{} retried request(s)", s.retries));
    }
    row("finish", finish.join(", "));
    if let Some(a) = &s.aborted {
        row(
            "aborted",
            format!("{}: {}", or_dash(a.reason.clone()), or_dash(a.message.clone())),
        );
    }
    let events: Vec<String> = s.events.iter().map(|(k, n)| format!("{n} {k}")).collect();
    row(
        "events",
        if events.is_empty() {
            "-".into()
        } else {
            events.join(", ")
        },
    );
    row(
        "lines",
        format!(
            "{} read, {} records, {} malformed",
            s.lines.total, s.lines.records, s.lines.malformed
        ),
    );

    t.push_str(&format!("\n  {:<22} {:>12} {:>14}\n", "tokens", "count", "cost"));
    let Some(tokens) = &s.tokens else {
        match &s.cost_note {
            Some(note) if note == cline_stream::LEGACY_USAGE_NOTE => t.push_str(&format!("  {note}\n")),
            _ => t.push_str("  no usage totals in the stream (no run_result)\n"),
        }
        return t;
    };
    let cost = s.cost.as_ref();
    // Written as every command writes them (`views::numbers`).
    let usd = |f: fn(&cline_stream::Cost) -> f64| cost.map_or("?".to_string(), |c| numbers::money(f(c), "USD"));
    let count = |n: Option<u64>| n.map_or("?".to_string(), numbers::tokens);
    let mut line = |label: &str, n: String, c: String| t.push_str(&format!("  {label:<22} {n:>12} {c:>14}\n"));
    line(
        "uncached input",
        count(tokens.uncached_input()),
        usd(|c| c.uncached_input),
    );
    line(
        "  of which cache writes",
        numbers::tokens(tokens.cache_creation()),
        String::new(),
    );
    line(
        "cached input",
        numbers::tokens(tokens.cached_input()),
        usd(|c| c.cached_input),
    );
    line("output", numbers::tokens(tokens.output()), usd(|c| c.output));
    let reasoning = tokens.reasoning().map_or("-".to_string(), numbers::tokens);
    line("reasoning", reasoning, "(not reported)".to_string());
    let total = tokens.total_input().map(|i| i + tokens.output());
    line("total", count(total), usd(|c| c.total));
    if let Some(sub) = &s.subagents {
        t.push_str(&format!(
            "  subagents: {} counted in the totals above ({} input, {} output tokens): each one's own totals added to the lead's, which Cline's aggregateUsage leaves out\n",
            sub.count,
            count(sub.tokens.total_input()),
            numbers::tokens(sub.tokens.output())
        ));
    }
    match (cost, &s.cost_note) {
        (Some(c), _) => t.push_str(&format!("  prices: {}\n", c.source)),
        (None, Some(note)) => t.push_str(&format!("  cost unknown: {note}\n")),
        (None, None) => {}
    }
    t
}
