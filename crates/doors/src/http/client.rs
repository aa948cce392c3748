//! The outbound HTTP client every sender shares (the OTLP exporter, the notifier): HTTP/1.1 over
//! plain TCP or rustls, idle connections kept 30 s.

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// A client that sends whole bodies.
pub type Sender = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client for `http://` and `https://` URLs, trusting what `tls` trusts.
pub fn sender(tls: &rustls::ClientConfig) -> Sender {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// A TLS configuration that trusts no one: for a client that is only given `http://` URLs, or
/// whose roots could not be loaded (its `https://` requests then fail, saying why).
pub fn trusting_no_one() -> Arc<rustls::ClientConfig> {
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring offers TLS 1.2 and 1.3")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    )
}
