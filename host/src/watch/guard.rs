//! Which `Host` and `Origin` a request may carry: the defence against DNS
//! rebinding and cross-site pages.
//!
//! It owns the list of names the server answers to (the listening address,
//! `localhost`, `127.0.0.1` and `[::1]`, each with the bound port, plus the
//! names given with `--allow-host`) and the check every request passes
//! before any route: a `Host` not on the list is 421 `misdirected_host` (a
//! rebound page sends its own name), an `Origin` that is not `http://` one
//! of them is 403 `cross_origin` (a page on any other origin, `null`
//! included). A request with no `Origin` (curl, a same-origin navigation)
//! passes. The 403 names the refused origin back in
//! `Access-Control-Allow-Origin`, so the page learns it was refused and
//! nothing else. It never looks at a token or a route.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::problem::Problem;

/// The `host:port` names the server answers to, lower case.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    /// The bound address, the loopback names with its port, and `extra`
    /// (`name` gets the bound port, `name:port` is kept as given).
    pub fn new(bound: SocketAddr, extra: &[String]) -> Self {
        let port = bound.port();
        let mut names =
            vec![bound.to_string(), format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}")];
        for e in extra {
            let e = e.trim().to_ascii_lowercase();
            names.push(if has_port(&e) { e } else { format!("{e}:{port}") });
        }
        names.sort();
        names.dedup();
        AllowedHosts(names)
    }

    fn host(&self, host: &str) -> bool {
        self.0.iter().any(|n| n.eq_ignore_ascii_case(host))
    }

    fn origin(&self, origin: &str) -> bool {
        origin.strip_prefix("http://").is_some_and(|h| self.host(h))
    }

    /// Refuses a request whose `Host` or `Origin` is not one of the names.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Problem> {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !self.host(host) {
            return Err(Problem::new(
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_host",
                "this server does not answer to that Host; start it with --allow-host NAME to add a name",
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let text = origin.to_str().unwrap_or("");
            if !self.origin(text) {
                let mut p = Problem::new(
                    StatusCode::FORBIDDEN,
                    "cross_origin",
                    "requests from another origin (another site or port, or a page with no origin) are refused",
                );
                p.readable_by = Some(text.to_owned()).filter(|t| !t.is_empty() && t.is_ascii());
                return Err(p);
            }
        }
        Ok(())
    }
}

/// Whether a `--allow-host` name carries its port (`name:1`, `[::1]:1`).
fn has_port(name: &str) -> bool {
    match name.strip_prefix('[') {
        Some(rest) => rest.split_once("]:").is_some_and(|(_, p)| p.parse::<u16>().is_ok()),
        None => name.split_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()),
    }
}

/// The middleware every request passes first.
pub async fn check(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    match state.hosts.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(p) => p.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        h
    }

    #[test]
    fn a_rebound_host_is_421_and_a_foreign_origin_403_and_the_own_names_pass() {
        let allowed = AllowedHosts::new("127.0.0.1:8787".parse().unwrap(), &["box.lan".into(), "other:9".into()]);
        for ok in ["127.0.0.1:8787", "LOCALHOST:8787", "[::1]:8787", "box.lan:8787", "other:9"] {
            assert!(allowed.check(&headers(ok, None)).is_ok(), "{ok}");
        }
        for bad in ["evil.example:8787", "127.0.0.1:8788", "localhost", "", "box.lan:9"] {
            assert_eq!(allowed.check(&headers(bad, None)).unwrap_err().status, 421, "{bad}");
        }
        assert!(allowed.check(&headers("127.0.0.1:8787", Some("http://localhost:8787"))).is_ok());
        for bad in ["http://127.0.0.1:9999", "null", "https://127.0.0.1:8787", "http://evil.example:8787"] {
            let p = allowed.check(&headers("127.0.0.1:8787", Some(bad))).unwrap_err();
            assert_eq!((p.status, p.code), (403, "cross_origin"), "{bad}");
        }
        let ipv6 = AllowedHosts::new("[::1]:80".parse().unwrap(), &["[fe80::1]".into()]);
        assert!(ipv6.check(&headers("[fe80::1]:80", None)).is_ok());
    }
}
