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
