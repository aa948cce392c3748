//! A sink's URL as it may be shown or stored (`/healthz`, `doctor`, logs, the marks file): never
//! its user, password, query (`access_token=`) or fragment. One redactor for the relay, OTLP and
//! NATS settings.

/// `url` without its secrets; text that is not a URL loses everything up to its last `@` and
/// from its first `?`.
pub fn url(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) if parsed.has_host() => {
            // Both only fail on URLs that cannot have a host, excluded above.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        _ => {
            let head = text.split(['?', '#']).next().unwrap_or_default();
            match head.split_once("://") {
                Some((scheme, rest)) => {
                    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                    format!("{scheme}://{host}")
                }
                None => head.rsplit_once('@').map_or(head, |(_, host)| host).to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_user_password_or_query_is_shown() {
        for (given, shown) in [
            (
                "ws://u:s3cret@relay.example:8787/socket",
                "ws://relay.example:8787/socket",
            ),
            (
                "wss://relay.example/socket?access_token=s3cret",
                "wss://relay.example/socket",
            ),
            ("nats://u:s3cret@h:4222", "nats://h:4222"),
            (
                "http://tok@collector:4318/v1/logs#s3cret",
                "http://collector:4318/v1/logs",
            ),
            ("ws://relay.example:8787/socket", "ws://relay.example:8787/socket"),
            ("u:s3cret@h:4222", "h:4222"),
            ("nats://u:s3cret@[bad", "nats://[bad"),
        ] {
            assert_eq!(super::url(given), shown, "{given}");
        }
    }
}
