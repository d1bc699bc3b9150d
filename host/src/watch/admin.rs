//! The admin mutations: quarantine, release, enable, disable, force-wake,
//! an issue's fix and reopen, the UI snapshot, and arming (a principal of
//! its own).
//!
//! It owns checking the bearer token (before anything else is looked at),
//! parsing the small JSON body (unknown fields refused), the tenant rule,
//! and turning each mutation into a [`Command`] sent through the core's
//! [`Handle`](crate::core::sentinel::Handle), waiting for the single writer's
//! answer on a blocking thread. The writer records what is a fact (a
//! quarantine, a release, a force-wake's diagnostic fire) in the fire log;
//! this module never writes the ledger, never scans and never delivers.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::gates::{GateState, check_bearer};
use super::problem::Problem;
use super::reads::{self, blocking};
use crate::core::sentinel::{Applied, Command, CommandError};
use crate::ledger::LifecycleError;

/// What an admin mutation may carry.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminBody {
    /// The tenant aimed at; with none, the default (see the response).
    pub tenant: Option<String>,
}

/// The arming principal's one request.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArmingBody {
    pub armed: bool,
}

/// Parses a JSON body: empty is the default (when `T` has one), anything
/// else must be JSON of exactly `T`'s fields.
pub fn parse_body<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes, empty: Option<T>) -> Result<T, Problem> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return empty.ok_or_else(|| Problem::unprocessable("a JSON body is required"));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")));
    if !json {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be `Content-Type: application/json`",
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() { "is not JSON" } else { "does not fit" };
        Problem::unprocessable(format!("the body {what}: {}", crate::base::sanitize::one_line(&e.to_string())))
    })
}

/// Checks a bearer token for `client`: refused at once while the client is
/// over its failed attempts ([`FailedAttempts`](super::limiter::FailedAttempts)),
/// and a wrong token counts as one more.
pub fn authorize(
    state: &AppState,
    client: SocketAddr,
    headers: &HeaderMap,
    expected: Option<&str>,
    variable: &str,
) -> Result<(), Problem> {
    let now = std::time::Instant::now();
    state.attempts.check(client.ip(), now)?;
    check_bearer(headers, expected, variable).inspect_err(|_| {
        // A closed route (no token set) cannot be guessed open, and another
        // principal's own token on the wrong route is no guess: not counted.
        let env = &state.env;
        let known = [&env.admin_token, &env.arming_token, &env.read_token]
            .into_iter()
            .any(|t| t.is_some() && check_bearer(headers, t.as_deref(), variable).is_ok());
        if expected.is_some() && !known {
            state.attempts.failed(client.ip(), now);
        }
    })
}

fn admin(state: &AppState, client: SocketAddr, headers: &HeaderMap) -> Result<(), Problem> {
    authorize(state, client, headers, state.env.admin_token.as_deref(), "WATCH_ADMIN_TOKEN (or BOOTSTRAP_TOKEN)")
}

/// What a mutation did.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Mutation {
    pub sentinel: String,
    pub action: Action,
    /// The tenant the request landed in.
    pub tenant: String,
    /// Whether it was defaulted (no tenant in the body).
    pub tenant_defaulted: bool,
    /// What the core applied (`applied`: `health`, `admin`, `woken`, ...).
    #[schema(value_type = Object)]
    pub result: Applied,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Quarantine,
    Release,
    Enable,
    Disable,
    ForceWake,
}

fn command_problem(e: CommandError) -> Problem {
    match e {
        CommandError::UnknownDetector(name) => {
            Problem::not_found(format!("no sentinel named `{}` is loaded", crate::base::sanitize::one_line(&name)))
        }
        CommandError::Issue(LifecycleError::Unknown(sig)) => {
            Problem::not_found(format!("no issue has the signature `{}`", crate::base::sanitize::one_line(&sig)))
        }
        CommandError::Issue(e @ LifecycleError::Already { .. }) => {
            Problem::new(StatusCode::CONFLICT, "conflict", crate::base::sanitize::one_line(&e.to_string()))
        }
        CommandError::Gone => Problem::new(StatusCode::SERVICE_UNAVAILABLE, "core_gone", e.to_string()),
        e => {
            tracing::error!(error = %crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)), "an admin mutation failed");
            Problem::internal("the core could not apply it; the server's log says why")
        }
    }
}

