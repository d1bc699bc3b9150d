//! The OpenAPI document served at `/openapi.json`, generated from the
//! handlers' and types' annotations (utoipa).
//!
//! It owns the list of documented paths and schemas, the three security
//! schemes (the admin, arming and read bearer tokens), and the refusals
//! every route can give before its handler runs. It never
//! serves anything itself but its own route; a test keeps the document and
//! [`ROUTES`](super::routes::ROUTES) equal, path for path and method for
//! method.

use axum::Json;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use super::{admin, gates, issue_page, metrics, page, problem, reads};

struct Security;

/// The refusals every route can give before its handler runs (the guard,
/// the server's bounds), and the admin routes' rate limit: added to each
/// operation here rather than repeated in every annotation.
struct Refusals;

fn problem(description: &str) -> utoipa::openapi::RefOr<utoipa::openapi::Response> {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build();
    ResponseBuilder::new().description(description).content(super::problem::CONTENT_TYPE, content).build().into()
}

impl utoipa::Modify for Refusals {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let every = [
            ("421", "`misdirected_host`: the Host is not one this server answers to"),
            ("403", "`cross_origin`: the Origin is another site's (or the tenant rule, on admin routes)"),
            ("503", "`request_timeout` or `too_many_connections`"),
        ];
        for (path, item) in openapi.paths.paths.iter_mut() {
            for op in [&mut item.get, &mut item.post].into_iter().flatten() {
                let responses = &mut op.responses.responses;
                for (status, what) in every {
                    responses.entry(status.to_owned()).or_insert_with(|| problem(what));
                }
                if path.starts_with("/v1/admin/")
                    || path == "/"
                    || path == "/v1/issues"
                    || path == "/metrics"
                    || path.starts_with("/v1/sentinels")
                {
                    responses
                        .entry("401".to_owned())
                        .or_insert_with(|| problem("`unauthorized`: a token is needed here"));
                    let limited =
                        "`too_many_failed_attempts`: too many wrong tokens from this address; see Retry-After";
                    responses.entry("429".to_owned()).or_insert_with(|| problem(limited));
                }
            }
        }
    }
}

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let schemes = [
            ("bearer", "WATCH_ADMIN_TOKEN or BOOTSTRAP_TOKEN"),
            ("arming", "WATCH_ARMING_TOKEN"),
            ("read", "WATCH_READ_TOKEN: the titles, on a non-loopback --listen only"),
        ];
        for (name, what) in schemes {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(what)).build()),
            );
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "sentinel watch API", description = "Reads are public on loopback (elsewhere titles need WATCH_READ_TOKEN); mutations are admin; arming is a different principal entirely; a foreign Host is 421, a foreign Origin 403 (docs/watch-api.md)."),
    paths(
        page::status_page,
        issue_page::issue_page,
        openapi_json,
        reads::list_sentinels,
        reads::one_sentinel,
        reads::fires,
        reads::issues,
        reads::chain,
        reads::public_key,
        reads::gates,
        reads::dispatch,
        reads::fleet,
        metrics::metrics,
        admin::quarantine,
        admin::release,
        admin::enable,
        admin::disable,
        admin::force_wake,
        admin::fix_issue,
        admin::reopen_issue,
        admin::ui_snapshot,
        admin::arming,
    ),
    components(schemas(problem::Problem, gates::GateState, reads::SentinelList, reads::SentinelView, reads::DispatchView, crate::fleet::StatsView, admin::AdminBody, admin::ArmingBody, admin::FixBody, admin::IssueMutation, issue_page::ShownIssue)),
    modifiers(&Security, &Refusals)
)]
pub struct ApiDoc;

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "reads", responses((status = 200, description = "the OpenAPI document", body = Object)))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_lists_exactly_the_routes_served() {
        let doc = ApiDoc::openapi();
        let mut documented: Vec<(String, String)> = Vec::new();
        for (path, item) in &doc.paths.paths {
            for (method, op) in [("GET", &item.get), ("POST", &item.post), ("PUT", &item.put), ("DELETE", &item.delete)]
            {
                if op.is_some() {
                    documented.push((method.to_owned(), path.clone()));
                }
            }
        }
        documented.sort();
        let mut served: Vec<(String, String)> =
            super::super::routes::ROUTES.iter().map(|(m, p)| ((*m).to_owned(), (*p).to_owned())).collect();
        served.sort();
        assert_eq!(documented, served);
    }

    #[test]
    fn every_error_answer_in_the_document_is_problem_json() {
        let json = serde_json::to_value(ApiDoc::openapi()).unwrap();
        for (path, item) in json["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for (status, response) in op["responses"].as_object().unwrap() {
                    if status.starts_with('4') || status.starts_with('5') {
                        assert!(
                            response["content"]["application/problem+json"].is_object(),
                            "{method} {path} {status}"
                        );
                    }
                }
            }
        }
    }
}
