//! The notification settings (`AEP_CLINE_NOTIFY*`, `AEP_CLINE_PUBLIC_URL`), one clap struct
//! flattened into `aep-cline daemon`, and what they resolve to at start. A target that is not
//! one of the three forms stops the daemon at start, naming the setting and the forms.

use anyhow::bail;
use clap::Args;
use hyper::Uri;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Notifications (off by default)")]
pub struct NotifyArgs {
    /// Where a person is told that Cline waits, comma-separated: an http(s):// URL (a JSON
    /// POST), ntfy+http(s)://HOST/TOPIC (ntfy's JSON API), or `desktop` (notify-send).
    #[arg(long, env = "AEP_CLINE_NOTIFY", value_name = "TARGET,...", hide_env_values = true)]
    pub notify: Option<String>,
    /// What is notified, comma-separated: approval (an approval starts waiting), budget (a
    /// budget of AEP_CLINE_BUDGET reached 80% or 100%), denied (a guard refused a tool call:
    /// its rule and reason), failed (a run failed), ended (a session ended).
    #[arg(long, env = "AEP_CLINE_NOTIFY_ON", default_value = "approval,budget", value_name = "KIND,...",
          value_parser = on)]
    pub notify_on: On,
    /// The base of the links in notifications (approve, deny, the dashboard), as another device
    /// reaches this daemon, e.g. through a reverse proxy [default: the listener's own URL]
    #[arg(long, env = "AEP_CLINE_PUBLIC_URL", value_name = "URL", value_parser = public_url)]
    pub public_url: Option<String>,
}

/// What is notified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct On {
    pub approval: bool,
    pub budget: bool,
    pub failed: bool,
    pub ended: bool,
    pub denied: bool,
}

/// One place a notification goes.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// A JSON POST to this URL.
    Webhook(Endpoint),
    /// ntfy's JSON API: a POST to the server's root naming `topic`.
    Ntfy { server: Endpoint, topic: String },
    /// The desktop's notification service (`notify-send`).
    Desktop,
}

/// An HTTP peer: the URL without its credentials, and the credentials (sent as HTTP Basic).
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: Uri,
    pub basic: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl Endpoint {
    /// The URL as logs and `/healthz` show it: scheme and host only. The path is left out like
    /// the credentials and the query: a chat webhook's secret is in its path (Slack's
    /// `/services/T…/B…/…`), and an ntfy topic is a password.
    pub fn shown(&self) -> String {
        let scheme = self.url.scheme_str().unwrap_or("http");
        let authority = self.url.authority().map(|a| a.as_str()).unwrap_or_default();
        match self.url.path() {
            "" | "/" => format!("{scheme}://{authority}/"),
            _ => format!("{scheme}://{authority}/…"),
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl Target {
    pub fn shown(&self) -> String {
        match self {
            Target::Webhook(e) => e.shown(),
            Target::Ntfy { server, .. } => format!("ntfy+{}…", server.shown()),
            Target::Desktop => "desktop".into(),
        }
    }
}

/// The settings, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub targets: Vec<Target>,
    pub on: On,
    pub public_url: Option<String>,
    /// How long an action link works (and at most until its approval is resolved).
    pub link_lifetime: Duration,
    /// One delivery attempt's time limit.
    pub timeout: Duration,
    /// Attempts per notification and target (the first and its retries).
    pub attempts: u32,
    /// Notifications waiting per target; past it the oldest is dropped (and counted).
    pub queue: usize,
}

/// Action links work this long at most.
pub const LINK_LIFETIME: Duration = Duration::from_secs(3600);

impl NotifyArgs {
    /// `None` when no target is named (notifications are off).
    pub fn settings(&self) -> anyhow::Result<Option<Settings>> {
        let Some(list) = self.notify.as_deref() else {
            return Ok(None);
        };
        let targets = targets(list)?;
        if targets.is_empty() {
            bail!("AEP_CLINE_NOTIFY is set but names no target: {FORMS}");
        }
        Ok(Some(Settings {
            targets,
            on: self.notify_on,
            public_url: self.public_url.clone(),
            link_lifetime: LINK_LIFETIME,
            timeout: Duration::from_secs(10),
            attempts: 5,
            queue: 64,
        }))
    }
}

const FORMS: &str = "use an http(s):// URL (a JSON POST), ntfy+https://HOST/TOPIC (ntfy), or desktop";

/// `AEP_CLINE_NOTIFY`: comma-separated targets.
pub fn targets(list: &str) -> anyhow::Result<Vec<Target>> {
    let mut all = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let target = target(item)?;
        if !all.contains(&target) {
            all.push(target);
        }
    }
    Ok(all)
}

fn target(item: &str) -> anyhow::Result<Target> {
    if item.eq_ignore_ascii_case("desktop") {
        return Ok(Target::Desktop);
    }
    if let Some(rest) = item.strip_prefix("ntfy+") {
        let endpoint = endpoint(rest)?;
        let topic = endpoint.url.path().trim_matches('/').to_string();
        let ok = !topic.is_empty()
            && topic.len() <= 64
            && topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            bail!(
                "AEP_CLINE_NOTIFY: {:?} names no ntfy topic (letters, digits, - and _, at most 64): \
                 use ntfy+https://HOST/TOPIC",
                endpoint.shown()
            );
        }
        let root = Uri::builder()
            .scheme(endpoint.url.scheme_str().unwrap_or("https"))
            .authority(endpoint.url.authority().map(|a| a.as_str()).unwrap_or_default())
            .path_and_query("/")
            .build()?;
        return Ok(Target::Ntfy {
            server: Endpoint {
                url: root,
                basic: endpoint.basic,
            },
            topic,
        });
    }
    Ok(Target::Webhook(endpoint(item)?))
}

