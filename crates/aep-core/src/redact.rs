//! The redaction pipeline (AEP-0003 §9.4) for text and JSON values.
//!
//! Free text gated at `redacted` passes through this pipeline before it leaves the adapter.
//! The spec's list is a floor (rule (a)/(b) leaks are security incidents), so the pipeline
//! redacts more where the AEP redaction corpus (`conformance/fixtures/redaction`) pins it:
//! quoted JSON credentials, values on the next line, lowercase `bearer`, bare vendor tokens,
//! bare AWS secret access keys, any `/home/<user>` or `/Users/<user>`, credential-named object
//! keys. It stays precise where
//! the corpus pins that too: "the bearer of good news" and version numbers pass untouched.
//!
//! A [`Redactor`] compiles the operator's patterns once; the fixed patterns are compiled once
//! per process. Redaction is idempotent: redacting its own output changes nothing (markers are
//! never matched again, and the pipeline runs to a fixed point).

use regex::{Captures, Match, Regex};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::LazyLock;

/// What rules (a) and (b) leave in place of a secret (AEP-0003 §9.4a).
pub const SECRET: &str = "[REDACTED:secret]";
/// What rule (d) leaves in place of an email address or a phone number (AEP-0003 §9.4d).
pub const PII: &str = "[REDACTED:pii]";

/// Rounds of [`Redactor::redact_text`] before it stops looking for a fixed point; real text
/// needs two at most.
const MAX_ROUNDS: usize = 4;

/// Either marker. Patterns built from operator input try it first, so an operator secret such
/// as `pii` or `REDACTED` can never rewrite a marker already in the text.
const MARKER: &str = r"(?P<marker>\[REDACTED:(?:secret|pii)\])";

/// Names whose assigned value is a credential: the §9.4a list (`password|passwd|secret|
/// api[_-]?key|token`) plus the compound names it misses as a suffix (`AWS_SECRET_ACCESS_KEY`,
/// `SECRET_KEY`). A name must END with one of them, so `max_tokens` and `token_count` are
/// counts, not credentials.
const CREDENTIAL_NAMES: &str =
    r"password|passwd|passphrase|secret|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|token";

/// An assigned value: a quoted string (with any shell-concatenated tail, `"abc"def`), or the
/// §9.4a floor's `\S+`.
const ASSIGNED_VALUE: &str =
    r#"(?:"(?P<dq>(?:[^"\\\n]|\\.)*)"[^\s,;)\]}]*|'(?P<sq>[^'\n]*)'[^\s,;)\]}]*|(?P<bare>\S+))"#;

/// Rule (a), secrets replaced whole: PEM blocks (to their END line, or to the end of a
/// truncated text), AWS access key ids, JWTs, and the vendor tokens the corpus pins bare
/// (GitHub, GitLab, Slack, OpenAI/Anthropic `sk-`, Stripe, Google).
static SECRET_TOKENS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"-----BEGIN [A-Z0-9 ]+-----(?s:.*?)(?:-----END [A-Z0-9 ]+-----|\z)",
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}",
        r"|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
        r"|gh[pousr]_[A-Za-z0-9]{20,}",
        r"|github_pat_[A-Za-z0-9_]{20,}",
        r"|glpat-[A-Za-z0-9_-]{20,}",
        r"|xox[a-z]-[A-Za-z0-9-]{10,}",
        r"|\bsk-[A-Za-z0-9_-]{20,}",
        r"|\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",
        r"|AIza[A-Za-z0-9_-]{35}",
    ))
    .expect("static regex")
});

/// Rule (a) hardening: a bare AWS secret access key, 40 characters of base64's alphabet
/// without padding. Every maximal run of that alphabet is a candidate; [`is_aws_secret_key`]
/// decides, so hashes, paths and identifiers pass.
static BARE_SECRET_KEY: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z0-9/+]{40,}").expect("static regex"));

/// Rule (a), `Bearer`-prefixed tokens (RFC 6750 `b64token`); the scheme is case-insensitive
/// (corpus), so which matches are tokens is decided by [`is_bearer_token`].
static BEARER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?P<scheme>bearer)(?P<gap>\s+)(?P<token>[A-Za-z0-9._~+/-]+=*)").expect("static regex")
});

