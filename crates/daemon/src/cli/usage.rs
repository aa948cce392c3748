//! `aep-cline usage`: what Cline cost, over everything it has on disk (`cline_usage`), in the
//! manner of ccusage: by day, week, month, session or model. The reading and grouping live in
//! `cline-usage`; this is the command edge: arguments, the table, the JSON, the warnings.

use crate::views::numbers;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use cline_stream::{LITELLM_VERSION, PRICES_SNAPSHOT, SNAPSHOT_DATE};
use cline_usage::report::{self, Group, Options, Report, Row};
use cline_usage::{Extensions, History, Tokens};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GroupArg {
    Daily,
    Weekly,
    Monthly,
    Session,
    Model,
}

/// What Cline cost: tokens and USD by day, week, month, session or model, from Cline's own
/// history (every session on disk, also those from before aep-cline was installed).
///
/// Reads `$CLINE_DIR/data/sessions/*` (Cline 3.x: each assistant message's `metrics` is one
/// model call) and `db/sessions.db` (read-only) for subagents, which are counted with the
/// session that spawned them (Cline's own `aggregateUsage` leaves them out); the 2.x CLI's
/// `$CLINE_DIR/data/state/taskHistory.json` and `tasks/<id>/ui_messages.json` (each
/// `api_req_started` is one model call); and the VS Code extension's, the same files in the
/// editor's global storage `…/User/globalStorage/saoudrizwan.claude-dev` (VS Code, VS Code
/// Insiders, VSCodium, Cursor, Windsurf; Linux, macOS and remote servers), or --extension-dir. Token classes: uncached input
/// (cache writes included), cache reads, cache writes, output; total = every token once. Cost
/// from list prices for each call's model; a model with no known price shows its tokens and
/// "no price", never 0.
///
/// A file that cannot be used (truncated or corrupt JSON, a missing messages file, a locked
/// database) is named once on standard error and counted in the summary; its calls are left
/// out, never guessed. Sessions still running are marked `*`.
#[derive(Args, Debug)]
#[command(after_help = format!("Prices: the bundled {PRICES_SNAPSHOT}, or --prices FILE (OpenRouter's models JSON).

