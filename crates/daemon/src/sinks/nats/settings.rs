//! The JetStream sink's settings (`AEP_NATS_*`), one clap definition flattened into
//! `aep-cline daemon`; the connection part ([`ConnectArgs`]) is shared with `tail --nats`, so
//! both reach a server the same way. Everything is checked at start: a malformed URL, a
//! credentials file that cannot be read, two ways to authenticate at once, a bad stream name
//! or CA file stop the daemon with the setting's name. Secrets never reach a message or a log.

use crate::setting;
use anyhow::{bail, Context};
use async_nats::{ConnectOptions, ServerAddr};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The stream created when missing (or used as is).
pub const DEFAULT_STREAM: &str = "AEP";

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "JetStream sink (AEP-0005 CloudEvents on NATS)")]
pub struct NatsArgs {
    /// The NATS server (nats://host:4222, tls://host:4222 for TLS; several comma-separated);
    /// the JetStream sink is off without it. nats://user:password@host also works.
    #[arg(long = "nats-url", env = "AEP_NATS_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    #[command(flatten)]
    pub auth: AuthArgs,
    /// The JetStream stream Events go to: created when missing (subjects `aep.>`, file
    /// storage), used as is when it exists.
    #[arg(long = "nats-stream", env = "AEP_NATS_STREAM", default_value = DEFAULT_STREAM, value_name = "NAME")]
    pub stream: String,
    /// Events held in memory while the server is slow or away; past it they are resent from
    /// the logs, so nothing is lost.
    #[arg(long = "nats-outbox", env = "AEP_NATS_OUTBOX", default_value = "10000", value_name = "EVENTS",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub outbox: u32,
    /// The duplicate window of a stream this sink creates: a redelivery within it is dropped
    /// by the server (an existing stream keeps its own).
    #[arg(long = "nats-dedupe-window", env = "AEP_NATS_DEDUPE_WINDOW", default_value = "2m", value_name = "DURATION",
          value_parser = setting::duration("AEP_NATS_DEDUPE_WINDOW", Duration::from_secs(1), "2m"))]
    pub dedupe_window: Duration,
    /// 1: take AEP control commands from NATS, on this host's subject only
    /// (`aep-control.<host>`, request/reply), through the same intake as `POST /control`; the
    /// hub control gate (AEP_CLINE_HUB_CONTROL) still decides what is accepted. Who may send
    /// them is the NATS server's permissions (docs/fleet.md): 1 or 0.
    #[arg(long = "nats-control", env = "AEP_NATS_CONTROL", default_value = "0", value_name = "1|0",
          value_parser = setting::gate("AEP_NATS_CONTROL"), action = clap::ArgAction::Set)]
    pub control: bool,
}

/// How to authenticate to a NATS server (one way at most), and TLS.
#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// A NATS credentials file (a user JWT and its NKey seed, as `nsc` writes).
    #[arg(long = "nats-creds", env = "AEP_NATS_CREDS", value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// A NATS token.
    #[arg(
        long = "nats-token",
        env = "AEP_NATS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub nats_token: Option<String>,
    /// A NATS user, with AEP_NATS_PASSWORD.
    #[arg(long = "nats-user", env = "AEP_NATS_USER", value_name = "USER")]
    pub nats_user: Option<String>,
    /// The password of AEP_NATS_USER.
    #[arg(
        long = "nats-password",
        env = "AEP_NATS_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub nats_password: Option<String>,
    /// A private CA's certificate (PEM) trusted beside the system's roots; implies TLS.
    #[arg(long = "nats-ca", env = "AEP_NATS_CA", value_name = "PEM_FILE")]
    pub nats_ca: Option<PathBuf>,
}

/// How the client authenticates (read at start, so a bad file stops the daemon there).
#[derive(Clone)]
enum Auth {
    None,
    Creds(String),
    Token(String),
    User(String, String),
}