/// Rule (a) hardening: an `Authorization` header's credential whatever its scheme (`Basic`).
static AUTHORIZATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?i)(?P<lead>\b(?:proxy-)?authorization(?:\\?["'])?\s*[=:]\s*(?:\\?["'])?"#,
        r"(?:(?:basic|bearer|digest|negotiate|ntlm|token)\s+)?)",
        r#"[^\s"'\\,;]+"#,
    ))
    .expect("static regex")
});

/// Rule (a) hardening: the password in a URL's userinfo (`https://user:pw@host`).
static URL_PASSWORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?P<lead>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s/@]+@").expect("static regex"));

/// Rule (a): `name = value` / `name: value` / `"name": "value"`, value possibly on the next line.
/// A secret marker in the name's place counts as a credential name: an operator value used as
/// a name (replaced first, see [`Redactor::redact_text`]) makes what it names secret too.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i)(?P<lead>(?:{CREDENTIAL_NAMES}|\[REDACTED:secret\])(?:\\?["'])?\s*[=:]\s*){ASSIGNED_VALUE}"#
    ))
    .expect("static regex")
});

/// Rule (a) hardening: a command-line flag's separate argument (`--password hunter2`).
static FLAG_ARGUMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)(?P<lead>(?:^|\s)--?[a-z0-9_-]*(?:{CREDENTIAL_NAMES})\s+){ASSIGNED_VALUE}"
    ))
    .expect("static regex")
});

/// The same flag as a whole argv element: the element after it is its value.
static CREDENTIAL_FLAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"(?i)^--?[a-z0-9_-]*(?:{CREDENTIAL_NAMES})$")).expect("static regex"));

/// JSON object keys whose value is a credential whatever it looks like (corpus value cases);
/// keys themselves are structural and kept.
static CREDENTIAL_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)(?:{CREDENTIAL_NAMES}|authorization|cookie|credentials?)$"
    ))
    .expect("static regex")
});

/// Rule (c) hardening (corpus): any user's home, not only the configured one.
static ANY_HOME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"/(?:home|Users)/[^/\s"'`<>|:;,()\[\]{}~]+"#).expect("static regex"));

/// Rule (d): email addresses.
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}").expect("static regex")
});

/// Rule (d): phone numbers in the shapes that are not also version numbers, dates or counts:
/// international (`+1 (555) 123-4567`), `(555) 123-4567`, `555-123-4567`, `555.123.4567`.
/// Bare digit runs are never phones (timestamps, ids); [`is_phone`] checks the rest.
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\+[0-9]{1,3}(?:[ .-]?\([0-9]{1,4}\)|[ .-]?[0-9]{1,4})(?:[ .-]?[0-9]{2,4}){1,4}",
        r"|\([0-9]{3}\)[ .-]?[0-9]{3}[ .-][0-9]{4}",
        r"|[0-9]{3}-[0-9]{3}-[0-9]{4}",
        r"|[0-9]{3}\.[0-9]{3}\.[0-9]{4}",
    ))
    .expect("static regex")
});

/// What the operator adds to the pipeline (AEP-0003 §9.4b–d).
#[derive(Clone, PartialEq, Eq)]
pub struct RedactOptions {
    /// The user's home directory, replaced by `~` (§9.4c); the daemon passes `$HOME`. Any
    /// `/home/<user>` and `/Users/<user>` is replaced whether or not it is set.
    pub home: Option<String>,
    /// Environment variable or config key names the operator lists as secret (§9.4b): their
    /// assigned values in text (`NAME=value`, `"NAME": "value"`) and their values under a JSON
    /// key of that name are replaced. Matched case-insensitively.
    pub secret_names: Vec<String>,
    /// Literal secret values (§9.4b), e.g. the current values of the `secret_names` variables,
    /// replaced wherever they occur. Matched exactly; empty strings are ignored.
    pub secret_values: Vec<String>,
    /// Rule (d), emails and phone numbers: on by default, operator-disableable (§9.4d).
    pub pii: bool,
}

impl Default for RedactOptions {
    fn default() -> Self {
        RedactOptions {
            home: None,
            secret_names: Vec::new(),
            secret_values: Vec::new(),
            pii: true,
        }
    }
}

