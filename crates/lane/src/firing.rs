//! One hook firing, as the shim saw it and the daemon records it. The shim and the daemon share
//! these names so neither can drift from the other (and tests import them from here).
//!
//! - The delivery id is derived from the payload's bytes: Cline hands the same payload to every
//!   hook file of a firing (one per hook folder it reads), so copies delivered by several hook
//!   files, a retry from the spool and a request a hung daemon took late all carry one id and are
//!   recorded once (the `clinehook` extension in the log keeps that true across restarts).
//! - The firing time is the shim's wall clock when Cline started it: the Event `time` when the
//!   payload has none. Spooled firings are ordered by [`boot_ns`] instead, which never steps.
//! - The parent is the process that ran the hook (Cline, or its hub): when it dies, its open
//!   runs and its session end.
//! - The proof answers "is this the daemon that wrote the discovery file?": only the holder of
//!   the discovery token can compute it (HMAC-SHA256 keyed by the token, RFC 2104), so a program
//!   that took the port after a `kill -9` gets neither an answer the shim accepts nor a recorded
//!   hook.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// The words on the second line of every hook file `aep-cline install-hooks` writes: how
/// `doctor` and the machine record tell aep-cline's hook files from others.
pub const HOOK_FILE_MARK: &str = "aep-cline-hook:";

/// Header with the firing's delivery id.
pub const DELIVERY_HEADER: &str = "x-aep-cline-delivery";
/// Header with the firing time, nanoseconds since the Unix epoch.
pub const FIRED_HEADER: &str = "x-aep-cline-fired";
/// Header with the pid of the process that ran the hook, and its start time where the system
/// says (`<pid>:<start>`), so a pid reused later is not taken for it.
pub const PARENT_HEADER: &str = "x-aep-cline-parent";
/// Header with Cline's store as the hook's environment names it (the data folder:
/// `CLINE_DATA_DIR`, else `$CLINE_DIR/data`, else `~/.cline/data`; and the SDK's
/// `CLINE_SESSION_DATA_DIR` and `CLINE_DB_DATA_DIR` when set: `cline_usage::Layout::to_text`),
/// percent-encoded: where the daemon reads the session's usage from Cline's own store
/// ([`crate::lane::run_usage`]).
pub const CLINE_DATA_HEADER: &str = "x-aep-cline-data";
/// Response header proving the daemon holds the discovery token.
pub const PROOF_HEADER: &str = "x-aep-cline-proof";
/// Response header saying the answer's body carries a guard's `control` for Cline
/// ([`crate::guard`]): the shim prints it on stdout. Absent, the shim reads no body.
pub const CONTROL_HEADER: &str = "x-aep-cline-control";
/// Response header saying the call is held while a person answers (an `ask` rule): its value
/// is the request's Event id, which the shim then waits on (`GET /hook/wait/<id>`) for the
/// control to print. [`WAIT_MS_HEADER`] says for how long at most.
pub const WAIT_HEADER: &str = "x-aep-cline-wait";
/// How long (ms) the shim waits on a held call's answer; past it, it follows
/// `AEP_CLINE_ENFORCE`, as when the daemon is away.
pub const WAIT_MS_HEADER: &str = "x-aep-cline-wait-ms";
/// `AEP_CLINE_ENFORCE`, read by the shim from Cline's environment: `closed` makes a daemon the
/// shim cannot reach stop the tools Cline waits on, instead of letting them run (`open`, the
/// default: the agent is never held up by aep-cline being away).
pub const ENFORCE_VARIABLE: &str = "AEP_CLINE_ENFORCE";

/// How long the shim waits for the daemon's answer before it spools the firing (the rest of
/// its 250 ms budget is for the spool write). A request the daemon reads later than this after
/// its firing has been spooled by its shim, so the daemon puts it through the spool too.
pub const SHIM_WAIT: Duration = Duration::from_millis(200);

/// What the daemon knows of a firing besides its payload (every part optional: old shims and
/// spool files, and tests, may not say): read from a live request's headers, and kept with the
/// payload by the spool ([`crate::lane::spool::Spooled`]), one type for both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Firing {
    pub delivery: Option<String>,
    /// ns since the Unix epoch.
    pub fired: Option<u64>,
    pub parent: Option<u32>,
    /// The parent's start time ([`crate::lane::parent::start_time`]).
    pub parent_started: Option<u64>,
    /// Cline's data folder in the hook's environment ([`CLINE_DATA_HEADER`]).
    pub cline_data: Option<String>,
}

impl Firing {
    /// A firing named only by its delivery id.
    pub fn delivery(id: &str) -> Self {
        Firing {
            delivery: Some(id.to_string()),
            ..Firing::default()
        }
    }

    /// Whether the shim has given up on this request by now (it waits [`SHIM_WAIT`]).
    pub fn abandoned(&self, now_ns: u64) -> bool {
        self.fired
            .is_some_and(|f| now_ns.saturating_sub(f) > SHIM_WAIT.as_nanos() as u64)
    }
}

/// `<pid>` or `<pid>:<start>`, as the parent header carries it.
pub fn parent_header(pid: u32, started: Option<u64>) -> String {
    match started {
        Some(s) => format!("{pid}:{s}"),
        None => pid.to_string(),
    }
}

/// The parent header read back: `(pid, start)`.
pub fn parse_parent(value: &str) -> Option<(u32, Option<u64>)> {
    match value.split_once(':') {
        Some((pid, started)) => Some((pid.parse().ok()?, started.parse().ok())),
        None => Some((value.parse().ok()?, None)),
    }
}