JSON (--json), stable: {{\"group\", \"timezone\", \"since\", \"until\", \"prices\": {{\"snapshot\", \"source\", \"litellm\"}},
  \"histories\": [{{\"kind\", \"path\"}}],
  \"rows\": [ROW], \"totals\": ROW|null, \"sessions_read\", \"problems\": [{{\"file\", \"problem\"}}],
  \"unpriced\": [{{\"provider\", \"model\", \"note\"}}]}}
ROW: {{\"key\", \"sessions\", \"running\", \"model_calls\", \"tokens\": TOKENS, \"cost_usd\": number|null,
  \"priced_cost_usd\", \"models\": [{{\"provider\", \"model\", \"model_calls\", \"tokens\", \"cost_usd\"}}],
  session rows also \"workspace\", \"app\" (the app on Cline's SDK: \"cli\", \"vscode\", \"jetbrains\", ...; null for 2.x), \"started\", \"subagents\": [{{\"agent\", \"parent_agent\", \"model_calls\", \"tokens\"}}],
  \"cline_cost_usd\": number|null (what Cline 2.x itself recorded, its totalCost; never in cost_usd)}}
TOKENS: {{\"input\", \"uncached_input\", \"cache_read\", \"cache_write\", \"output\", \"total\"}}

Examples:
  aep-cline usage                       # by day, in the local time zone
  aep-cline usage session --breakdown   # per session, each model and subagent below it
  aep-cline usage monthly --since 2026-01-01 --json | jq .totals.cost_usd"))]
pub struct UsageArgs {
    /// How to group: daily, weekly (weeks from Monday), monthly, session, model.
    #[arg(value_enum, default_value = "daily")]
    pub group: GroupArg,

    /// Only model calls on or after this date (YYYY-MM-DD or YYYYMMDD, in --timezone).
    #[arg(long, value_parser = parse_date)]
    pub since: Option<Date>,

    /// Only model calls on or before this date.
    #[arg(long, value_parser = parse_date)]
    pub until: Option<Date>,

    /// The time zone days are counted in: an IANA name (Europe/Paris) or UTC; default the
    /// system's.
    #[arg(long, value_name = "TZ")]
    pub timezone: Option<String>,

    /// Show each model inside each row (and, per session, each subagent under its parent).
    #[arg(long)]
    pub breakdown: bool,

    /// Only sessions whose workspace is this folder or inside it.
    #[arg(long, value_name = "PATH")]
    pub workspace: Option<PathBuf>,

    /// Print one JSON object (its shape is below) instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Cline's folder (default $CLINE_DIR, else ~/.cline); CLINE_DATA_DIR, when set, names the
    /// data folder itself, as for Cline.
    #[arg(long, value_name = "DIR")]
    pub cline_dir: Option<PathBuf>,

    /// The VS Code extension's history folder (`…/globalStorage/saoudrizwan.claude-dev`), instead
    /// of every editor's found on this machine; repeat for several, or pass `none` to read none.
    #[arg(long, value_name = "DIR")]
    pub extension_dir: Vec<PathBuf>,

    /// OpenRouter's models JSON (GET https://openrouter.ai/api/v1/models) over the bundled
    /// prices; the daemon reads the same file from AEP_CLINE_PRICES. Without it, the running
    /// daemon's AEP_CLINE_PRICES is used, so usage prices as the daemon does (and says so).
    #[arg(long, value_name = "FILE", env = "AEP_CLINE_PRICES")]
    pub prices: Option<PathBuf>,

    /// Where aep-cline's logs are: a session Cline's store still calls running is shown ended
    /// when its log says it ended (`aep-cline end`, the reconciler), as `sessions` shows it.
    #[command(flatten)]
    pub logs: super::client::LogArgs,

    /// Read every file of Cline's history, and neither use nor write the index of what was
    /// read ($XDG_CACHE_HOME/aep-cline/usage-index, else ~/.cache/aep-cline/), by which a run
    /// reads again only the 3.x files that changed or are new.
    #[arg(long)]
    pub no_cache: bool,
}

fn parse_date(s: &str) -> Result<Date, String> {
    let t = s.trim();
    let dashed = if t.len() == 8 && t.bytes().all(|b| b.is_ascii_digit()) {
        format!("{}-{}-{}", &t[..4], &t[4..6], &t[6..])
    } else {
        t.to_string()
    };
    dashed
        .parse::<Date>()
        .map_err(|e| format!("{s:?} is not a date (YYYY-MM-DD or YYYYMMDD): {e}"))
}

pub fn run(args: UsageArgs) -> anyhow::Result<()> {
    let timezone = match args.timezone.as_deref() {
        None => TimeZone::system(),
        Some(name) => TimeZone::get(name).with_context(|| {
            format!("--timezone {name:?} is not a time zone: use an IANA name such as Europe/Paris, or UTC")
        })?,
    };
    if let (Some(s), Some(u)) = (args.since, args.until) {
        if s > u {
            bail!("--since {s} is after --until {u}: nothing could match");
        }
    }
    let (prices_file, prices_from) = match &args.prices {
        Some(p) => (Some(p.clone()), Some("--prices or AEP_CLINE_PRICES")),
        None => match daemon_prices() {
            Some(p) => (Some(p), Some("the running daemon's AEP_CLINE_PRICES")),
            None => (None, None),
        },
    };
    let prices = match crate::prices::load(prices_file.as_deref()) {
        Ok(p) => p,
        // The daemon's file, gone or changed since it read it: the bundled table, said.
        Err(e) if args.prices.is_none() => {
            eprintln!("aep-cline usage: {e:#}; the bundled prices are used");
            crate::prices::load(None)?
        }
        Err(e) => return Err(e),
    };
    let prices_json = json!({
        "snapshot": SNAPSHOT_DATE, "source": PRICES_SNAPSHOT, "litellm": LITELLM_VERSION,
        "file": prices_file.as_ref().map(|p| p.display().to_string()), "from": prices_from,
    });
    let extensions = match &args.extension_dir[..] {
        [] => Extensions::Found,
        [none] if none.as_os_str() == "none" => Extensions::Dirs(Vec::new()),
        dirs => Extensions::Dirs(dirs.to_vec()),
    };
    let (history, mut opened) = History::open_at(cline_usage::Layout::from_env(args.cline_dir.as_deref()), &extensions);
    let group = match args.group {
        GroupArg::Daily => Group::Daily,
        GroupArg::Weekly => Group::Weekly,
        GroupArg::Monthly => Group::Monthly,
        GroupArg::Session => Group::Session,
        GroupArg::Model => Group::Model,
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
    let opts = Options {
        group,
        since: args.since,
        until: args.until,
        timezone: timezone.clone(),
        workspace: args
            .workspace
            .as_ref()
            .map(|w| std::path::absolute(w).unwrap_or_else(|_| w.clone())),
        threads,
    };
    let (mut report, notes) = indexed(&history, &opts, &prices, !args.no_cache);
    report.problems.append(&mut opened);
    if group == Group::Session {
        if let Ok(journal) = args.logs.journal() {
            ended_in_logs(&mut report, &journal);
        }
    }
    let tz_name = timezone.iana_name().unwrap_or("system").to_string();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        let mut doc = ReportJson::new(&report, &opts, &tz_name, &history);
        doc.prices = prices_json;
        serde_json::to_writer(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        write_table(&mut out, &report, group, args.breakdown, &history)?;
        if let (Some(file), Some(from)) = (&prices_file, prices_from) {
            writeln!(out, "prices: {} ({from}) over the bundled table.", file.display())?;
        }
    }
    out.flush()?;
    warn(&report);
    for n in notes {
        eprintln!("aep-cline usage: {n}");
    }
    Ok(())
}

/// The prices file the running daemon was started with (its own `AEP_CLINE_PRICES`, read from
/// its environment as `doctor` reads it), absolute; `None` without a running daemon or one.
fn daemon_prices() -> Option<PathBuf> {
    let state_dir = crate::state::state_dir().ok()?;
    let discovery = crate::state::discovery::Discovery::read(&state_dir)?;
    let settings = super::running::settings_of(discovery.pid)?;
    let (_, value) = settings.into_iter().find(|(k, _)| k == crate::prices::VARIABLE)?;
    let path = PathBuf::from(value);
    if path.is_absolute() {
        return Some(path);
    }
    // Relative to the daemon's folder, not this shell's.
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", discovery.pid)).ok()?;
    Some(cwd.join(path))
}

/// A session row Cline's store still calls running, whose aep-cline log says it ended (`aep-cline
/// end`, the reconciler): not running. The log of each such session is read, no other.
fn ended_in_logs(report: &mut Report, journal: &crate::lane::Journal) {
    for row in report.rows.iter_mut().filter(|r| r.running > 0) {
        if !cline_usage::is_plain_id(&row.key) {
            continue;
        }
        let path = journal.path(&row.key);
        if let Ok((Some(summary), _)) = crate::views::logs::summarize(&path) {
            if summary.state == crate::views::State::Ended {
                row.running = 0;
            }
        }
    }
    let still: u64 = report.rows.iter().map(|r| r.running).sum();
    if let Some(totals) = report.totals.as_mut() {
        totals.running = totals.running.min(still);
    }
}

/// The report, through the index of what was read when `cache` (and a cache folder is known):
/// the index is loaded, used for the 3.x store's files, and written back with this run's
/// findings (removed files drop out). Returns what to tell the user about the index: nothing
/// when it worked or was of another version; one line when it could not be used or kept.
fn indexed(history: &History, opts: &Options, prices: &cline_stream::PriceTable, cache: bool) -> (Report, Vec<String>) {
    use cline_usage::{index, index_file};
    let Some(dir) = cache.then(index_file::folder).flatten() else {
        return (report::build(history, opts, prices), Vec::new());
    };
    let mut notes = Vec::new();
    let (mut index, note) = index_file::load(&dir);
    notes.extend(note);
    let data = history.store.data_dir().to_path_buf();
    let first = index.stores.first().is_some_and(|(p, _)| *p == data);
    let old = index.take(&data);
    let known = old.len();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let (report, looks) =
        report::build_indexed(history, opts, prices, &|| index::Lookup::new(Some(&old), now_ns, true));
    // Nothing new, nothing gone, this store already first: the index on disk is this one.
    let hits: usize = looks.iter().map(|(h, _)| h.len()).sum();
    if first && hits == known && looks.iter().all(|(_, f)| f.is_empty()) {
        left_for_exit((index, old, looks));
        return (report, notes);
    }
    index.put(&data, index::next_entries(old, looks));
    if let Err(why) = index_file::save(&dir, &index) {
        notes.push(format!(
            "cannot keep the index of what was read in {} ({why}); the report is whole, the next run reads every file again (--no-cache does not try)",
            dir.display()
        ));
    }
    left_for_exit(index);
    (report, notes)
}

/// Leaves the index to the process's end instead of freeing it now: `usage` prints its report
/// and exits, and freeing an index of 10,000 sessions (a hundred thousand allocations, one by
/// one) cost a warm run about 5% of its CPU (docs/benchmarks.md).
fn left_for_exit<T>(index: T) {
    std::mem::forget(index);
}

/// Each problem once, then the count; each unpriced model once.
fn warn(report: &Report) {
    for p in &report.problems {
        eprintln!("aep-cline usage: {p}");
    }
    for (provider, model, _) in &report.unpriced {
        eprintln!(
            "aep-cline usage: no price known for model {:?} ({}): its tokens are counted, its cost shows \"no price\" (see --prices)",
            model.as_deref().unwrap_or("?"),
            provider.as_deref().unwrap_or("no provider")
        );
    }
    if !report.problems.is_empty() {
        eprintln!(
            "aep-cline usage: {} sessions read; {} files could not be used (above), their calls are not in the totals",
            report.sessions_read,
            report.problems.len()
        );
    }
}

/// A token count's JSON. Each `…Json` struct lists its fields in `serde_json::Map`'s order
/// (sorted keys), so the bytes are those of the `Value` the rows once were, written without
/// building one (10,000 session rows as `Value`s were a third of a warm run's time).
#[derive(serde::Serialize)]
struct TokensJson {
    cache_read: u64,
    cache_write: u64,
    input: Option<u64>,
    output: u64,
    total: u64,
    uncached_input: Option<u64>,
}

fn tokens_json(t: &Tokens) -> TokensJson {
    let c = t.classes();
    TokensJson {
        cache_read: t.cache_read,
        cache_write: t.cache_write,
        input: c.total_input(),
        output: t.output,
        total: t.total(),
        uncached_input: c.uncached_input(),
    }
}

#[derive(serde::Serialize)]
struct ModelJson<'a> {
    cost_usd: Option<f64>,
    model: &'a Option<String>,
    model_calls: u64,
    provider: &'a Option<String>,
    tokens: TokensJson,
}

#[derive(serde::Serialize)]
struct SubagentJson<'a> {
    agent: &'a str,
    model_calls: u64,
    parent_agent: &'a Option<String>,
    tokens: TokensJson,
}

/// One row; the fields wrapped in an outer `Option` are a session row's only.
#[derive(serde::Serialize)]
struct RowJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    app: Option<&'a Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cline_cost_usd: Option<Option<f64>>,
    cost_usd: Option<f64>,
    key: &'a str,
    model_calls: u64,
    models: Vec<ModelJson<'a>>,
    priced_cost_usd: f64,
    running: u64,
    sessions: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    started: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subagents: Option<Vec<SubagentJson<'a>>>,
    tokens: TokensJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<&'a Option<String>>,
}

fn row_json(r: &Row, group: Group) -> RowJson<'_> {
    let session = group == Group::Session;
    RowJson {
        app: session.then_some(&r.app),
        cline_cost_usd: session.then(|| r.cline_cost.map(cents)),
        cost_usd: r.cost().map(cents),
        key: &r.key,
        model_calls: r.calls,
        models: r
            .models
            .iter()
            .map(|m| ModelJson {
                cost_usd: m.cost.map(cents),
                model: &m.model,
                model_calls: m.calls,
                provider: &m.provider,
                tokens: tokens_json(&m.tokens),
            })
            .collect(),
        priced_cost_usd: cents(r.priced_cost()),
        running: r.running,
        sessions: r.sessions,
        started: session.then(|| {
            r.started_ms
                .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                .map(|t| t.to_string())
        }),
        subagents: session.then(|| {
            r.subagents
                .iter()
                .map(|s| SubagentJson {
                    agent: &s.agent,
                    model_calls: s.calls,
                    parent_agent: &s.parent_agent,
                    tokens: tokens_json(&s.tokens),
                })
                .collect()
        }),
        tokens: tokens_json(&r.tokens),
        workspace: session.then_some(&r.workspace),
    }
}

/// USD to a millionth of a dollar: exact to the cent, free of float noise.
fn cents(usd: f64) -> f64 {
    (usd * 1e6).round() / 1e6
}

/// The report's JSON, written as it is serialized: one row's `Value` at a time, never the
/// whole document (10,000 session rows were 100 MB as one `Value`). The fields are in
/// `serde_json::Map`'s order (sorted keys), so the bytes are those of the one `Value` it was.
#[derive(serde::Serialize)]
struct ReportJson<'a> {
    group: &'static str,
    histories: Value,
    prices: Value,
    problems: Value,
    rows: RowsJson<'a>,
    sessions_read: u64,
    since: Option<String>,
    timezone: &'a str,
    totals: Option<RowJson<'a>>,
    unpriced: Value,
    until: Option<String>,
}

impl<'a> ReportJson<'a> {
    fn new(report: &'a Report, opts: &Options, tz: &'a str, history: &History) -> Self {
        ReportJson {
            group: opts.group.name(),
            histories: history
                .folders()
                .into_iter()
                .map(|(kind, path)| json!({"kind": kind, "path": path}))
                .collect(),
            prices: json!({"snapshot": SNAPSHOT_DATE, "source": PRICES_SNAPSHOT, "litellm": LITELLM_VERSION}),
            problems: report
                .problems
                .iter()
                .map(|p| json!({"file": p.path, "problem": p.kind.to_string()}))
                .collect(),
            rows: RowsJson(&report.rows, opts.group),
            sessions_read: report.sessions_read,
            since: opts.since.map(|d| d.to_string()),
            timezone: tz,
            totals: report.totals.as_ref().map(|r| row_json(r, opts.group)),
            unpriced: report
                .unpriced
                .iter()
                .map(|(p, m, n)| json!({"provider": p, "model": m, "note": n}))
                .collect(),
            until: opts.until.map(|d| d.to_string()),
        }
    }
}

struct RowsJson<'a>(&'a [Row], Group);

impl serde::Serialize for RowsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|r| row_json(r, self.1)))
    }
}