/// Never prints the secret values themselves: options end up in logs.
impl fmt::Debug for RedactOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedactOptions")
            .field("home", &self.home)
            .field("secret_names", &self.secret_names)
            .field("secret_values", &format_args!("<{} values>", self.secret_values.len()))
            .field("pii", &self.pii)
            .finish()
    }
}

/// Why [`Redactor::new`] refused its options.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedactError {
    #[error("home {0:?} cannot be redacted to `~` (AEP-0003 §9.4c): give an absolute directory other than `/`, such as $HOME, or no home")]
    Home(String),
    #[error("the operator's secret {list} cannot be built into a matcher ({reason}): list fewer or shorter entries")]
    TooLarge { list: &'static str, reason: String },
}

/// The AEP-0003 §9.4 pipeline with the operator's options compiled in; cheap to share.
#[derive(Clone)]
pub struct Redactor {
    /// §9.4b literal values, longest first so a longer secret wins over its own prefix.
    secret_values: Option<Regex>,
    /// §9.4b assignments to the operator's names.
    secret_names: Option<Regex>,
    /// The operator's names, lowercased, as JSON keys.
    secret_keys: HashSet<String>,
    /// §9.4c the configured home, boundaries checked by [`is_path_boundary`].
    home: Option<Regex>,
    pii: bool,
}

/// Never prints the compiled patterns: they contain the secret values.
impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secret_names", &self.secret_keys.len())
            .field("secret_values", &self.secret_values.is_some())
            .field("home", &self.home.is_some())
            .field("pii", &self.pii)
            .finish()
    }
}

impl Redactor {
    /// Compiles the operator's patterns once, escaping every name and value (they are
    /// literals, never regex syntax).
    pub fn new(options: RedactOptions) -> Result<Redactor, RedactError> {
        let mut values: Vec<&str> = options
            .secret_values
            .iter()
            .map(String::as_str)
            .filter(|value| !value.is_empty())
            .collect();
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
        values.dedup();
        let secret_values = match values.as_slice() {
            [] => None,
            values => {
                let alternatives: Vec<String> = values.iter().map(|value| regex::escape(value)).collect();
                Some(compile("values", &format!("{MARKER}|{}", alternatives.join("|")))?)
            }
        };

        let names: Vec<&str> = options
            .secret_names
            .iter()
            .map(String::as_str)
            .filter(|name| !name.is_empty())
            .collect();
        let secret_names = match names.as_slice() {
            [] => None,
            names => {
                // A word boundary, where the name starts with a word character, keeps `KEY` from
                // matching the end of `MONKEY`.
                let alternatives: Vec<String> = names
                    .iter()
                    .map(|name| {
                        let boundary = if name.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                            r"\b"
                        } else {
                            ""
                        };
                        format!("{boundary}{}", regex::escape(name))
                    })
                    .collect();
                let pattern = format!(
                    r#"{MARKER}|(?i)(?P<lead>(?:{})(?:\\?["'])?\s*[=:]\s*){ASSIGNED_VALUE}"#,
                    alternatives.join("|")
                );
                Some(compile("names", &pattern)?)
            }
        };
        let secret_keys = names.iter().map(|name| name.to_lowercase()).collect();

        let home = match options.home {
            None => None,
            Some(home) => {
                let trimmed = home.trim_end_matches(['/', '\\']);
                let absolute = home.starts_with('/') || is_windows_absolute(&home);
                if !absolute || trimmed.is_empty() || trimmed.ends_with(':') {
                    return Err(RedactError::Home(home));
                }
                Some(compile("home", &format!("{MARKER}|{}", regex::escape(trimmed)))?)
            }
        };