/// A checked way to reach a server.
#[derive(Clone)]
pub struct Connect {
    pub servers: Vec<ServerAddr>,
    /// The servers as they may be shown: no user, no password.
    pub shown: String,
    auth: Auth,
    tls: Arc<rustls::ClientConfig>,
    require_tls: bool,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connect")
            .field("servers", &self.shown)
            .finish_non_exhaustive()
    }
}

/// The sink's settings, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub connect: Connect,
    pub stream: String,
    pub outbox: usize,
    pub dedupe_window: Duration,
    /// Control commands are taken on this host's subject (`AEP_NATS_CONTROL=1`).
    pub control: bool,
}

impl NatsArgs {
    /// `None` when no server is named.
    pub fn settings(&self) -> anyhow::Result<Option<Settings>> {
        let Some(connect) = self.auth.resolve(self.url.as_deref(), "AEP_NATS_URL")? else {
            if self.control {
                bail!("AEP_NATS_CONTROL=1 but AEP_NATS_URL is not set: name the NATS server the commands come through");
            }
            return Ok(None);
        };
        check_stream(&self.stream)?;
        Ok(Some(Settings {
            connect,
            stream: self.stream.clone(),
            outbox: self.outbox as usize,
            dedupe_window: self.dedupe_window,
            control: self.control,
        }))
    }
}

impl AuthArgs {
    /// How to reach `url` (`None` without one); `url_name` says where the URL came from.
    pub fn resolve(&self, url: Option<&str>, url_name: &str) -> anyhow::Result<Option<Connect>> {
        let Some(url) = url else {
            if self.nats_creds.is_some()
                || self.nats_token.is_some()
                || self.nats_user.is_some()
                || self.nats_ca.is_some()
            {
                bail!("AEP_NATS_CREDS, AEP_NATS_TOKEN, AEP_NATS_USER or AEP_NATS_CA is set but {url_name} is not: name the NATS server too");
            }
            return Ok(None);
        };
        let mut servers = Vec::new();
        let mut shown = Vec::new();
        for part in url.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let server: ServerAddr = part.parse().map_err(|_| {
                anyhow::anyhow!(
                    "{url_name}: {:?} is not a NATS server URL: use nats://host:4222 (or tls://host:4222)",
                    redact(part)
                )
            })?;
            if !matches!(server.clone().into_inner().scheme(), "nats" | "tls") {
                bail!(
                    "{url_name}: {:?}: use nats:// or tls:// (the sink speaks the NATS protocol, not WebSocket)",
                    redact(part)
                );
            }
            if server.host().is_empty() {
                bail!("{url_name}: {:?} names no host: use nats://host:4222", redact(part));
            }
            shown.push(format!(
                "{}://{}:{}",
                server.clone().into_inner().scheme(),
                server.host(),
                server.port()
            ));
            servers.push(server);
        }
        if servers.is_empty() {
            bail!("{url_name} is empty: use nats://host:4222");
        }
        let in_url = servers.iter().any(ServerAddr::has_user_pass);
        let auth = match (&self.nats_creds, &self.nats_token, &self.nats_user, &self.nats_password) {
            (None, None, None, None) => Auth::None,
            (Some(path), None, None, None) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("AEP_NATS_CREDS={}: cannot read the credentials file", path.display()))?;
                ConnectOptions::with_credentials(&text).map_err(|e| {
                    anyhow::anyhow!("AEP_NATS_CREDS={}: not a NATS credentials file ({e}): use the .creds file `nsc` writes", path.display())
                })?;
                Auth::Creds(text)
            }
            (None, Some(token), None, None) => Auth::Token(token.clone()),
            (None, None, Some(user), Some(password)) => Auth::User(user.clone(), password.clone()),
            (None, None, Some(_), None) => bail!("AEP_NATS_USER is set without AEP_NATS_PASSWORD: set both"),
            (None, None, None, Some(_)) => bail!("AEP_NATS_PASSWORD is set without AEP_NATS_USER: set both"),
            _ => bail!(
                "more than one way to authenticate to NATS is set: use one of AEP_NATS_CREDS, AEP_NATS_TOKEN or AEP_NATS_USER + AEP_NATS_PASSWORD"
            ),
        };
        if in_url && !matches!(auth, Auth::None) {
            bail!("{url_name} carries a user and password and another way to authenticate is set too: use one");
        }
        let tls = crate::sinks::relay::tls::client_config_for(self.nats_ca.as_deref(), "AEP_NATS_CA")?;
        let require_tls = self.nats_ca.is_some() || servers.iter().any(ServerAddr::tls_required);
        Ok(Some(Connect {
            servers,
            shown: shown.join(","),
            auth,
            tls,
            require_tls,
        }))
    }
}