/// `text`, or its last `width - 1` characters after `…` when it is longer than `width`.
fn tail(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    let kept: String = text.chars().skip(n - (width - 1)).collect();
    format!("…{kept}")
}

/// A row's cost: priced in full, or the priced part marked `+?` (the footnote says why), or
/// `no price` when nothing in it has one.
fn cost_cell(cost: Option<f64>, priced: f64, any_priced: bool) -> String {
    match cost {
        Some(c) => numbers::money(c, "USD"),
        None if any_priced => format!("{}+?", numbers::money(priced, "USD")),
        None => "no price".to_string(),
    }
}

fn row_cost(r: &Row) -> String {
    cost_cell(r.cost(), r.priced_cost(), r.models.iter().any(|m| m.cost.is_some()))
}

/// Fits 80 columns: a 20-column key, five counts of 8, the cost in 9.
fn line(out: &mut impl Write, key: &str, t: &Tokens, cost: &str) -> std::io::Result<()> {
    let c = t.classes();
    let uncached = c.uncached_input().map_or("?".to_string(), numbers::tokens);
    // A long name (a model's) is written whole on a line of its own, never cut.
    let key = if key.chars().count() > 20 {
        writeln!(out, "{key}")?;
        String::new()
    } else {
        key.to_string()
    };
    let text = format!(
        "{key:<20} {uncached:>8} {:>8} {:>8} {:>8} {:>9} {:>9}",
        numbers::tokens(t.cache_read),
        numbers::tokens(t.cache_write),
        numbers::tokens(t.output),
        numbers::tokens(t.total()),
        cost
    );
    writeln!(out, "{}", text.trim_end())
}

