//! The route table and the bounds every request passes through.
//!
//! It owns which path and method reach which handler, the answer for
//! anything else (404 and 405 as problem+json), and the bounds: bodies at
//! most [`MAX_BODY`] bytes (413), the query string at most [`MAX_QUERY`]
//! bytes (414), all headers together at most [`MAX_HEADERS`] bytes (431).
//! Every request passes the [`guard`] (its `Host` and `Origin`) first. It
//! never reads the ledger and never checks a token: the handlers do.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::problem::Problem;
use super::{AppState, admin, guard, issue_page, metrics, openapi, page, reads};

pub const MAX_BODY: usize = 16 * 1024;
pub const MAX_QUERY: usize = 2048;
pub const MAX_HEADERS: usize = 16 * 1024;

/// Every route the API serves, as (method, path): the OpenAPI test and the
/// docs are checked against this list.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/issues/{sig}"),
    ("GET", "/openapi.json"),
    ("GET", "/v1/sentinels"),
    ("GET", "/v1/sentinels/{name}"),
    ("GET", "/v1/fires"),
    ("GET", "/v1/issues"),
    ("GET", "/v1/chain"),
    ("GET", "/v1/public-key"),
    ("GET", "/v1/gates"),
    ("GET", "/v1/dispatch"),
    ("GET", "/v1/fleet"),
    ("GET", "/metrics"),
    ("POST", "/v1/admin/sentinels/{name}/quarantine"),
    ("POST", "/v1/admin/sentinels/{name}/release"),
    ("POST", "/v1/admin/sentinels/{name}/enable"),
    ("POST", "/v1/admin/sentinels/{name}/disable"),
    ("POST", "/v1/admin/sentinels/{name}/force-wake"),
    ("POST", "/v1/admin/issues/{sig}/fix"),
    ("POST", "/v1/admin/issues/{sig}/reopen"),
    ("POST", "/v1/admin/ui-snapshot"),
    ("POST", "/v1/admin/arming"),
];

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(page::status_page))
        .route("/issues/{sig}", get(issue_page::issue_page))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/v1/sentinels", get(reads::list_sentinels))
        .route("/v1/sentinels/{name}", get(reads::one_sentinel))
        .route("/v1/fires", get(reads::fires))
        .route("/v1/issues", get(reads::issues))
        .route("/v1/chain", get(reads::chain))
        .route("/v1/public-key", get(reads::public_key))
        .route("/v1/gates", get(reads::gates))
        .route("/v1/dispatch", get(reads::dispatch))
        .route("/v1/fleet", get(reads::fleet))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/admin/sentinels/{name}/quarantine", post(admin::quarantine))
        .route("/v1/admin/sentinels/{name}/release", post(admin::release))
        .route("/v1/admin/sentinels/{name}/enable", post(admin::enable))
        .route("/v1/admin/sentinels/{name}/disable", post(admin::disable))
        .route("/v1/admin/sentinels/{name}/force-wake", post(admin::force_wake))
        .route("/v1/admin/issues/{sig}/fix", post(admin::fix_issue))
        .route("/v1/admin/issues/{sig}/reopen", post(admin::reopen_issue))
        .route("/v1/admin/ui-snapshot", post(admin::ui_snapshot))
        .route("/v1/admin/arming", post(admin::arming))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(bounds))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), guard::check))
        .with_state(state)
}

async fn not_found() -> Problem {
    Problem::not_found("no such route; GET /openapi.json lists them")
}

async fn method_not_allowed() -> Problem {
    Problem::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
}

/// Refuses an oversized query or header set before any handler runs.
async fn bounds(request: Request, next: Next) -> Response {
    if request.uri().query().is_some_and(|q| q.len() > MAX_QUERY) {
        return Problem::new(
            StatusCode::URI_TOO_LONG,
            "query_too_long",
            format!("the query string is longer than {MAX_QUERY} bytes"),
        )
        .into_response();
    }
    let headers: usize = request.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if headers > MAX_HEADERS {
        return Problem::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!("the headers together are longer than {MAX_HEADERS} bytes"),
        )
        .into_response();
    }
    next.run(request).await
}
