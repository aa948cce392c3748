//! The local view ([`crate::lane::local`]) joined to what people see: a pending approval with
//! what it asks, sessions with their title and folder. Only the signed-in owner's routes (the
//! dashboard's API, which the commands reach over the owner-only socket) serve it; the logs
//! and every sink never see it.

use crate::lane::local::About;
use crate::lane::Sessions;
use crate::views::Pending;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a request waits for Cline's files to be read; past it, it goes without titles
/// (the read goes on and fills the cache for the next).
pub const ABOUT_WAIT: Duration = Duration::from_secs(2);

/// Each pending approval, with `detail` (what it asks) while the daemon holds it.
pub fn pending(list: &[Pending], sessions: &Sessions) -> Vec<Value> {
    list.iter()
        .map(|p| {
            let mut v = json!(p);
            if let Some(detail) = sessions.local().asks(&p.id) {
                v["detail"] = json!(detail);
            }
            v
        })
        .collect()
}

/// Title and folder of each of `ids` Cline's store names, read off the async workers within
/// [`ABOUT_WAIT`].
pub async fn about(sessions: &Arc<Sessions>, ids: Vec<String>) -> HashMap<String, About> {
    if !sessions.local().is_on() || ids.is_empty() {
        return HashMap::new();
    }
    let s = sessions.clone();
    let read =
        tokio::task::spawn_blocking(move || s.local().about(&ids, |session| s.cline_data(session), s.redactor()));
    match tokio::time::timeout(ABOUT_WAIT, read).await {
        Ok(Ok(about)) => about,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the local view's read failed; titles left out");
            HashMap::new()
        }
        Err(_) => {
            tracing::debug!("Cline's store was slow to read; titles left out this time");
            HashMap::new()
        }
    }
}