/// The delivery id of a payload: 128 bits of its SHA-256, hex.
pub fn delivery_id(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..16])
}

/// What the daemon answers for `delivery`: HMAC-SHA256 keyed by its discovery token, over the
/// delivery id after a domain prefix (this key signs nothing else), hex.
pub fn proof(token: &str, delivery: &str) -> String {
    hmac_hex(token.as_bytes(), &[b"aep-cline-proof\0", delivery.as_bytes()])
}

/// HMAC-SHA256 of `parts`, concatenated, under `key`, hex.
fn hmac_hex(key: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    hex::encode(mac.finalize().into_bytes())
}

/// Bytes of a path kept as they are in [`CLINE_DATA_HEADER`]; everything else is escaped, so
/// any path fits in a header.
const PATH_KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'.')
    .remove(b'-')
    .remove(b'_');

/// The shim's value for [`CLINE_DATA_HEADER`]: Cline's store resolved from the hook's
/// environment as the Cline SDK resolves it (`cline_usage::Layout`: the data folder, and
/// `CLINE_SESSION_DATA_DIR` / `CLINE_DB_DATA_DIR` when an app sets them), absolute (a relative
/// `CLINE_DIR` is relative to the hook's working directory, the workspace). A few variable
/// reads and one short string: nothing is opened.
pub fn cline_data_header() -> Option<String> {
    let layout = cline_usage::Layout::from_env(None).absolute().ok()?;
    Some(percent_encoding::percent_encode(layout.to_text().as_bytes(), PATH_KEEP).to_string())
}

/// [`CLINE_DATA_HEADER`] read back; `None` when it is not a UTF-8 path.
pub fn decode_path(value: &str) -> Option<String> {
    let path = percent_encoding::percent_decode_str(value).decode_utf8().ok()?;
    (!path.is_empty()).then(|| path.into_owned())
}

/// Now, in nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Now on the clock that orders a boot's spooled firings: nanoseconds since boot, suspend
/// included (`CLOCK_BOOTTIME`). Unlike the wall clock it never steps (NTP, a user's `date`).
#[allow(unsafe_code)] // clock_gettime: see the SAFETY note inside
pub fn boot_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec it is given.
    let clock = if cfg!(target_os = "linux") {
        libc::CLOCK_BOOTTIME
    } else {
        libc::CLOCK_MONOTONIC
    };
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return 0;
    }
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// This boot's id (the kernel's random `boot_id`, 32 hex digits), or 32 zeros where the system
/// has none: [`boot_ns`] counts from this boot, so spooled firings are ordered per boot.
pub fn boot_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|id| id.trim().replace('-', ""))
            .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
            .unwrap_or_else(|| "0".repeat(32))
    })
}

/// RFC 3339 UTC with milliseconds for a firing time (the Event `time` when the payload has none).
pub fn rfc3339(ns: u64) -> String {
    let at = jiff::Timestamp::from_nanosecond(i128::from(ns)).unwrap_or_default();
    aep_core::time::millis(at)
}

/// Whether the payload is Cline 2.x's: a PascalCase `hookName` (3.x's are snake_case). 2.x
/// writes it second, after `clineVersion`, so only the payload's head is looked at: the shim
/// does not parse the body.
pub fn is_legacy(body: &[u8]) -> bool {
    const KEY: &[u8] = b"\"hookName\"";
    let head = &body[..body.len().min(512)];
    let Some(at) = head.windows(KEY.len()).position(|w| w == KEY) else {
        return false;
    };
    let mut rest = head[at + KEY.len()..]
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace());
    rest.next() == Some(b':') && rest.next() == Some(b'"') && rest.next().is_some_and(|b| b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proof_is_hmac_sha256_as_rfc_4231_pins_it() {
        // RFC 4231 §4.3, test case 2 (a key shorter than the block), split across parts.
        assert_eq!(
            hmac_hex(b"Jefe", &[b"what do ya want ", b"for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        assert_eq!(
            hmac_hex(
                &[0xaa; 131],
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        assert_eq!(
            proof("Jefe", "what do ya want for nothing?"),
            hmac_hex(b"Jefe", &[b"aep-cline-proof\0what do ya want for nothing?"])
        );
    }

    #[test]
    fn ids_follow_the_bytes_and_proofs_the_token() {
        assert_eq!(delivery_id(b"{}"), delivery_id(b"{}"));
        assert_ne!(delivery_id(b"{}"), delivery_id(b"{ }"));
        assert_eq!(delivery_id(b"{}").len(), 32);
        assert_ne!(proof("a", "d"), proof("b", "d"));
        assert_ne!(proof("a", "d"), proof("a", "e"));
        assert_eq!(proof("a", "d").len(), 64);
        assert_eq!(rfc3339(1_796_007_203_341_000_000), "2026-11-30T02:53:23.341Z");
        assert_eq!(parse_parent(&parent_header(42, Some(7))), Some((42, Some(7))));
        assert_eq!(parse_parent("42"), Some((42, None)));
        assert_eq!(parse_parent("x:1"), None);
        let odd = "/home/d ü/.cline/data";
        let encoded = percent_encoding::percent_encode(odd.as_bytes(), PATH_KEEP).to_string();
        assert!(encoded.is_ascii() && !encoded.contains(' '));
        assert_eq!(decode_path(&encoded).as_deref(), Some(odd));
    }
}
