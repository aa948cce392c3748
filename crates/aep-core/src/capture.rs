//! Capture levels (AEP-0001 §8.2): how much content an Event's `data` carries, and the
//! adapter's per-category ceiling of them (AEP-0003 §9.1).

use crate::event_type::{category_of, is_valid_type, CATEGORIES};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Ordered `none < metadata < redacted < full`; the default is `metadata` (AEP-0001 §8.2d).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capture {
    None,
    #[default]
    Metadata,
    Redacted,
    Full,
}

impl Capture {
    pub const ALL: [Capture; 4] = [Capture::None, Capture::Metadata, Capture::Redacted, Capture::Full];

    pub fn as_str(self) -> &'static str {
        match self {
            Capture::None => "none",
            Capture::Metadata => "metadata",
            Capture::Redacted => "redacted",
            Capture::Full => "full",
        }
    }
}

impl fmt::Display for Capture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Capture {
    type Err = CaptureError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capture::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| CaptureError::Level(s.to_string()))
    }
}

/// Why a capture level or a capture policy does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    #[error("unknown capture level {0:?}: use none, metadata, redacted or full")]
    Level(String),
    #[error("capture setting {0:?} is not CATEGORY=LEVEL: only the first item may be a bare level")]
    NotAnOverride(String),
    /// An override names no AEP event category: a typo would otherwise silently leave the
    /// category it meant at the default ceiling.
    #[error(
        "capture override {setting:?}: {category:?} is not an AEP event category{}; use one of {} (AEP-0002 §3), \
         or a vendor category as x.<vendor>.<category> (AEP-0001 §6), e.g. x.cline.prompt",
        did_you_mean(.suggestion),
        CATEGORIES.join(", ")
    )]
    Category {
        setting: String,
        category: String,
        suggestion: Option<&'static str>,
    },
}

fn did_you_mean(suggestion: &Option<&str>) -> String {
    suggestion.map(|s| format!(" (did you mean {s}?)")).unwrap_or_default()
}

/// The adapter's capture ceiling (AEP-0003 §9.1): one default level plus per-category
/// overrides, e.g. `attention=redacted`. A category is a core one (AEP-0002 §3), whose
/// override also covers vendor types in it (`x.cline.session.compacted` under `session`), or a
/// vendor one, `x.<vendor>.<category>` (AEP-0001 §6), which wins over a core override for the
/// types under it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapturePolicy {
    default: Capture,
    categories: Vec<(String, Capture)>,
}

impl CapturePolicy {
    pub fn new(default: Capture) -> Self {
        CapturePolicy {
            default,
            categories: Vec::new(),
        }
    }

    /// Parses `metadata` or `metadata,attention=redacted,tool.*=full,x.cline.prompt=full`.
    /// Refuses an override of anything but an AEP event category.
    pub fn parse(spec: &str) -> Result<Self, CaptureError> {
        let mut policy = CapturePolicy::default();
        for (i, part) in spec.split(',').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
            match part.split_once('=') {
                Some((category, level)) => {
                    let category = category.trim().trim_end_matches(".*");
                    if !is_category(category) {
                        return Err(CaptureError::Category {
                            setting: part.to_string(),
                            category: category.to_string(),
                            suggestion: closest_category(category),
                        });
                    }
                    policy.set(category, level.trim().parse()?);
                }
                None if i == 0 => policy.default = part.parse()?,
                None => return Err(CaptureError::NotAnOverride(part.to_string())),
            }
        }
        Ok(policy)
    }

    fn set(&mut self, category: &str, level: Capture) {
        self.categories.retain(|(c, _)| c != category);
        self.categories.push((category.to_string(), level));
    }

    fn override_of(&self, category: &str) -> Option<Capture> {
        self.categories.iter().find(|(c, _)| c == category).map(|(_, l)| *l)
    }

    /// The ceiling for events of type `ty`.
    pub fn ceiling(&self, ty: &str) -> Capture {
        vendor_category(ty)
            .and_then(|c| self.override_of(c))
            .or_else(|| self.override_of(category_of(ty)))
            .unwrap_or(self.default)
    }

    /// Every level this policy can emit, ascending (for a `hello`'s `capabilities.capture`).
    pub fn levels(&self) -> Vec<Capture> {
        let mut levels: Vec<Capture> = std::iter::once(self.default)
            .chain(self.categories.iter().map(|(_, l)| *l))
            .collect();
        levels.sort();
        levels.dedup();
        levels
    }
}

/// `metadata,attention=redacted`: the form [`CapturePolicy::parse`] reads.
impl fmt::Display for CapturePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.default)?;
        for (category, level) in &self.categories {
            write!(f, ",{category}={level}")?;
        }
        Ok(())
    }
}