        Ok(Redactor {
            secret_values,
            secret_names,
            secret_keys,
            home,
            pii: options.pii,
        })
    }

    /// Runs the pipeline over free text.
    ///
    /// Order (AEP-0003 §9.4): the operator's literal values go first, so no generic pattern
    /// can split one and leave a fragment behind (a secret `DATABASE_URL` value would otherwise
    /// lose only its password to rule (a) and leak its user and host); a value that stood where
    /// a name goes still marks what follows as secret. Then (a) secrets, (b) assignments to the
    /// operator's names, (c) home prefixes, (d) PII.
    /// (a) before (d) is what keeps `password=foo@bar.com` a secret rather than an email.
    ///
    /// The pipeline runs again on its own output until nothing changes, because a later rule
    /// can complete an earlier rule's match (`https://u:/home/x…@` only has a URL password
    /// once `/home/x` is `~`). Text with nothing to redact is scanned once; in practice the
    /// second round finds nothing.
    pub fn redact_text(&self, text: &str) -> String {
        let mut out = match self.redact_round(text) {
            Cow::Borrowed(_) => return text.to_owned(),
            Cow::Owned(out) => out,
        };
        for _ in 1..MAX_ROUNDS {
            match self.redact_round(&out) {
                Cow::Borrowed(_) => break,
                Cow::Owned(next) => out = next,
            }
        }
        out
    }

    /// One pass of the pipeline; `Borrowed` when it changed nothing.
    fn redact_round<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        if let Some(values) = &self.secret_values {
            out = rewrite(out, |s| {
                values.replace_all(s, |caps: &Captures| keep_marker_or(caps, || SECRET.to_owned()))
            });
        }

        // (a) Whole-match tokens first: a PEM body or a JWT must not be cut up by the rest.
        out = rewrite(out, |s| SECRET_TOKENS.replace_all(s, SECRET));
        out = rewrite(out, |s| {
            BEARER.replace_all(s, |caps: &Captures| {
                if is_bearer_token(&caps["scheme"], &caps["token"]) {
                    format!("{}{}{SECRET}", &caps["scheme"], &caps["gap"])
                } else {
                    caps[0].to_owned()
                }
            })
        });
        out = rewrite(out, |s| {
            AUTHORIZATION.replace_all(s, |caps: &Captures| format!("{}{SECRET}", &caps["lead"]))
        });
        out = rewrite(out, |s| {
            URL_PASSWORD.replace_all(s, |caps: &Captures| format!("{}{SECRET}@", &caps["lead"]))
        });
        out = rewrite(out, |s| ASSIGNMENT.replace_all(s, redact_assignment));
        out = rewrite(out, |s| FLAG_ARGUMENT.replace_all(s, redact_assignment));
        out = rewrite(out, |s| {
            BARE_SECRET_KEY.replace_all(s, |caps: &Captures| {
                let found = caps.get_match();
                if is_aws_secret_key(s, found) {
                    SECRET
                } else {
                    found.as_str()
                }
                .to_owned()
            })
        });

        // (b)
        if let Some(names) = &self.secret_names {
            out = rewrite(out, |s| {
                names.replace_all(s, |caps: &Captures| keep_marker_or(caps, || redact_assignment(caps)))
            });
        }

        // (c) The configured home only as a whole path prefix: `/root` is not in `/srv/rooted`.
        if let Some(home) = &self.home {
            out = rewrite(out, |s| {
                home.replace_all(s, |caps: &Captures| {
                    keep_marker_or(caps, || {
                        let (before, after) = neighbours(s, caps.get_match());
                        let bounded = is_path_boundary(before) && is_path_boundary(after);
                        if bounded { "~" } else { &caps[0] }.to_owned()
                    })
                })
            });
        }
        out = rewrite(out, |s| ANY_HOME.replace_all(s, "~"));

        // (d)
        if self.pii {
            out = rewrite(out, |s| EMAIL.replace_all(s, PII));
            out = rewrite(out, |s| {
                PHONE.replace_all(s, |caps: &Captures| {
                    if is_phone(s, caps.get_match()) { PII } else { &caps[0] }.to_owned()
                })
            });
        }
        out
    }

    /// Runs the pipeline over a JSON value: every string through [`Redactor::redact_text`],
    /// object keys too (a key is free text: `{"AKIA…": 2}`, `{"bob@example.org": 1}`); under
    /// a credential-named key (or one of the operator's secret names) the value is replaced
    /// whatever it is; in an array, the element after a credential flag
    /// (`["--password", "hunter2"]`) is replaced. Numbers, booleans and null are kept. Two keys
    /// that redact to the same text both stay, the later one suffixed `#2`, `#3`…
    pub fn redact_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.redact_text(text)),
            Value::Array(items) => {
                let mut after_flag = false;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(match item {
                        Value::String(_) if after_flag => Value::String(SECRET.to_owned()),
                        _ => self.redact_value(item),
                    });
                    after_flag = matches!(item, Value::String(text) if CREDENTIAL_FLAG.is_match(text));
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                let mut out = serde_json::Map::new();
                for (key, value) in map {
                    let value = if self.is_credential_key(key) {
                        Value::String(SECRET.to_owned())
                    } else {
                        self.redact_value(value)
                    };
                    let redacted = self.redact_text(key);
                    let mut name = redacted.clone();
                    // A redacted key never takes the place of another key.
                    let mut n = 1;
                    while out.contains_key(&name) || (name != *key && map.contains_key(&name)) {
                        n += 1;
                        name = format!("{redacted}#{n}");
                    }
                    out.insert(name, value);
                }
                Value::Object(out)
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        }
    }

    fn is_credential_key(&self, key: &str) -> bool {
        CREDENTIAL_KEY.is_match(key) || (!self.secret_keys.is_empty() && self.secret_keys.contains(&key.to_lowercase()))
    }
}