/// The latest error a server reported on a connection (a permissions violation, ...), which the
/// client otherwise only logs: a refused publish or subscription fails nothing by itself.
pub type ServerErrors = tokio::sync::watch::Sender<Option<String>>;

impl Connect {
    /// Connects once (the caller retries with its backoff), naming the client `name`.
    pub async fn connect(&self, name: &str) -> anyhow::Result<async_nats::Client> {
        self.connect_with(name, |_| {}).await
    }

    /// [`Connect::connect`], telling `errors` what the server reports as wrong.
    pub async fn connect_watched(&self, name: &str, errors: ServerErrors) -> anyhow::Result<async_nats::Client> {
        self.connect_with(name, move |event| {
            if let async_nats::Event::ServerError(e) = event {
                errors.send_replace(Some(e.to_string()));
            }
        })
        .await
    }

    /// [`Connect::connect`], with `on_event` told each of the client's events (a server's
    /// `-ERR`, such as a permissions violation, comes only this way).
    pub async fn connect_with(
        &self,
        name: &str,
        on_event: impl Fn(&async_nats::Event) + Send + Sync + 'static,
    ) -> anyhow::Result<async_nats::Client> {
        // Our own loop reconnects and resends; the client's retries would hide a dead server.
        self.connect_reconnecting(name, Some(1), on_event).await
    }

    /// [`Connect::connect_with`] for a long-lived reader with no loop of its own around the
    /// client (`fleet serve`: its page, its follower and its checkpoint share one client):
    /// the client reconnects for as long as it lives, so a server restarted comes back to it
    /// (a client that gave up would say "channel closed" for good).
    pub async fn connect_lasting(
        &self,
        name: &str,
        on_event: impl Fn(&async_nats::Event) + Send + Sync + 'static,
    ) -> anyhow::Result<async_nats::Client> {
        self.connect_reconnecting(name, None, on_event).await
    }

    async fn connect_reconnecting(
        &self,
        name: &str,
        max_reconnects: Option<usize>,
        on_event: impl Fn(&async_nats::Event) + Send + Sync + 'static,
    ) -> anyhow::Result<async_nats::Client> {
        let mut options = match &self.auth {
            Auth::None => ConnectOptions::new(),
            Auth::Creds(text) => ConnectOptions::with_credentials(text).context("the credentials file")?,
            Auth::Token(token) => ConnectOptions::with_token(token.clone()),
            Auth::User(user, password) => ConnectOptions::with_user_and_password(user.clone(), password.clone()),
        };
        options = options
            .name(name)
            .connection_timeout(Duration::from_secs(5))
            .tls_client_config((*self.tls).clone())
            .require_tls(self.require_tls)
            .max_reconnects(max_reconnects)
            .event_callback(move |event| {
                on_event(&event);
                async move {
                    tracing::debug!(%event, "NATS client");
                }
            });
        options
            .connect(self.servers.clone())
            .await
            .with_context(|| format!("cannot connect to NATS at {}", self.shown))
    }
}

/// A URL without its user and password.
fn redact(url: &str) -> String {
    crate::sinks::shown::url(url)
}