/// A category an override may name: a core one (AEP-0002 §3) or `x.<vendor>.<category>`, the
/// head of a vendor type (AEP-0001 §6).
fn is_category(name: &str) -> bool {
    CATEGORIES.contains(&name)
        || (name.starts_with("x.") && name.split('.').count() == 3 && is_valid_type(&format!("{name}.event")))
}

/// `x.<vendor>.<category>` of a vendor type.
fn vendor_category(ty: &str) -> Option<&str> {
    if !ty.starts_with("x.") {
        return None;
    }
    let (end, _) = ty.match_indices('.').nth(2)?;
    Some(&ty[..end])
}

/// The core category `name` is most likely a typo of, if any: within two edits and fewer than
/// half the category's letters.
fn closest_category(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    CATEGORIES
        .into_iter()
        .map(|c| (edit_distance(&name, c), c))
        .filter(|(d, c)| *d <= 2 && 2 * d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_parses_default_and_overrides() {
        let p = CapturePolicy::parse("metadata, attention=redacted, tool.*=full").unwrap();
        assert_eq!(p.ceiling("run.started"), Capture::Metadata);
        assert_eq!(p.ceiling("attention.requested"), Capture::Redacted);
        assert_eq!(p.ceiling("tool.completed"), Capture::Full);
        assert_eq!(p.ceiling("x.cline.prompt.submitted"), Capture::Metadata);
        assert_eq!(p.levels(), vec![Capture::Metadata, Capture::Redacted, Capture::Full]);
        assert_eq!(p.to_string(), "metadata,attention=redacted,tool=full");
        assert_eq!(
            CapturePolicy::parse(&p.to_string()).unwrap(),
            p,
            "what it prints, it reads"
        );
        assert_eq!(CapturePolicy::parse("").unwrap(), CapturePolicy::default());
        assert!(CapturePolicy::parse("loud").is_err());
        assert!(CapturePolicy::parse("metadata,full").is_err());
        assert!(CapturePolicy::parse("tool=everything").is_err());
    }

    #[test]
    fn every_core_category_and_vendor_categories_may_be_overridden() {
        for category in CATEGORIES {
            let p = CapturePolicy::parse(&format!("none,{category}=full")).unwrap();
            assert_eq!(p.ceiling(&format!("{category}.any")), Capture::Full, "{category}");
        }
        let p = CapturePolicy::parse("metadata,x.cline.prompt=full,x.my-co.tool.*=none,session=redacted").unwrap();
        assert_eq!(p.ceiling("x.cline.prompt.submitted"), Capture::Full);
        assert_eq!(
            p.ceiling("x.other.prompt.submitted"),
            Capture::Metadata,
            "another vendor's"
        );
        assert_eq!(p.ceiling("x.my-co.tool.ran"), Capture::None);
        // A core override covers vendor types in its category, unless the vendor's own wins.
        assert_eq!(p.ceiling("x.cline.session.compacted"), Capture::Redacted);
        assert_eq!(p.ceiling("x.my-co.session.compacted"), Capture::Redacted);
    }

    #[test]
    fn unknown_categories_are_refused_with_the_closest_one() {
        let err = CapturePolicy::parse("metadata,tools=redacted").unwrap_err();
        assert_eq!(
            err,
            CaptureError::Category {
                setting: "tools=redacted".into(),
                category: "tools".into(),
                suggestion: Some("tool"),
            }
        );
        let message = err.to_string();
        assert!(
            message.contains("\"tools\" is not an AEP event category (did you mean tool?)"),
            "{message}"
        );
        assert!(message.contains("agent, session, run, progress, tool,"), "{message}");
        assert!(message.contains("x.<vendor>.<category>"), "{message}");
        for (setting, suggestion) in [
            ("atention=full", Some("attention")),
            ("Tool=full", Some("tool")),
            ("prompt=full", None),
            ("foo=full", None),
            ("=full", None),
            ("x=full", None),
            ("x.cline=full", None),
            ("x.cline.prompt.submitted=full", None),
            ("x.Cline.prompt=full", None),
            ("tool.completed=full", None),
        ] {
            match CapturePolicy::parse(&format!("metadata,{setting}")) {
                Err(CaptureError::Category { suggestion: s, .. }) => assert_eq!(s, suggestion, "{setting}"),
                other => panic!("{setting}: {other:?}"),
            }
        }
    }

    #[test]
    fn edit_distance_counts_single_char_edits() {
        assert_eq!(edit_distance("tools", "tool"), 1);
        assert_eq!(edit_distance("sesion", "session"), 1);
        assert_eq!(edit_distance("", "run"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