fn compile(list: &'static str, pattern: &str) -> Result<Regex, RedactError> {
    Regex::new(pattern).map_err(|err| RedactError::TooLarge {
        list,
        // Never the pattern itself: it contains the secrets.
        reason: match err {
            regex::Error::CompiledTooBig(limit) => format!("over the {limit}-byte limit"),
            _ => "not compilable".to_owned(),
        },
    })
}

/// Applies one rewriting step, allocating only when the step changed something (a step that
/// keeps every match it found, such as prose after `bearer`, changes nothing).
fn rewrite<'a>(text: Cow<'a, str>, step: impl for<'t> FnOnce(&'t str) -> Cow<'t, str>) -> Cow<'a, str> {
    let changed = match step(&text) {
        Cow::Owned(changed) if changed != *text => Some(changed),
        _ => None,
    };
    match changed {
        Some(changed) => Cow::Owned(changed),
        None => text,
    }
}

/// A marker already in the text stays as it is; anything else becomes `replacement`.
fn keep_marker_or(caps: &Captures, replacement: impl FnOnce() -> String) -> String {
    match caps.name("marker") {
        Some(marker) => marker.as_str().to_owned(),
        None => replacement(),
    }
}

/// Keeps the name and separator of a credential assignment and the quotes of its value.
fn redact_assignment(caps: &Captures) -> String {
    let lead = &caps["lead"];
    if caps.name("dq").is_some() {
        format!("{lead}\"{SECRET}\"")
    } else if caps.name("sq").is_some() {
        format!("{lead}'{SECRET}'")
    } else {
        format!("{lead}{SECRET}")
    }
}

/// `Bearer <token>` as §9.4a writes it is always a token. Any other casing is a token only if
/// it looks like one (long, or with a digit or punctuation), so prose such as "the bearer of
/// good news" passes (corpus).
fn is_bearer_token(scheme: &str, token: &str) -> bool {
    scheme == "Bearer" || token.len() >= 20 || (token.len() >= 6 && token.bytes().any(|b| !b.is_ascii_alphabetic()))
}

/// Whether a run of base64 characters is an AWS secret access key: exactly 40 (not followed by
/// `=` padding), with a digit, a lower- and an upper-case letter (a git hash has no upper case,
/// a word no digit), and either random-looking (one to three of `/` `+`, not at its ends, and
/// at least six letters of each case: a random key has about one symbol and sixteen of each;
/// a path has more slashes, or few capitals), or with `aws` or `secret` written shortly before
/// it (a redacted access key id leaves `[REDACTED:secret]`).
fn is_aws_secret_key(text: &str, run: Match) -> bool {
    let key = run.as_str();
    let (_, after) = neighbours(text, run);
    let shaped = key.len() == 40
        && after != Some('=')
        && key.bytes().any(|b| b.is_ascii_digit())
        && key.bytes().any(|b| b.is_ascii_lowercase())
        && key.bytes().any(|b| b.is_ascii_uppercase());
    if !shaped {
        return false;
    }
    let count = |class: fn(&u8) -> bool| key.bytes().filter(class).count();
    let symbols = count(|b| matches!(b, b'/' | b'+'));
    let random = (1..=3).contains(&symbols)
        && !key.starts_with('/')
        && !key.ends_with('/')
        && count(u8::is_ascii_uppercase) >= 6
        && count(u8::is_ascii_lowercase) >= 6;
    random || {
        let mut from = run.start().saturating_sub(100);
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        let before = text[from..run.start()].to_ascii_lowercase();
        before.contains("aws") || before.contains("secret")
    }
}

