//! Journal append benchmark: what `AEP_LOG_SYNC=1` (an `fdatasync` per hook's append) costs.
//!
//! Appends a typical logged Event (a `tool.completed` line, 700 bytes) to one session's log,
//! one append per hook as the lane does, with and without the sync, in a folder on the file
//! system given (default: the temporary folder; pass one on the disk the logs are on, a tmpfs
//! makes the sync free), and prints appends/s and the median and p99 append time.
//!
//! Run: `cargo bench -p aep-cline --bench journal_sync [APPENDS] [DIR]`.

use aep_cline::lane::Journal;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let appends: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    let base = args.get(1).map_or_else(std::env::temp_dir, Into::into);
    std::fs::create_dir_all(&base).expect("the bench folder");
    let dir = tempfile::tempdir_in(&base).expect("a scratch folder");
    let line = format!(
        r#"{{"aep":"0.1","id":"01JBENCH000000000000000000","type":"tool.completed","time":"2026-12-01T10:00:00.000Z","source":"aep://host/cline/session/bench","agent":"cline","session":"bench","seq":1,"epoch":0,"run":"01JRUN","capture":"metadata","data":{{"tool":{{"name":"read_file","call_id":"c1"}},"duration_ms":12,"status":"ok","result_digest":"sha256:{}"}},"clinehook":"{}"}}"#,
        "ab".repeat(32),
        "d".repeat(300)
    );
    println!(
        "{appends} appends of a {} byte line in {}",
        line.len(),
        dir.path().display()
    );
    for sync in [false, true] {
        let journal = Journal::new(dir.path()).with_sync(sync);
        let session = if sync { "synced" } else { "plain" };
        let mut times = Vec::with_capacity(appends);
        let start = Instant::now();
        for _ in 0..appends {
            let t = Instant::now();
            journal.append(session, std::slice::from_ref(&line)).expect("append");
            times.push(t.elapsed());
        }
        let total = start.elapsed();
        times.sort();
        let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
        println!(
            "AEP_LOG_SYNC={}: {:>8.0} appends/s   median {:>9.1?}   p99 {:>9.1?}",
            u8::from(sync),
            appends as f64 / total.as_secs_f64().max(f64::EPSILON),
            at(0.5),
            at(0.99).max(Duration::ZERO)
        );
    }
}
