//! Errors as RFC 9457 problem details (`application/problem+json`).
//!
//! It owns the shape every error of the watch API has (type, title, status,
//! detail and a stable `code`), and the mapping of axum's own rejections
//! (a body too large, a JSON body that does not fit, a query that does not
//! parse) onto it. It never decides whether a request is allowed: the
//! handlers and the gates do, and answer with a [`Problem`].

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub const CONTENT_TYPE: &str = "application/problem+json";

/// One problem, as RFC 9457 describes it, with the `code` extension.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub type_: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// A stable, machine-readable name of the problem (`unauthorized`,
    /// `single_tenant_violation`, ...).
    pub code: &'static str,
    /// Seconds a client is to wait (`Retry-After`), for a 429 or a 503.
    #[serde(skip)]
    pub retry_after: Option<u64>,
    /// The refused page's own origin, named back to it in
    /// `Access-Control-Allow-Origin` so it can read why it was refused
    /// (this refusal only; no other answer ever carries it).
    #[serde(skip)]
    pub readable_by: Option<String>,
}

impl Problem {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Problem {
            type_: format!("urn:sentinel:problem:{code}"),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            code,
            retry_after: None,
            readable_by: None,
        }
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", detail)
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", detail)
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(origin) = self.readable_by.and_then(|o| HeaderValue::from_str(&o).ok()) {
            response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            response.headers_mut().insert(header::VARY, HeaderValue::from_static("Origin"));
        }
        response
    }
}

impl From<axum::extract::rejection::QueryRejection> for Problem {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        Problem::unprocessable(crate::base::sanitize::one_line(&r.body_text()).into_owned())
    }
}

impl From<axum::extract::rejection::BytesRejection> for Problem {
    fn from(r: axum::extract::rejection::BytesRejection) -> Self {
        let status = r.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "bad_body" };
        Problem::new(status, code, crate::base::sanitize::one_line(&r.body_text()).into_owned())
    }
}

impl From<axum::extract::rejection::PathRejection> for Problem {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        Problem::not_found(crate::base::sanitize::one_line(&r.body_text()).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_problem_json_with_its_status_and_code() {
        let r = Problem::new(StatusCode::FORBIDDEN, "single_tenant_violation", "x").into_response();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(r.headers()[header::CONTENT_TYPE], CONTENT_TYPE);
        let r = Problem::unauthorized("no token").into_response();
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
    }
}