/// Whether the character beside a home path ends it: not part of a file name, and not `~` or
/// `]`, which earlier replacements leave (keeps a second pass from changing anything).
fn is_path_boundary(neighbour: Option<char>) -> bool {
    neighbour.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '~' | ']')))
}

/// Whether a phone-shaped match is a phone number: 7 to 15 digits (E.164 allows 15), not part
/// of a longer number or word, and not touching a marker (a letter, digit or bracket beside it).
fn is_phone(text: &str, phone: Match) -> bool {
    let (before, after) = neighbours(text, phone);
    let bounded = |neighbour: Option<char>| neighbour.is_none_or(|c| !(c.is_alphanumeric() || "_[]".contains(c)));
    let digits = phone.as_str().bytes().filter(u8::is_ascii_digit).count();
    bounded(before) && bounded(after) && (7..=15).contains(&digits)
}

/// The characters just before and just after a match.
fn neighbours(text: &str, found: Match) -> (Option<char>, Option<char>) {
    (
        text[..found.start()].chars().next_back(),
        text[found.end()..].chars().next(),
    )
}

fn is_windows_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && matches!(bytes[2], b'\\' | b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn redactor(options: RedactOptions) -> Redactor {
        Redactor::new(options).expect("valid options")
    }

    #[test]
    fn bearer_as_written_by_the_spec_is_always_a_token() {
        let r = redactor(RedactOptions::default());
        assert_eq!(
            r.redact_text("Authorization: Bearer abcdef"),
            format!("Authorization: Bearer {SECRET}")
        );
        assert_eq!(r.redact_text("bearer of good news"), "bearer of good news");
        assert_eq!(
            r.redact_text("BEARER abcdefghijklmnopqrstuvwxyz"),
            format!("BEARER {SECRET}")
        );
    }

    #[test]
    fn authorization_header_is_redacted_whatever_its_scheme() {
        let r = redactor(RedactOptions::default());
        assert_eq!(
            r.redact_text("Authorization: Basic dXNlcjpwYXNz"),
            format!("Authorization: Basic {SECRET}")
        );
        assert_eq!(
            r.redact_text("authorization: bearer short"),
            format!("authorization: bearer {SECRET}")
        );
    }

    #[test]
    fn url_password_is_redacted_and_the_host_kept() {
        let r = redactor(RedactOptions::default());
        assert_eq!(
            r.redact_text("git clone https://bot:s3cret@git.example.test/x.git"),
            format!("git clone https://bot:{SECRET}@git.example.test/x.git")
        );
        assert_eq!(
            r.redact_text("https://example.test:8080/path"),
            "https://example.test:8080/path"
        );
    }

    #[test]
    fn assignment_keeps_name_quotes_and_following_fields() {
        let r = redactor(RedactOptions::default());
        assert_eq!(
            r.redact_text(r#"{"password":"a b c","user":"bob"}"#),
            format!(r#"{{"password":"{SECRET}","user":"bob"}}"#)
        );
        assert_eq!(
            r.redact_text("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI"),
            format!("AWS_SECRET_ACCESS_KEY={SECRET}")
        );
        assert_eq!(
            r.redact_text("export TOKEN=\"abc\"def rest"),
            format!("export TOKEN=\"{SECRET}\" rest")
        );
        assert_eq!(
            r.redact_text("mysql --password hunter2 db"),
            format!("mysql --password {SECRET} db")
        );
        // Counts named after tokens are not credentials.
        assert_eq!(
            r.redact_text("max_tokens: 100, token_count: 5"),
            "max_tokens: 100, token_count: 5"
        );
    }

    #[test]
    fn truncated_pem_block_is_redacted_to_the_end() {
        let r = redactor(RedactOptions::default());
        assert_eq!(
            r.redact_text("key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE"),
            format!("key:\n{SECRET}")
        );
    }

    #[test]
    fn configured_home_is_replaced_only_as_a_whole_path_prefix() {
        let r = redactor(RedactOptions {
            home: Some("/root/".into()),
            ..RedactOptions::default()
        });
        assert_eq!(r.redact_text("cd /root && ls /root/src"), "cd ~ && ls ~/src");
        assert_eq!(r.redact_text("file:///root/x"), "file://~/x");
        assert_eq!(r.redact_text("/srv/root/x /rooted"), "/srv/root/x /rooted");
    }

    #[test]
    fn bad_homes_are_refused() {
        for home in ["", "/", "//", "relative/dir", "C:\\"] {
            let err = Redactor::new(RedactOptions {
                home: Some(home.into()),
                ..RedactOptions::default()
            })
            .expect_err(home);
            assert_eq!(err, RedactError::Home(home.into()));
            assert!(err.to_string().contains("absolute directory"), "{err}");
        }
        assert!(Redactor::new(RedactOptions {
            home: Some("C:\\Users\\bob".into()),
            ..RedactOptions::default()
        })
        .is_ok());
    }

    #[test]
    fn phone_shapes_that_are_not_phones_pass() {
        let r = redactor(RedactOptions::default());
        for text in [
            "at 1700000000 epoch",
            "2024-01-15 12:30:45",
            "ip 192.168.100.1",
            "id x555-123-4567",
            "+1 2",
        ] {
            assert_eq!(r.redact_text(text), text);
        }
        assert_eq!(
            r.redact_text("call 555.123.4567 or +44 20 7946 0958"),
            format!("call {PII} or {PII}")
        );
    }

    #[test]
    fn argv_value_after_a_credential_flag_is_replaced() {
        let r = redactor(RedactOptions::default());
        assert_eq!(
            r.redact_value(&json!(["login", "--password", "hunter2", "--verbose", "x"])),
            json!(["login", "--password", SECRET, "--verbose", "x"])
        );
    }

    #[test]
    fn counts_named_after_tokens_are_kept_in_values() {
        let r = redactor(RedactOptions::default());
        let usage = json!({"tokensIn": 10, "max_tokens": 5, "accessToken": "x", "cacheReadTokens": 2});
        assert_eq!(
            r.redact_value(&usage),
            json!({"tokensIn": 10, "max_tokens": 5, "accessToken": SECRET, "cacheReadTokens": 2})
        );
    }

    #[test]
    fn debug_output_never_shows_secret_values() {
        let options = RedactOptions {
            secret_values: vec!["hunter2hunter2".into()],
            ..RedactOptions::default()
        };
        assert!(!format!("{options:?}").contains("hunter2"));
        assert!(!format!("{:?}", redactor(options)).contains("hunter2"));
    }

    #[test]
    fn a_bare_aws_secret_access_key_is_a_secret() {
        let r = redactor(RedactOptions::default());
        let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        for text in [
            key.to_string(),
            format!("the key is {key}."),
            format!("\"{key}\""),
            format!("user,,AKIAIOSFODNN7EXAMPLE,{key}"),
            // No symbol in it: only beside an AWS context.
            "aws secret: wJalrXUtnFEMIaK7MDENGabPxRfiCYEXAMPLEKEY".to_string(),
        ] {
            let out = r.redact_text(&text);
            assert!(out.contains(SECRET) && !out.contains("EXAMPLEKEY"), "{text} -> {out}");
            assert_eq!(r.redact_text(&out), out, "idempotent");
        }
        let plain = [
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD)",
            "src/main/java/com/example/MyApp2/Service.java",
            "src/components/UserProfile2/AvatarImage.tsx",
            "ThisIsAVeryLongIdentifierName12345678ab is a name",
            "sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKE=",
            "wJalrXUtnFEMIaK7MDENGabPxRfiCYEXAMPLEKEY without any context",
        ];
        for text in plain {
            assert_eq!(r.redact_text(text), text);
        }
    }
}
