//! Who may do what: the admin and arming tokens, the canary tenant pin, and
//! the three gates (observing, dispatching, armed).
//!
//! It owns reading the watch API's environment once at start-up
//! ([`WatchEnv`]), comparing bearer tokens in constant time, the tenant rule
//! and the gates' state. Opening one gate never opens the next: dispatching
//! is fixed at start-up by `WATCH_DISPATCHER_ENABLED`, arming
//! (`action_production_armed`) is switched at run time only by the holder
//! of `WATCH_ARMING_TOKEN`, and neither touches the other. It never serves a
//! request and never delivers anything.

use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::{HeaderMap, StatusCode, header};
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::problem::Problem;

/// The tenant a request with no tenant lands in, unless a canary is pinned.
pub const DEFAULT_TENANT: &str = "sovereign";

/// Where a dispatched fire goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// HTTP POST of each fire to this `http://` URL.
    Webhook(String),
    /// This program (and its arguments, split on whitespace), the fire as
    /// JSON on its standard input.
    Command(Vec<String>),
}

/// The watch API's environment, read once.
#[derive(Debug, Clone, Default)]
pub struct WatchEnv {
    /// `WATCH_ADMIN_TOKEN`, else `BOOTSTRAP_TOKEN`; empty means no admin.
    pub admin_token: Option<String>,
    /// `WATCH_ARMING_TOKEN`: the only principal that may arm.
    pub arming_token: Option<String>,
    /// `WATCH_CANARY_TENANT`: the one tenant requests may aim at.
    pub canary_tenant: Option<String>,
    /// `WATCH_DISPATCHER_ENABLED` (`1`, `true`, `yes`, `on`).
    pub dispatcher_enabled: bool,
    /// `WATCH_DISPATCH_WEBHOOK` or `WATCH_DISPATCH_COMMAND`.
    pub target: Option<Target>,
    /// `WATCH_DISPATCH_RETRIES`: attempts after the first (default 5).
    pub retries: u32,
    /// `WATCH_DISPATCH_BACKOFF_MS`: the first retry's wait, doubled each time (default 200).
    pub backoff_ms: u64,
}

fn truthy(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

impl WatchEnv {
    /// Reads the variables through `get` (the process environment in the
    /// binary, a map in tests).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        let admin_token = get("WATCH_ADMIN_TOKEN").or_else(|| get("BOOTSTRAP_TOKEN"));
        let target = match (get("WATCH_DISPATCH_WEBHOOK"), get("WATCH_DISPATCH_COMMAND")) {
            (Some(url), _) if !url.trim().is_empty() => Some(Target::Webhook(url.trim().to_owned())),
            (_, Some(cmd)) if !cmd.trim().is_empty() => {
                Some(Target::Command(cmd.split_whitespace().map(str::to_owned).collect()))
            }
            _ => None,
        };
        WatchEnv {
            admin_token,
            arming_token: get("WATCH_ARMING_TOKEN"),
            canary_tenant: get("WATCH_CANARY_TENANT").filter(|t| !t.trim().is_empty()),
            dispatcher_enabled: get("WATCH_DISPATCHER_ENABLED").is_some_and(|v| truthy(&v)),
            target,
            retries: get("WATCH_DISPATCH_RETRIES").and_then(|v| v.parse().ok()).unwrap_or(5),
            backoff_ms: get("WATCH_DISPATCH_BACKOFF_MS").and_then(|v| v.parse().ok()).unwrap_or(200),
        }
    }

    pub fn from_process() -> Self {
        WatchEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// Whether the dispatcher runs: its gate open and somewhere to deliver.
    pub fn dispatching(&self) -> bool {
        self.dispatcher_enabled && self.target.is_some()
    }

    /// The tenant a request lands in: the one it names, else the default
    /// tenant (`sovereign`, the spec's "no tenant means sovereign"). When a
    /// canary is pinned, any other tenant, the default included, is refused
    /// with 403 `single_tenant_violation`, so nothing lands where nobody
    /// aimed. The bool says whether the tenant was defaulted.
    pub fn tenant(&self, asked: Option<&str>) -> Result<(String, bool), Problem> {
        let (tenant, defaulted) = match asked {
            Some(t) => (t, false),
            None => (DEFAULT_TENANT, true),
        };
        if let Some(pin) = &self.canary_tenant
            && tenant != pin
        {
            let detail = if defaulted {
                format!(
                    "this sentinel is pinned to the canary tenant `{pin}` (WATCH_CANARY_TENANT); the request names no \
                     tenant, so it would land in the default tenant `{DEFAULT_TENANT}`: name `{pin}` in the body"
                )
            } else {
                format!(
                    "this sentinel is pinned to the canary tenant `{pin}` (WATCH_CANARY_TENANT); `{tenant}` is another tenant"
                )
            };
            return Err(Problem::new(StatusCode::FORBIDDEN, "single_tenant_violation", detail));
        }
        Ok((tenant.to_owned(), defaulted))
    }
}

/// Checks `Authorization: Bearer <token>` against `expected` in constant
/// time (both hashed first, so not even the length is compared early). No
/// token configured, or an empty one, closes the route: 401 whatever is sent.
pub fn check_bearer(headers: &HeaderMap, expected: Option<&str>, variable: &str) -> Result<(), Problem> {
    let Some(expected) = expected.filter(|t| !t.is_empty()) else {
        return Err(Problem::unauthorized(format!("this route is closed: {variable} is not set or is empty")));
    };
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| Problem::unauthorized("an `Authorization: Bearer <token>` header is required"))?;
    let a = Sha256::digest(sent.trim().as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    if bool::from(a.ct_eq(&b)) {
        Ok(())
    } else {
        Err(Problem::unauthorized("the bearer token is not the one for this route"))
    }
}

/// The gates' live state.
#[derive(Debug, Default)]
pub struct Gates {
    pub dispatching: bool,
    armed: AtomicBool,
}

/// The gates as the API shows them.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct GateState {
    /// At least one loaded sentinel is enabled: it records, nothing more.
    pub observing: bool,
    /// `WATCH_DISPATCHER_ENABLED` with a target: fires are delivered downstream.
    pub dispatching: bool,
    /// Set only by the arming principal; delivered with every fire.
    pub action_production_armed: bool,
}