fn write_table(
    out: &mut impl Write,
    report: &Report,
    group: Group,
    breakdown: bool,
    history: &History,
) -> std::io::Result<()> {
    let first = match group {
        Group::Daily => "DAY",
        Group::Weekly => "WEEK (MONDAY)",
        Group::Monthly => "MONTH",
        Group::Session => "SESSION",
        Group::Model => "MODEL",
    };
    if report.rows.is_empty() {
        let folders: Vec<String> = history.folders().iter().map(|(_, p)| p.display().to_string()).collect();
        writeln!(out, "no model calls found in {}", folders.join(", "))?;
        return Ok(());
    }
    writeln!(
        out,
        "{first:<20} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "INPUT", "CACHE_RD", "CACHE_WR", "OUTPUT", "TOTAL", "COST"
    )?;
    for r in &report.rows {
        let key = if r.running > 0 && group == Group::Session {
            format!("{}*", r.key)
        } else {
            r.key.clone()
        };
        line(out, &key, &r.tokens, &row_cost(r))?;
        if breakdown && group != Group::Model {
            if let Some(app) = &r.app {
                writeln!(out, "  app {}", super::show::app_name(app))?;
            }
            for m in &r.models {
                line(
                    out,
                    &format!("  {}", m.model.as_deref().unwrap_or("?")),
                    &m.tokens,
                    &cost_cell(m.cost, 0.0, false),
                )?;
            }
            for s in &r.subagents {
                // A subagent's cost is inside its session's models above.
                line(out, &format!("  └ {}", tail(&s.agent, 16)), &s.tokens, "")?;
            }
        }
        if let (Group::Session, Some(c)) = (group, r.cline_cost) {
            // Beside ours, labelled: Cline 2.x bills the cached tokens twice with the
            // OpenAI-compatible provider, so the two can differ.
            writeln!(
                out,
                "  {:<64} {:>9}",
                "Cline's own record (2.x totalCost)",
                numbers::money(c, "USD")
            )?;
        }
    }
    if let Some(t) = &report.totals {
        writeln!(out, "{}", "─".repeat(79))?;
        line(out, "TOTAL", &t.tokens, &row_cost(t))?;
    }
    writeln!(
        out,
        "INPUT = uncached input incl. cache writes; TOTAL = every token once.{}",
        if group == Group::Session && report.rows.iter().any(|r| r.running > 0) {
            " * = still running."
        } else {
            ""
        }
    )?;
    // Each footnote only with a row it explains.
    let cells: Vec<String> = report.rows.iter().chain(report.totals.iter()).map(row_cost).collect();
    if cells.iter().any(|c| c.ends_with("+?")) {
        writeln!(
            out,
            "+? = the priced part: some models have no price (named on stderr)."
        )?;
    }
    if cells.iter().any(|c| c == "no price") {
        writeln!(
            out,
            "no price = none of its models has a price (named on stderr; --prices adds one)."
        )?;
    }
    Ok(())
}
