//! One JSON endpoint, fetched over plain HTTP: the host fetches, the detector
//! decides.
//!
//! This source owns one configured URL and makes one `GET` per scan, handing
//! the status and the JSON body (as received, at most `max_bytes`) to
//! detectors. It must never write, create or lock anything, and never sends
//! anything but that one read-only request. It never follows anything outside
//! what it was configured to read: redirects are not followed, and proxies
//! from the environment are not used. TLS is not built in, so an `https://`
//! URL is refused with a clear error. A body that is too large or not JSON, a
//! refused connection or a timeout fails the read, never the scan.
//!
//! With a `jsonpath` (RFC 9535, through `serde_json_path`), the source also
//! evaluates it on the body and gives the column `value`: the number when the
//! path selects exactly one node and it is a number, else null. The path runs
//! here rather than in a detector because the host already holds the parsed
//! body (the guest has no network and would only re-parse what it is handed),
//! and a bad path is then a config error at start-up, not a failing detector.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{ReadContext, Sink, Source, SourceError, SourceReport};
use crate::model::record::{BatchBuilder, Cell, Column};

const COLUMNS: &[Column] =
    &[Column::text("url"), Column::int("status"), Column::text("body"), Column::int("elapsed_ms")];
/// The columns with a `jsonpath`: the same, and the value it selects.
const COLUMNS_WITH_VALUE: &[Column] = &[
    Column::text("url"),
    Column::int("status"),
    Column::text("body"),
    Column::int("elapsed_ms"),
    Column::float("value"),
];

/// Fetches one JSON endpoint (`kind = response`).
#[derive(Debug, Clone)]
pub struct HttpSource {
    /// The name detectors subscribe to.
    pub name: String,
    /// An `http://` URL.
    pub url: String,
    /// For the whole exchange: connecting, sending, receiving the body.
    pub timeout: Duration,
    /// The largest body accepted, bytes.
    pub max_bytes: usize,
    /// Evaluated on the body: the column `value`.
    pub jsonpath: Option<serde_json_path::JsonPath>,
}

impl HttpSource {
    pub fn new(name: impl Into<String>, url: impl Into<String>, timeout: Duration, max_bytes: usize) -> Self {
        HttpSource { name: name.into(), url: url.into(), timeout, max_bytes, jsonpath: None }
    }

    /// Also extracts `value` from each body with `path`.
    pub fn with_jsonpath(mut self, path: serde_json_path::JsonPath) -> Self {
        self.jsonpath = Some(path);
        self
    }

    fn fail(&self, message: String) -> SourceError {
        SourceError::Read { source_name: self.name.clone(), path: PathBuf::from(&self.url), source: message.into() }
    }

    fn stopped(&self, reason: String) -> SourceError {
        SourceError::Stopped { source_name: self.name.clone(), reason }
    }

    /// Says in words what went wrong with the exchange.
    fn explain(&self, e: ureq::Error) -> SourceError {
        let message = match e {
            ureq::Error::Timeout(phase) => {
                format!("timed out after {} ms (while: {phase})", self.timeout.as_millis())
            }
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                format!("connection refused: {io}")
            }
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                format!("timed out after {} ms: {io}", self.timeout.as_millis())
            }
            ureq::Error::Io(io) => format!("connection failed: {io}"),
            ureq::Error::HostNotFound => "host not found".to_owned(),
            ureq::Error::BadUri(uri) => format!("not a valid URL: {uri}"),
            ureq::Error::BodyExceedsLimit(_) => {
                format!("the response body is larger than the cap of {} bytes (max_bytes)", self.max_bytes)
            }
            ureq::Error::Tls(_) | ureq::Error::TlsRequired => {
                "TLS is not built in: only plain http:// URLs can be fetched".to_owned()
            }
            other => format!("request failed: {other}"),
        };
        self.fail(message)
    }
}

impl Source for HttpSource {
    fn evidence_columns(&self) -> &'static [&'static str] {
        &["url"]
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["response"]
    }

    fn read(&self, _ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let scheme = self.url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("http") => {}
            Some("https") => {
                return Err(
                    self.fail("TLS is not built in: only plain http:// URLs can be fetched, not https://".to_owned())
                );
            }
            _ => return Err(self.fail("not an http:// URL".to_owned())),
        }

        let config = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            // The status is data for the detector, not an error.
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .build();
        let agent = ureq::Agent::new_with_config(config);

        let started = Instant::now();
        let mut response =
            agent.get(self.url.as_str()).header("accept", "application/json").call().map_err(|e| self.explain(e))?;
        let status = response.status().as_u16();
        if response.status().is_redirection() {
            let to = response.headers().get("location").map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
            return Err(self.fail(format!(
                "status {status} redirects to {}; redirects are not followed",
                to.as_deref().unwrap_or("(no location)")
            )));
        }
        let limit = u64::try_from(self.max_bytes).unwrap_or(u64::MAX);
        let body = response.body_mut().with_config().limit(limit).read_to_vec().map_err(|e| self.explain(e))?;
        let elapsed_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);

        let body = match String::from_utf8(body) {
            Ok(text) => text,
            Err(_) => {
                return Err(self.fail(format!("status {status}: the body is not valid JSON (it is not UTF-8)")));
            }
        };
        let value = match &self.jsonpath {
            None => {
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&body) {
                    return Err(self.fail(format!("status {status}: the body is not valid JSON: {e}")));
                }
                None
            }
            Some(path) => match serde_json::from_str::<serde_json::Value>(&body) {
                Ok(json) => Some(select_number(path, &json)),
                Err(e) => return Err(self.fail(format!("status {status}: the body is not valid JSON: {e}"))),
            },
        };

        let mut row =
            vec![Cell::Text(&self.url), Cell::Int(i64::from(status)), Cell::Text(&body), Cell::Int(elapsed_ms)];
        let columns = match value {
            None => COLUMNS,
            Some(v) => {
                row.push(v.map_or(Cell::Null, Cell::Float));
                COLUMNS_WITH_VALUE
            }
        };
        let mut builder = BatchBuilder::new(&self.name, "response", columns);
        builder.push_row(&row).map_err(|e| self.stopped(e.to_string()))?;
        sink(builder.take()).map_err(|reason| self.stopped(reason))?;
        Ok(SourceReport { records: 1, ..SourceReport::default() })
    }
}