impl Gates {
    pub fn new(dispatching: bool) -> Self {
        Gates { dispatching, armed: AtomicBool::new(false) }
    }

    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::SeqCst)
    }

    pub fn set_armed(&self, armed: bool) {
        self.armed.store(armed, Ordering::SeqCst);
    }

    pub fn state(&self, observing: bool) -> GateState {
        GateState { observing, dispatching: self.dispatching, action_production_armed: self.armed() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> WatchEnv {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        WatchEnv::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        h
    }

    #[test]
    fn an_empty_or_unset_token_closes_every_admin_route() {
        for e in [env(&[]), env(&[("WATCH_ADMIN_TOKEN", "")]), env(&[("BOOTSTRAP_TOKEN", "")])] {
            let err = check_bearer(&bearer(""), e.admin_token.as_deref(), "WATCH_ADMIN_TOKEN").unwrap_err();
            assert_eq!(err.status, 401);
        }
    }

    #[test]
    fn the_admin_token_comes_from_either_variable_and_must_match() {
        let e = env(&[("BOOTSTRAP_TOKEN", "s3cret")]);
        assert!(check_bearer(&bearer("s3cret"), e.admin_token.as_deref(), "x").is_ok());
        assert_eq!(check_bearer(&bearer("s3cre"), e.admin_token.as_deref(), "x").unwrap_err().status, 401);
        assert_eq!(check_bearer(&HeaderMap::new(), e.admin_token.as_deref(), "x").unwrap_err().status, 401);
        let e = env(&[("WATCH_ADMIN_TOKEN", "a"), ("BOOTSTRAP_TOKEN", "b")]);
        assert!(check_bearer(&bearer("a"), e.admin_token.as_deref(), "x").is_ok());
    }

    #[test]
    fn the_canary_pin_refuses_other_tenants_and_the_default_no_tenant_means_sovereign() {
        let e = env(&[("WATCH_CANARY_TENANT", "canary")]);
        assert_eq!(e.tenant(Some("other")).unwrap_err().code, "single_tenant_violation");
        assert_eq!(e.tenant(Some("canary")).unwrap(), ("canary".into(), false));
        let refused = e.tenant(None).unwrap_err();
        assert_eq!(refused.code, "single_tenant_violation");
        assert!(refused.detail.contains("`sovereign`"), "names the default: {}", refused.detail);
        assert_eq!(env(&[]).tenant(None).unwrap(), (DEFAULT_TENANT.into(), true));
        let sovereign = env(&[("WATCH_CANARY_TENANT", DEFAULT_TENANT)]);
        assert_eq!(sovereign.tenant(None).unwrap(), (DEFAULT_TENANT.into(), true));
    }

    #[test]
    fn the_dispatcher_gate_needs_its_variable_and_a_target_and_never_arms() {
        assert!(!env(&[("WATCH_DISPATCH_WEBHOOK", "http://127.0.0.1:1/")]).dispatching());
        assert!(!env(&[("WATCH_DISPATCHER_ENABLED", "1")]).dispatching());
        let e = env(&[("WATCH_DISPATCHER_ENABLED", "true"), ("WATCH_DISPATCH_COMMAND", "cat -")]);
        assert!(e.dispatching());
        assert_eq!(e.target, Some(Target::Command(vec!["cat".into(), "-".into()])));
        let g = Gates::new(e.dispatching());
        assert!(!g.state(true).action_production_armed, "opening dispatching does not arm");
        g.set_armed(true);
        assert!(Gates::new(false).state(true) != g.state(true));
    }
}
