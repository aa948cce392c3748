//! TLS for every client that leaves the machine: `wss://` relays (AEP-0003 §8.1 wants TLS
//! off-host), OTLP, NATS and notifications. rustls with the system's root certificates, plus a
//! PEM file of the sink's own (`AEP_RELAY_CA`, `AEP_OTLP_CA`, `AEP_NATS_CA`, ...) for a peer whose
//! certificate a private CA signed. A certificate the roots do not vouch for ends the handshake with an error that
//! names the relay's host and what to do.

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;
use tokio_tungstenite::tungstenite::error::TlsError;
use tokio_tungstenite::tungstenite::Error;

/// The client configuration: the system's roots, and `ca`'s certificates when given.
pub fn client_config(ca: Option<&Path>) -> anyhow::Result<Arc<ClientConfig>> {
    client_config_for(ca, "AEP_RELAY_CA")
}

/// [`client_config`] for another sink's TLS peer (`AEP_OTLP_CA`, `AEP_NATS_CA`): errors name `setting`.
pub fn client_config_for(ca: Option<&Path>, setting: &str) -> anyhow::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(system.certs);
    if added == 0 && ca.is_none() {
        tracing::warn!("no system root certificates found: a TLS peer can only be trusted through {setting}");
    }
    if let Some(ca) = ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
            .and_then(|certs| certs.collect())
            .map_err(|e| anyhow::anyhow!("{e:?}"))
            .with_context(|| format!("{setting}={}: cannot read it as PEM certificates", ca.display()))?;
        if certs.is_empty() {
            bail!(
                "{setting}={}: no certificate in it (expected PEM, -----BEGIN CERTIFICATE-----)",
                ca.display()
            );
        }
        for cert in certs {
            roots
                .add(cert)
                .with_context(|| format!("{setting}={}: a certificate in it is not usable as a CA", ca.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("the TLS library offers no protocol version")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Says what a failed TLS handshake means, when it was one: the relay's certificate refused.
pub fn explain(error: &Error, host: &str) -> Option<String> {
    let tls = match error {
        Error::Tls(TlsError::Rustls(e)) => Some(&**e),
        Error::Io(io) => io.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    }?;
    Some(match tls {
        rustls::Error::InvalidCertificate(why) => format!(
            "the TLS certificate of the relay at {host} was refused ({why:?}): if a private CA signed it, \
             set AEP_RELAY_CA to that CA's certificate (PEM)"
        ),
        other => format!("the TLS handshake with the relay at {host} failed: {other}"),
    })
}