async fn mutate(
    state: Arc<AppState>,
    client: SocketAddr,
    name: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    action: Action,
) -> Result<Json<Mutation>, Problem> {
    admin(&state, client, &headers)?;
    let Path(name) = name?;
    let body: AdminBody = parse_body(&headers, &body?, Some(AdminBody::default()))?;
    let (tenant, tenant_defaulted) = state.env.tenant(body.tenant.as_deref())?;
    let command = match action {
        Action::Quarantine => Command::Quarantine(name.clone()),
        Action::Release => Command::Release(name.clone()),
        Action::Enable => Command::Enable(name.clone()),
        Action::Disable => Command::Disable(name.clone()),
        Action::ForceWake => Command::ForceWake { detector: name.clone(), tenant: tenant.clone() },
    };
    let handle = state.handle.clone();
    let result = blocking(move || handle.send(command).map_err(command_problem)).await?;
    tracing::info!(sentinel = %name, ?action, %tenant, "admin mutation applied");
    Ok(Json(Mutation { sentinel: name, action, tenant, tenant_defaulted, result }))
}

macro_rules! mutation {
    ($fn:ident, $action:expr, $path:literal) => {
        #[utoipa::path(post, path = $path, tag = "admin", security(("bearer" = [])),
                                    params(("name" = String, Path, description = "the sentinel's name")),
                                    request_body(content = Option<AdminBody>, content_type = "application/json"),
                                    responses((status = 200, body = Mutation),
                                        (status = 401, body = Problem, content_type = "application/problem+json"),
                                        (status = 403, body = Problem, content_type = "application/problem+json"),
                                        (status = 404, body = Problem, content_type = "application/problem+json"),
                                        (status = 413, body = Problem, content_type = "application/problem+json"),
                                        (status = 415, body = Problem, content_type = "application/problem+json"),
                                        (status = 422, body = Problem, content_type = "application/problem+json")))]
        pub async fn $fn(
            State(state): State<Arc<AppState>>,
            ConnectInfo(client): ConnectInfo<SocketAddr>,
            name: Result<Path<String>, PathRejection>,
            headers: HeaderMap,
            body: Result<Bytes, BytesRejection>,
        ) -> Result<Json<Mutation>, Problem> {
            mutate(state, client, name, headers, body, $action).await
        }
    };
}

mutation!(quarantine, Action::Quarantine, "/v1/admin/sentinels/{name}/quarantine");
mutation!(release, Action::Release, "/v1/admin/sentinels/{name}/release");
mutation!(enable, Action::Enable, "/v1/admin/sentinels/{name}/enable");
mutation!(disable, Action::Disable, "/v1/admin/sentinels/{name}/disable");
mutation!(force_wake, Action::ForceWake, "/v1/admin/sentinels/{name}/force-wake");

/// What a fix may carry.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FixBody {
    /// The operator's note (e.g. the release that fixed it).
    pub note: Option<String>,
    /// The tenant aimed at; with none, the default.
    pub tenant: Option<String>,
}

/// What an issue's fix or reopen did.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssueMutation {
    pub sig: String,
    /// `fixed` or `open`.
    pub state: String,
    /// The fire-log entry that records it.
    pub fire_seq: u64,
    pub tenant: String,
    pub tenant_defaulted: bool,
}

async fn change_issue(
    state: Arc<AppState>,
    client: SocketAddr,
    sig: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    fix: bool,
) -> Result<Json<IssueMutation>, Problem> {
    admin(&state, client, &headers)?;
    let Path(sig) = sig?;
    let body: FixBody = parse_body(&headers, &body?, Some(FixBody::default()))?;
    let (tenant, tenant_defaulted) = state.env.tenant(body.tenant.as_deref())?;
    let command =
        if fix { Command::FixIssue { sig: sig.clone(), note: body.note } } else { Command::ReopenIssue(sig.clone()) };
    let handle = state.handle.clone();
    let applied = blocking(move || handle.send(command).map_err(command_problem)).await?;
    let Applied::Issue { change } = applied else {
        return Err(Problem::internal("the core answered an issue's change with something else"));
    };
    tracing::info!(%sig, state = change.state.as_str(), %tenant, "an issue's state changed by the operator");
    Ok(Json(IssueMutation {
        sig: change.sig,
        state: change.state.as_str().to_owned(),
        fire_seq: change.fire_seq,
        tenant,
        tenant_defaulted,
    }))
}