/// JetStream stream names: no `.`, `*`, `>`, path separators or whitespace.
fn check_stream(name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || name.len() > 255
        || name
            .chars()
            .any(|c| matches!(c, '.' | '*' | '>' | '/' | '\\') || c.is_whitespace() || c.is_control())
    {
        bail!("AEP_NATS_STREAM={name:?} is not a JetStream stream name: use letters, digits, - and _ (e.g. {DEFAULT_STREAM})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        nats: NatsArgs,
    }

    fn settings(flags: &[&str]) -> Result<Option<Settings>, String> {
        let cmd = Cmd::try_parse_from(std::iter::once("x").chain(flags.iter().copied())).map_err(|e| e.to_string())?;
        cmd.nats.settings().map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn off_without_a_url_and_resolved_with_one() {
        assert!(settings(&[]).unwrap().is_none());
        let s = settings(&["--nats-url", "nats://127.0.0.1:4222"]).unwrap().unwrap();
        assert_eq!((s.stream.as_str(), s.outbox), ("AEP", 10_000));
        assert_eq!(s.connect.shown, "nats://127.0.0.1:4222");
        assert_eq!(s.dedupe_window, Duration::from_secs(120));
        assert!(!s.connect.require_tls);
        assert!(!s.control, "control over NATS is off by default");
        let s = settings(&["--nats-url", "nats://h", "--nats-control", "1"])
            .unwrap()
            .unwrap();
        assert!(s.control);
        let s = settings(&["--nats-url", "tls://a:4222, nats://b"]).unwrap().unwrap();
        assert_eq!(s.connect.shown, "tls://a:4222,nats://b:4222");
        assert!(s.connect.require_tls);
    }

    #[test]
    fn malformed_settings_are_refused_naming_the_setting_and_never_a_secret() {
        for (flags, needle) in [
            (&["--nats-url", "http://h:4222"][..], "AEP_NATS_URL"),
            (&["--nats-url", "ws://h:4222"], "nats://"),
            (&["--nats-url", "nats://u:s3cret@h:4222", "--nats-token", "t"], "one"),
            (&["--nats-url", " , "], "AEP_NATS_URL"),
            (&["--nats-url", "nats://h", "--nats-user", "u"], "AEP_NATS_PASSWORD"),
            (&["--nats-url", "nats://h", "--nats-password", "p"], "AEP_NATS_USER"),
            (
                &[
                    "--nats-url",
                    "nats://h",
                    "--nats-token",
                    "t",
                    "--nats-user",
                    "u",
                    "--nats-password",
                    "p",
                ],
                "one of",
            ),
            (
                &["--nats-url", "nats://h", "--nats-creds", "/nowhere.creds"],
                "AEP_NATS_CREDS=/nowhere.creds",
            ),
            (
                &["--nats-url", "nats://h", "--nats-ca", "/nowhere.pem"],
                "AEP_NATS_CA=/nowhere.pem",
            ),
            (&["--nats-url", "nats://h", "--nats-stream", "a.b"], "AEP_NATS_STREAM"),
            (&["--nats-url", "nats://h", "--nats-outbox", "0"], "0"),
            (
                &["--nats-url", "nats://h", "--nats-dedupe-window", "0s"],
                "AEP_NATS_DEDUPE_WINDOW",
            ),
            (&["--nats-token", "t"], "AEP_NATS_URL"),
            (&["--nats-control", "1"], "AEP_NATS_URL"),
            (&["--nats-url", "nats://h", "--nats-control", "yes"], "AEP_NATS_CONTROL"),
        ] {
            let err = settings(flags).unwrap_err();
            assert!(err.contains(needle), "{flags:?}: {err}");
            assert!(!err.contains("s3cret"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("bad.creds");
        std::fs::write(&creds, "not a creds file").unwrap();
        let err = settings(&["--nats-url", "nats://h", "--nats-creds", creds.to_str().unwrap()]).unwrap_err();
        assert!(err.contains("AEP_NATS_CREDS") && err.contains("credentials"), "{err}");
        assert_eq!(redact("nats://u:s3cret@h:4222"), "nats://h:4222");
    }
}
