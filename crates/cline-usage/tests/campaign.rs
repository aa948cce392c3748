//! A fault campaign over Cline's stores (issue #19): the real 3.x session files and the real
//! 2.18 task history (its `api_req_started` records included), each value in turn replaced by
//! an odd one (huge counts, wrong types, times past year 9999) or removed, or the file cut
//! short, then reported in every grouping. Reading never panics (debug builds check every
//! addition), and every problem names a file of the store. Deterministic: a fixed seed.

use cline_stream::PriceTable;
use cline_usage::report::{self, Group, Options};
use cline_usage::{Extensions, History};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

fn odd_value(rng: &mut Rng) -> Value {
    let choices = [
        Value::Null,
        json!(true),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(1e308),
        json!(0.5),
        json!(""),
        json!("+275760-09-13T00:00:00.000Z"),
        json!("9999999999999999"),
        json!([1, 2, 3, 4]),
        json!({}),
        json!({"inputTokens": u64::MAX, "outputTokens": u64::MAX}),
    ];
    choices[rng.below(choices.len())].clone()
}

/// Every place in `v` as a JSON pointer, the root excluded.
fn places(v: &Value, at: &str, out: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, c)| (format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), c))
            .collect(),
        Value::Array(a) => a.iter().enumerate().map(|(i, c)| (format!("{at}/{i}"), c)).collect(),
        _ => Vec::new(),
    };
    for (here, child) in children {
        out.push(here.clone());
        places(child, &here, out);
    }
}

/// One odd value somewhere in `v` (inside an `api_req_started` record's text too).
fn mutate(v: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    places(v, "", &mut all);
    let at = &all[rng.below(all.len())];
    let Some(slot) = v.pointer_mut(at) else { return };
    if let Some(mut inner) = slot.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok()) {
        if inner.is_object() && rng.below(2) == 0 {
            mutate(&mut inner, rng);
            *slot = Value::String(inner.to_string());
            return;
        }
    }
    *slot = odd_value(rng);
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Every JSON file under `dir`, relative to it.
fn json_files(dir: &Path, under: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            json_files(&path, under, out);
        } else if path.extension().is_some_and(|x| x == "json") {
            out.push(path.strip_prefix(under).unwrap().to_path_buf());
        }
    }
}

#[test]
fn odd_values_in_every_file_of_both_stores_are_reported_never_a_panic() {
    // One data folder holding a 3.x session and a 2.x task history, as Cline's does.
    let base = tempfile::tempdir().unwrap();
    for from in [
        data("captured").join("sessions"),
        data("cline2/a-cmd/state"),
        data("cline2/a-cmd/tasks"),
    ] {
        let ok = std::process::Command::new("cp")
            .arg("-r")
            .arg(&from)
            .arg(base.path())
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let mut files = Vec::new();
    json_files(base.path(), base.path(), &mut files);
    files.sort();
    let prices = PriceTable::bundled();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..200 {
        let store = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("cp")
            .arg("-r")
            .arg(format!("{}/.", base.path().display()))
            .arg(store.path())
            .status()
            .unwrap();
        assert!(ok.success());
        let file = store.path().join(&files[rng.below(files.len())]);
        let mut v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut v, &mut rng);
        }
        let mut bytes = serde_json::to_vec(&v).unwrap();
        if rng.below(8) == 0 {
            bytes.truncate(rng.below(bytes.len() + 1));
        }
        std::fs::write(&file, bytes).unwrap();
        let (history, opened) = History::open(store.path(), &Extensions::Dirs(Vec::new()));
        for group in [Group::Daily, Group::Session, Group::Model] {
            let opts = Options {
                group,
                since: None,
                until: None,
                timezone: jiff::tz::TimeZone::UTC,
                workspace: None,
                threads: 2,
            };
            let report = report::build(&history, &opts, &prices);
            for p in report.problems.iter().chain(&opened) {
                assert!(p.path.starts_with(store.path()), "round {round}: {p}");
            }
            if let Some(t) = &report.totals {
                assert!(t.tokens.total() >= t.tokens.output, "round {round}: {:?}", t.tokens);
            }
        }
    }
}
