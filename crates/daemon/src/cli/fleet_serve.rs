//! `aep-cline fleet serve`: the fleet console as a page ([`crate::fleet::serve`]), kept current
//! by following the stream ([`crate::fleet::follow`]).

use super::fleet_conn::{say_skipped, Conn};
use super::out;
use crate::fleet::command::Refusals;
use crate::fleet::{checkpoint, follow, serve, View};
use anyhow::{bail, Context};
use parking_lot::RwLock;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serve the fleet console as a page: pending approvals of every machine first (with Approve
/// and Deny), the machines and their health, the sessions with their host.
///
/// Reads the stream up to its end (from the checkpoint in the bucket aep-cline-fleet, when
/// there is one), then follows it live; machine records are read again every few seconds, and
/// the checkpoint written every 5 s when the view moved. Prints a one-time sign-in link at start: it works once and sets an HttpOnly,
/// SameSite=Strict cookie in that browser (restart the console for another link; a restart
/// signs every browser out). The page speaks plain HTTP, so it listens on loopback only,
/// unless --behind-proxy names the https URL of a proxy in front that terminates TLS.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8790", value_name = "ADDR")]
    listen: SocketAddr,
    /// The https:// URL people open, served by a proxy that terminates TLS and forwards to
    /// --listen: needed to listen beyond loopback; the cookie is then Secure.
    #[arg(long, value_name = "URL")]
    behind_proxy: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

/// The origins the page is served under, the sign-in link's first; refuses a plain-HTTP
/// listener beyond loopback.
fn origins(listen: SocketAddr, behind_proxy: Option<&str>) -> anyhow::Result<Vec<String>> {
    let mut origins = Vec::new();
    if let Some(url) = behind_proxy {
        let parsed = url::Url::parse(url)
            .ok()
            .filter(|u| u.scheme() == "https" && u.host_str().is_some());
        let Some(u) = parsed.filter(|u| u.path() == "/" && u.query().is_none()) else {
            bail!("--behind-proxy {url:?}: give the https:// URL people open, without a path (e.g. https://fleet.example.com)");
        };
        origins.push(u.origin().ascii_serialization());
    } else if !listen.ip().is_loopback() {
        bail!(
            "refusing to serve the console on {listen}: it is not a loopback address and the console speaks plain HTTP, \
             so its sign-in cookie and every answer would cross the network in the clear. Listen on 127.0.0.1, or put \
             a proxy that terminates TLS in front and pass --behind-proxy https://NAME (the URL people open)"
        );
    }
    origins.push(format!("http://{listen}"));
    if listen.ip().is_loopback() {
        origins.push(format!("http://localhost:{}", listen.port()));
    }
    Ok(origins)
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    origins(args.listen, args.behind_proxy.as_deref())?;
    let source = args.conn.source()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(async {
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("cannot listen on {}", args.listen))?;
            let bound = listener.local_addr()?;
            let (refusals, hear) = Refusals::new();
            let client = source.lasting_client(hear).await?;
            let mut view = View::new();
            source.catch_up(&client, &mut view).await?;
            say_skipped(&view);
            let view: follow::Shared = Arc::new(RwLock::new(view));
            let stream = source.stream.clone();
            let created = async_nats::jetstream::new(client.clone())
                .get_stream(&stream)
                .await
                .with_context(|| format!("cannot look up the stream {stream:?}"))?
                .cached_info()
                .created
                .to_string();
            let writer = checkpoint::Writer {
                stream,
                stream_created: created,
                max_payload: client.server_info().max_payload,
            };
            tokio::spawn(writer.run(client.clone(), view.clone()));
            tokio::spawn(follow::follow(source.clone(), client.clone(), view.clone()));
            let (console, link) = serve::Console::new(
                view,
                client,
                source,
                refusals,
                args.conn.offline_after,
                origins(bound, args.behind_proxy.as_deref())?,
            );
            out::print(&format!("{link}\n"))?;
            eprintln!("aep-cline fleet serve: listening on {bound}; open the link above in a browser (it works once)");
            axum::serve(listener, serve::routes(console))
                .with_graceful_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await
                .context("the console's listener failed")
        })
}