/// An http(s) URL, its `user:password@` taken out as HTTP Basic credentials.
fn endpoint(item: &str) -> anyhow::Result<Endpoint> {
    let parsed = url::Url::parse(item)
        .map_err(|_| anyhow::anyhow!("AEP_CLINE_NOTIFY: {:?} is not a target: {FORMS}", cut_credentials(item)))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        bail!("AEP_CLINE_NOTIFY: {:?} is not a target: {FORMS}", cut_credentials(item));
    }
    let basic = (!parsed.username().is_empty() || parsed.password().is_some()).then(|| {
        let user = percent_encoding::percent_decode_str(parsed.username()).decode_utf8_lossy();
        let password = percent_encoding::percent_decode_str(parsed.password().unwrap_or_default()).decode_utf8_lossy();
        format!("{user}:{password}")
    });
    let mut bare = parsed.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    let url: Uri = bare
        .as_str()
        .parse()
        .map_err(|_| anyhow::anyhow!("AEP_CLINE_NOTIFY: {:?} is not a URL", cut_credentials(item)))?;
    Ok(Endpoint { url, basic })
}

/// A target as an error may show it: never its credentials.
fn cut_credentials(item: &str) -> String {
    match item.split_once('@') {
        Some((before, after)) => match before.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://…@{after}"),
            None => format!("…@{after}"),
        },
        None => item.to_string(),
    }
}

pub(super) fn on(value: &str) -> Result<On, String> {
    let mut on = On {
        approval: false,
        budget: false,
        failed: false,
        ended: false,
        denied: false,
    };
    for kind in value.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        match kind {
            "approval" => on.approval = true,
            "budget" => on.budget = true,
            "failed" => on.failed = true,
            "ended" => on.ended = true,
            "denied" => on.denied = true,
            other => {
                return Err(format!(
                    "AEP_CLINE_NOTIFY_ON: {other:?} is not a kind; use approval, budget, denied, failed and/or ended, comma-separated"
                ))
            }
        }
    }
    if !(on.approval || on.budget || on.failed || on.ended || on.denied) {
        return Err("AEP_CLINE_NOTIFY_ON names nothing: use approval, budget, denied, failed and/or ended".into());
    }
    Ok(on)
}

/// `AEP_CLINE_PUBLIC_URL`: http(s)://HOST[:PORT][/PREFIX], without a query; kept without its
/// trailing `/`.
fn public_url(value: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!("AEP_CLINE_PUBLIC_URL={value:?} {why}: use e.g. https://cline.example.net or http://10.0.0.5:8789")
    };
    let parsed = url::Url::parse(value.trim()).map_err(|_| bad("is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("is not http(s)://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("names no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() || !parsed.username().is_empty() {
        return Err(bad("carries a query, a fragment or credentials"));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_are_read_and_anything_else_is_refused_with_words() {
        let all =
            targets("https://hooks.example/x?k=1, ntfy+https://u:tk_s3cret@ntfy.example/cline_box ,desktop,DESKTOP")
                .unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        let Target::Webhook(hook) = &all[0] else { panic!() };
        assert_eq!(hook.url.to_string(), "https://hooks.example/x?k=1");
        assert_eq!(hook.shown(), "https://hooks.example/…", "the path may be the secret");
        assert_eq!(all[1].shown(), "ntfy+https://ntfy.example/…", "the topic is a password");
        let Target::Ntfy { server, topic } = &all[1] else {
            panic!()
        };
        assert_eq!(
            (server.url.to_string().as_str(), topic.as_str()),
            ("https://ntfy.example/", "cline_box")
        );
        assert_eq!(server.basic.as_deref(), Some("u:tk_s3cret"));
        assert!(!format!("{all:?}").contains("s3cret"), "credentials never shown");
        assert!(!format!("{all:?}").contains("cline_box"), "nor the topic");
        assert_eq!(all[2], Target::Desktop);
        for bad in [
            "ftp://x/y",
            "hooks.example/x",
            "ntfy+https://ntfy.example/",
            "ntfy+https://ntfy.example/a/b",
            "slack",
            "https://u:s3cret@",
        ] {
            let e = targets(bad).unwrap_err().to_string();
            assert!(e.contains("AEP_CLINE_NOTIFY"), "{bad}: {e}");
            assert!(!e.contains("s3cret"), "{bad}: {e}");
        }
        assert!(on("approval,failed").unwrap().failed);
        assert!(on("approval,crashed").unwrap_err().contains("crashed"));
        assert!(on(",").is_err());
        assert_eq!(
            public_url("https://box.example/cline/").unwrap(),
            "https://box.example/cline"
        );
        assert!(public_url("box.example").is_err());
        assert!(public_url("https://box.example/?a=1").is_err());
    }
}