macro_rules! issue_change {
    ($fn:ident, $fix:expr, $path:literal, $body:ty) => {
        #[utoipa::path(post, path = $path, tag = "admin", security(("bearer" = [])),
                                    params(("sig" = String, Path, description = "the issue's signature")),
                                    request_body(content = Option<$body>, content_type = "application/json"),
                                    responses((status = 200, body = IssueMutation),
                                        (status = 401, body = Problem, content_type = "application/problem+json"),
                                        (status = 403, body = Problem, content_type = "application/problem+json"),
                                        (status = 404, body = Problem, content_type = "application/problem+json"),
                                        (status = 409, body = Problem, content_type = "application/problem+json"),
                                        (status = 413, body = Problem, content_type = "application/problem+json"),
                                        (status = 415, body = Problem, content_type = "application/problem+json"),
                                        (status = 422, body = Problem, content_type = "application/problem+json")))]
        pub async fn $fn(
            State(state): State<Arc<AppState>>,
            ConnectInfo(client): ConnectInfo<SocketAddr>,
            sig: Result<Path<String>, PathRejection>,
            headers: HeaderMap,
            body: Result<Bytes, BytesRejection>,
        ) -> Result<Json<IssueMutation>, Problem> {
            change_issue(state, client, sig, headers, body, $fix).await
        }
    };
}

issue_change!(fix_issue, true, "/v1/admin/issues/{sig}/fix", FixBody);
issue_change!(reopen_issue, false, "/v1/admin/issues/{sig}/reopen", AdminBody);

/// What the status page shows, as JSON.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub taken_at: i64,
    pub gates: GateState,
    pub sentinels: Vec<reads::SentinelView>,
    #[schema(value_type = Vec<Object>)]
    pub fires: Vec<reads::ShownFire>,
    /// The open and regressed issues, with their last days' trend.
    pub issues: Vec<super::issue_page::ShownIssue>,
    pub chain: ChainSummary,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainSummary {
    pub ok: bool,
    pub entries: u64,
    pub kid: Option<String>,
    pub finding: Option<String>,
}

/// The snapshot the page renders: sentinels, the latest fires, the chain
/// (its verification `v`, from [`chain::current`](super::chain::current)), the gates.
pub fn snapshot(state: &AppState, fires: u32, v: crate::firelog::Verification) -> Result<Snapshot, Problem> {
    Ok(Snapshot {
        taken_at: reads::now_ms(),
        gates: reads::gate_state(state)?,
        sentinels: reads::sentinels(state)?,
        fires: reads::fires_page(state, &reads::PageQuery { limit: Some(fires), ..Default::default() })?.items,
        issues: match reads::view(state)? {
            Some(v) => super::issue_page::shown(&v, reads::now_ms()).map_err(reads::ledger_problem)?,
            None => Vec::new(),
        },
        chain: ChainSummary {
            ok: v.ok,
            entries: v.entries,
            kid: v.kid.or_else(|| v.head.map(|h| h.kid)),
            finding: v.finding.map(|f| f.problem),
        },
    })
}

/// The UI snapshot (admin): everything the status page shows, in one body.
#[utoipa::path(post, path = "/v1/admin/ui-snapshot", tag = "admin", security(("bearer" = [])),
    request_body(content = Option<AdminBody>, content_type = "application/json"),
    responses((status = 200, body = Snapshot),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 415, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json")))]
pub async fn ui_snapshot(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Snapshot>, Problem> {
    admin(&state, client, &headers)?;
    let body: AdminBody = parse_body(&headers, &body?, Some(AdminBody::default()))?;
    state.env.tenant(body.tenant.as_deref())?;
    let chain = super::chain::current(&state).await?;
    blocking(move || snapshot(&state, 20, chain)).await.map(Json)
}

/// Arming (`action_production_armed`): only the holder of
/// `WATCH_ARMING_TOKEN`; the admin token does not open it, and arming opens
/// no other gate.
#[utoipa::path(post, path = "/v1/admin/arming", tag = "arming", security(("arming" = [])),
    request_body(content = ArmingBody, content_type = "application/json"),
    responses((status = 200, body = GateState),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 415, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json")))]
pub async fn arming(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<GateState>, Problem> {
    authorize(&state, client, &headers, state.env.arming_token.as_deref(), "WATCH_ARMING_TOKEN")?;
    let body: ArmingBody = parse_body(&headers, &body?, None)?;
    state.gates.set_armed(body.armed);
    tracing::warn!(armed = body.armed, "action_production_armed switched by the arming principal");
    blocking(move || reads::gate_state(&state)).await.map(Json)
}