/// The number `path` selects in `json`: exactly one node, and a number.
pub fn select_number(path: &serde_json_path::JsonPath, json: &serde_json::Value) -> Option<f64> {
    path.query(json).exactly_one().ok()?.as_f64()
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::path::Path;
    use std::thread;

    use super::*;
    use crate::model::record::Batch;

    /// Serves `response` once on 127.0.0.1, after reading the request head.
    fn serve(response: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else { return };
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => return,
                }
            }
            stream.write_all(&response).ok();
        });
        format!("http://127.0.0.1:{port}/health")
    }

    fn canned(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    fn fetch(src: &HttpSource) -> Result<(SourceReport, Vec<Batch>), SourceError> {
        let ctx = ReadContext { data_dir: Path::new("/nonexistent"), scan_time_ms: 0, batch_rows: 10, cursor: None };
        let mut batches = Vec::new();
        let report = src.read(&ctx, &mut |b| {
            batches.push(b);
            Ok(())
        })?;
        Ok((report, batches))
    }

    fn source(url: String, max_bytes: usize) -> HttpSource {
        HttpSource::new("health", url, Duration::from_secs(5), max_bytes)
    }

    /// The full message of an error, with its causes.
    fn message(e: &SourceError) -> String {
        let mut out = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }

    /// `(url, status, body, elapsed_ms)` of the one row.
    fn row(batches: &[Batch]) -> (String, i64, String, i64) {
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        assert_eq!((b.kind.as_str(), b.rows), ("response", 1));
        let url = String::from_utf8(b.text[..b.text_ends[0] as usize].to_vec()).unwrap();
        let body = String::from_utf8(b.text[b.text_ends[0] as usize..b.text_ends[1] as usize].to_vec()).unwrap();
        (url, b.ints[0], body, b.ints[1])
    }

    #[test]
    fn a_json_body_is_handed_over_as_received() {
        let body = br#"{"ok": true, "queue": [1, 2]}"#;
        let url = serve(canned("200 OK", "application/json", body));
        let (report, batches) = fetch(&source(url.clone(), 1024)).unwrap();
        assert_eq!(report.records, 1);
        assert_eq!(report.cursor, None);
        let (got_url, status, got_body, _) = row(&batches);
        assert_eq!((got_url, status, got_body.as_bytes()), (url, 200, &body[..]));
    }

    #[test]
    fn the_elapsed_time_covers_a_slow_answer() {
        // The server answers 150 ms after the request: the row's elapsed_ms
        // is at least that, and at most the time the whole fetch took.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/health", listener.local_addr().unwrap());
        thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else { return };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            thread::sleep(Duration::from_millis(150));
            stream.write_all(&canned("200 OK", "application/json", b"{}")).ok();
        });
        let started = Instant::now();
        let (_, batches) = fetch(&source(url, 1024)).unwrap();
        let whole = started.elapsed().as_millis() as i64;
        let elapsed = row(&batches).3;
        assert!((150..=whole).contains(&elapsed), "elapsed_ms {elapsed}, fetch took {whole} ms");
    }

    #[test]
    fn an_error_status_is_data_for_the_detector() {
        let url = serve(canned("500 Internal Server Error", "application/json", br#"{"error":"db down"}"#));
        let (_, batches) = fetch(&source(url, 1024)).unwrap();
        let (_, status, body, _) = row(&batches);
        assert_eq!((status, body.as_str()), (500, r#"{"error":"db down"}"#));
    }

    #[test]
    fn an_error_status_without_json_is_a_read_error_naming_the_status() {
        let url = serve(canned("500 Internal Server Error", "text/html", b"<h1>oops</h1>"));
        let err = fetch(&source(url, 1024)).unwrap_err();
        assert!(matches!(err, SourceError::Read { .. }));
        let msg = message(&err);
        assert!(msg.contains("status 500") && msg.contains("not valid JSON"), "{msg}");
    }

    #[test]
    fn a_body_that_is_not_json_is_a_read_error() {
        let url = serve(canned("200 OK", "text/plain", b"all good"));
        let err = fetch(&source(url, 1024)).unwrap_err();
        assert!(matches!(err, SourceError::Read { ref source_name, .. } if source_name == "health"));
        assert!(message(&err).contains("not valid JSON"), "{}", message(&err));

        let url = serve(canned("200 OK", "application/json", b"\"\xff\xfe\""));
        let err = fetch(&source(url, 1024)).unwrap_err();
        assert!(message(&err).contains("not UTF-8"), "{}", message(&err));
    }

    #[test]
    fn a_body_over_the_cap_is_a_read_error_naming_the_cap() {
        let body = format!("[{}0]", "0,".repeat(600));
        let url = serve(canned("200 OK", "application/json", body.as_bytes()));
        let err = fetch(&source(url, 1000)).unwrap_err();
        assert!(matches!(err, SourceError::Read { .. }));
        assert!(message(&err).contains("cap of 1000 bytes"), "{}", message(&err));

        // Without a content-length (read to the close), the cap holds as well.
        let mut raw = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n".to_vec();
        raw.extend_from_slice(body.as_bytes());
        let err = fetch(&source(serve(raw), 1000)).unwrap_err();
        assert!(message(&err).contains("cap of 1000 bytes"), "{}", message(&err));

        // Exactly at the cap is fine.
        let url = serve(canned("200 OK", "application/json", body.as_bytes()));
        let (_, batches) = fetch(&source(url, body.len())).unwrap();
        assert_eq!(row(&batches).2, body);
    }

    #[cfg(unix)]
    #[test]
    fn a_refused_connection_says_so() {
        // A socket bound and never listening: connections to its port are
        // refused, and no test running beside this one can take the port.
        let (_bound, port) = bound_not_listening();
        let err = fetch(&source(format!("http://127.0.0.1:{port}/"), 1024)).unwrap_err();
        assert!(matches!(err, SourceError::Read { .. }));
        assert!(message(&err).contains("connection refused"), "{}", message(&err));
    }

    /// A TCP socket bound to a loopback port and never listening, and its port.
    #[cfg(unix)]
    fn bound_not_listening() -> (std::os::fd::OwnedFd, u16) {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket calls on a descriptor this function owns; the
        // address structures are zeroed and sized as the kernel expects.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let rc = libc::bind(fd, (&raw const addr).cast(), len);
            assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
            let mut got: libc::sockaddr_in = std::mem::zeroed();
            let mut got_len = len;
            let rc = libc::getsockname(fd, (&raw mut got).cast(), &mut got_len);
            assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
            (owned, u16::from_be(got.sin_port))
        }
    }

    #[test]
    fn a_silent_server_times_out() {
        // The server accepts and then holds the connection, silent, until
        // the fetch has given up (or for a minute, a bound on a hang): the
        // fetch can only end by its own 200 ms timeout.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (gave_up, until) = std::sync::mpsc::channel::<()>();
        let held = thread::spawn(move || {
            let conn = listener.accept();
            let released = until.recv_timeout(Duration::from_secs(60)).is_ok();
            drop(conn);
            released
        });
        let src = HttpSource::new("slow", format!("http://127.0.0.1:{port}/"), Duration::from_millis(200), 1024);
        let err = fetch(&src).unwrap_err();
        gave_up.send(()).unwrap();
        assert!(held.join().unwrap(), "the fetch ended before the server let go: it gave up by itself");
        assert!(message(&err).contains("timed out after 200 ms"), "{}", message(&err));
    }

    #[test]
    fn redirects_are_not_followed() {
        let raw = b"HTTP/1.1 302 Found\r\nlocation: http://elsewhere.invalid/\r\ncontent-length: 0\r\n\r\n".to_vec();
        let err = fetch(&source(serve(raw), 1024)).unwrap_err();
        let msg = message(&err);
        assert!(msg.contains("302") && msg.contains("not followed"), "{msg}");
    }

    #[test]
    fn https_and_other_schemes_are_refused_clearly() {
        let err = fetch(&source("https://127.0.0.1:1/".into(), 1024)).unwrap_err();
        assert!(matches!(err, SourceError::Read { .. }));
        assert!(message(&err).contains("TLS is not built in"), "{}", message(&err));
        let err = fetch(&source("ftp://example.invalid/".into(), 1024)).unwrap_err();
        assert!(message(&err).contains("not an http:// URL"), "{}", message(&err));
        let err = fetch(&source("http://exa mple/".into(), 1024)).unwrap_err();
        assert!(matches!(err, SourceError::Read { .. }), "{}", message(&err));
    }

    #[test]
    fn a_sink_that_stops_stops_the_read() {
        let url = serve(canned("200 OK", "application/json", b"{}"));
        let ctx = ReadContext { data_dir: Path::new("/nonexistent"), scan_time_ms: 0, batch_rows: 10, cursor: None };
        let err = source(url, 1024).read(&ctx, &mut |_| Err("enough".into())).unwrap_err();
        assert!(matches!(err, SourceError::Stopped { ref reason, .. } if reason == "enough"));
    }
}
