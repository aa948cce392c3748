//! How every side reaches the NATS server: the daemons' JetStream sink and their control
//! source, the fleet console and its commands, `tail --nats`. One definition of the settings
//! (`AEP_NATS_URL`, the ways to authenticate, `AEP_NATS_CA`, `AEP_NATS_STREAM`), each checked
//! the same way wherever it is read, and [`Connect`], a checked way to reach a server. Secrets
//! never reach a message or a log.

use anyhow::{bail, Context};
use async_nats::{ConnectOptions, ServerAddr};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The stream created when missing (or used as is).
pub const DEFAULT_STREAM: &str = "AEP";

/// Where the NATS server is, how to authenticate to it, and the stream: the daemon's sink and
/// the fleet commands flatten this one definition.
#[derive(Args, Debug, Clone)]
pub struct Server {
    /// The NATS server (nats://host:4222, tls://host:4222 for TLS; several comma-separated;
    /// nats://user:password@host also works): where the daemons publish (their JetStream sink
    /// is off without it) and where the fleet console reads.
    #[arg(long = "nats-url", env = "AEP_NATS_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    #[command(flatten)]
    pub auth: AuthArgs,
    #[command(flatten)]
    pub stream: Stream,
}

/// The JetStream stream (`AEP_NATS_STREAM`), alone for `tail --nats`, which names its server
/// with `--nats`.
#[derive(Args, Debug, Clone)]
pub struct Stream {
    /// The JetStream stream the daemons publish to: created when missing (subjects `aep.>`,
    /// file storage), used as is when it exists.
    #[arg(long = "nats-stream", env = "AEP_NATS_STREAM", default_value = DEFAULT_STREAM, value_name = "NAME")]
    pub name: String,
}

impl Server {
    /// How to reach the server, and the stream's name, both checked; `None` when no server is
    /// named (and nothing else is set that needs one).
    pub fn resolve(&self) -> anyhow::Result<Option<(Connect, String)>> {
        let Some(connect) = self.auth.resolve(self.url.as_deref(), "AEP_NATS_URL")? else {
            return Ok(None);
        };
        Ok(Some((connect, self.stream.checked()?)))
    }
}

impl Stream {
    /// The stream's name, checked: no `.`, `*`, `>`, path separators or whitespace.
    pub fn checked(&self) -> anyhow::Result<String> {
        check_stream(&self.name)?;
        Ok(self.name.clone())
    }
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
    pub(crate) require_tls: bool,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connect")
            .field("servers", &self.shown)
            .finish_non_exhaustive()
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
        let tls = crate::http::tls::client_config_for(self.nats_ca.as_deref(), "AEP_NATS_CA")?;
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
    crate::http::redact::url(url)
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
