//! Capture levels (AEP-0001 §8.2): how much content an Event's `data` carries.

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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capture::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown capture level {s:?}: use none, metadata, redacted or full"))
    }
}

/// The adapter's capture ceiling (AEP-0003 §9.1): one default level plus per-category
/// overrides, e.g. `attention=redacted`.
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

    /// Sets the ceiling of one category (`tool`, `attention`, or a vendor category such as `prompt`).
    pub fn with_category(mut self, category: &str, level: Capture) -> Self {
        self.categories.retain(|(c, _)| c != category);
        self.categories.push((category.to_string(), level));
        self
    }

    /// Parses `metadata` or `metadata,attention=redacted,tool=full`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut policy = CapturePolicy::default();
        for (i, part) in spec.split(',').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
            match part.split_once('=') {
                Some((category, level)) => {
                    let category = category.trim().trim_end_matches(".*");
                    if category.is_empty() || !category.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                        return Err(format!(
                            "capture override {part:?} names no category: write CATEGORY=LEVEL, e.g. attention=redacted"
                        ));
                    }
                    policy = policy.with_category(category, level.trim().parse()?);
                }
                None if i == 0 => policy.default = part.parse()?,
                None => {
                    return Err(format!(
                        "capture setting {part:?} is not CATEGORY=LEVEL: only the first item may be a bare level"
                    ))
                }
            }
        }
        Ok(policy)
    }

    /// The ceiling for events of type `ty`.
    pub fn ceiling(&self, ty: &str) -> Capture {
        let category = crate::event_type::category_of(ty);
        self.categories
            .iter()
            .find(|(c, _)| c == category)
            .map(|(_, l)| *l)
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
        assert_eq!(CapturePolicy::parse("").unwrap(), CapturePolicy::default());
        assert!(CapturePolicy::parse("loud").is_err());
        assert!(CapturePolicy::parse("metadata,full").is_err());
        assert!(CapturePolicy::parse("tool=everything").is_err());
    }
}
