//! The HTTP side's connections: accepting them, their bounds in time and
//! count, and stopping within a bound whatever clients do.
//!
//! It owns the accept loop (hyper's HTTP/1 server with tokio's timer, in
//! place of `axum::serve`, which gives hyper no timer and so no
//! header-read timeout), the bounds of [`Bounds`] (a request's headers
//! within `header_read`, which is also how long a kept-alive connection may
//! wait idle for its next request; a request answered within `request` or
//! refused 503 `request_timeout`; at most `max_connections` at once, one
//! more answered 503 `too_many_connections` and closed, with a warning
//! logged once each time the cap is reached; a read buffer of at most
//! [`MAX_BUF`] per connection), the client's address handed to the
//! handlers (`ConnectInfo`), and the stop: no new connection, each open one
//! told to close after its answer in progress, and whatever is still open
//! after `drain` dropped. It never routes and never decides what a request
//! may do: the router does.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot, watch};
use tower::ServiceExt as _;

use super::problem::Problem;

/// The read buffer of one connection, at most (hyper's minimum is 8 KiB);
/// the headers' own bound (16 KiB, 431) is checked by the routes.
pub const MAX_BUF: usize = 64 * 1024;

/// The HTTP side's bounds in time and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// A request's headers must arrive within this; a kept-alive connection
    /// waits at most this for its next request.
    pub header_read: Duration,
    /// From the headers read to the answer sent (the body read included).
    pub request: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// What a stop waits for answers in progress before it drops them.
    pub drain: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            header_read: Duration::from_secs(10),
            request: Duration::from_secs(30),
            max_connections: 1024,
            drain: Duration::from_secs(2),
        }
    }
}

/// Serves `app` on `listener` until `stop` fires (or its sender is dropped),
/// then drains for at most `bounds.drain`.
pub async fn serve(listener: TcpListener, app: Router, bounds: Bounds, mut stop: oneshot::Receiver<()>) {
    let permits = Arc::new(Semaphore::new(bounds.max_connections));
    let (drain_tx, drain_rx) = watch::channel(false);
    let mut open = tokio::task::JoinSet::new();
    let mut at_cap = false;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors, most often: wait rather than spin.
                        tracing::warn!(error = %e, "the watch API cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        at_cap = false;
                        let (app, drain) = (app.clone(), drain_rx.clone());
                        open.spawn(async move {
                            connection(stream, peer, app, bounds, drain).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        if !at_cap {
                            tracing::warn!(max_connections = bounds.max_connections, "the watch API's connection cap is reached: new connections are answered 503 and closed until one ends");
                            at_cap = true;
                        }
                        refuse(&stream);
                    }
                }
            }
            Some(_) = open.join_next(), if !open.is_empty() => {}
        }
    }
    let _ = drain_tx.send(true);
    let drained = tokio::time::timeout(bounds.drain, async { while open.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::info!(left = open.len(), "stopping: connections still open after the drain are dropped");
    }
    open.abort_all();
}

/// One connection, until it ends or the drain closes it.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    bounds: Bounds,
    mut drain: watch::Receiver<bool>,
) {
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let answer = app.clone().oneshot(request);
        async move {
            Ok::<Response, Infallible>(match tokio::time::timeout(bounds.request, answer).await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_) => timed_out(bounds.request),
            })
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(bounds.header_read).max_buf_size(MAX_BUF).keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    // The guard `wait_for` answers with is dropped here, never held across an await.
    let stopping = async move {
        let _ = drain.wait_for(|d| *d).await;
    };
    tokio::select! {
        ended = conn.as_mut() => {
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "a watch API connection ended");
            }
        }
        () = stopping => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

fn timed_out(limit: Duration) -> Response {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "request_timeout",
        format!("the request was not answered within {} s", limit.as_secs()),
    )
    .retry_after(1)
    .into_response()
}

/// Answers a connection over the cap with a 503 and closes it. The answer
/// is one small write into a fresh socket's empty send buffer: it never
/// waits for the client.
fn refuse(stream: &TcpStream) {
    let body = serde_json::to_string(
        &Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            "the watch API has as many connections open as it allows; try again in a moment",
        )
        .retry_after(1),
    )
    .unwrap_or_default();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {}\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        super::problem::CONTENT_TYPE,
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}
