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

/// The shortest token accepted: a shorter one is guessed too soon.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token the environment sets that the watch API refuses to start with.
/// Each names the variable, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("{0} is only whitespace: set a token of at least {min} bytes, or leave it empty to turn it off", min = MIN_TOKEN_LEN)]
    Blank(&'static str),
    #[error("{0} is shorter than {min} bytes", min = MIN_TOKEN_LEN)]
    Short(&'static str),
    #[error("WATCH_ARMING_TOKEN is the same as {0}: arming is a principal of its own")]
    ArmingIsShared(&'static str),
}

/// The watch API's environment, read once.
#[derive(Debug, Clone, Default)]
pub struct WatchEnv {
    /// `WATCH_ADMIN_TOKEN`, else `BOOTSTRAP_TOKEN`; unset or empty means no admin.
    pub admin_token: Option<String>,
    /// `WATCH_ARMING_TOKEN`: the only principal that may arm.
    pub arming_token: Option<String>,
    /// `WATCH_READ_TOKEN`: what the titles need on a non-loopback `--listen`.
    pub read_token: Option<String>,
    /// `WATCH_CANARY_TENANT`: the one tenant requests may aim at.
    pub canary_tenant: Option<String>,
    /// `WATCH_DISPATCHER_ENABLED` (`1`, `true`, `yes`, `on`).
    pub dispatcher_enabled: bool,
    /// `WATCH_DISPATCH_WEBHOOK` or `WATCH_DISPATCH_COMMAND`.
    pub target: Option<Target>,
    /// How each delivery is tried (retries, waits, timeouts, in flight).
    pub delivery: DeliveryEnv,
    /// `WATCH_TOKEN_FAILURES`: wrong tokens allowed per client address and
    /// minute (default 5).
    pub token_failures: u32,
}

/// How the dispatcher tries each fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryEnv {
    /// `WATCH_DISPATCH_RETRIES`: attempts after the first (default 5).
    pub retries: u32,
    /// `WATCH_DISPATCH_BACKOFF_MS`: the first retry's wait, doubled each time (default 200).
    pub backoff_ms: u64,
    /// `WATCH_DISPATCH_CONNECT_TIMEOUT_MS`: one attempt's connect (default 2000).
    pub connect_timeout_ms: u64,
    /// `WATCH_DISPATCH_TIMEOUT_MS`: one attempt, start to answer (default 5000).
    pub attempt_timeout_ms: u64,
    /// `WATCH_DISPATCH_IN_FLIGHT`: deliveries at once (default 4, at least 1).
    pub in_flight: usize,
}

impl Default for DeliveryEnv {
    fn default() -> Self {
        DeliveryEnv { retries: 5, backoff_ms: 200, connect_timeout_ms: 2000, attempt_timeout_ms: 5000, in_flight: 4 }
    }
}

fn truthy(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

/// One token variable: unset or empty is off; whitespace-only or shorter
/// than [`MIN_TOKEN_LEN`] is refused; surrounding whitespace (a newline
/// from a file) is not part of it.
fn token(get: &impl Fn(&str) -> Option<String>, variable: &'static str) -> Result<Option<String>, EnvError> {
    let Some(raw) = get(variable).filter(|v| !v.is_empty()) else { return Ok(None) };
    let t = raw.trim();
    if t.is_empty() {
        return Err(EnvError::Blank(variable));
    }
    if t.len() < MIN_TOKEN_LEN {
        return Err(EnvError::Short(variable));
    }
    Ok(Some(t.to_owned()))
}

impl WatchEnv {
    /// Reads the variables through `get` (the process environment in the
    /// binary, a map in tests); refuses a token that cannot be meant.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let admin_var = if get("WATCH_ADMIN_TOKEN").is_some() { "WATCH_ADMIN_TOKEN" } else { "BOOTSTRAP_TOKEN" };
        let admin_token = token(&get, admin_var)?;
        let arming_token = token(&get, "WATCH_ARMING_TOKEN")?;
        let read_token = token(&get, "WATCH_READ_TOKEN")?;
        if let Some(arming) = &arming_token {
            for (var, other) in [(admin_var, &admin_token), ("WATCH_READ_TOKEN", &read_token)] {
                if other.as_ref() == Some(arming) {
                    return Err(EnvError::ArmingIsShared(var));
                }
            }
        }
        let target = match (get("WATCH_DISPATCH_WEBHOOK"), get("WATCH_DISPATCH_COMMAND")) {
            (Some(url), _) if !url.trim().is_empty() => Some(Target::Webhook(url.trim().to_owned())),
            (_, Some(cmd)) if !cmd.trim().is_empty() => {
                Some(Target::Command(cmd.split_whitespace().map(str::to_owned).collect()))
            }
            _ => None,
        };
        let d = DeliveryEnv::default();
        let num = |var: &str, default: u64| get(var).and_then(|v| v.trim().parse().ok()).unwrap_or(default);
        let delivery = DeliveryEnv {
            retries: get("WATCH_DISPATCH_RETRIES").and_then(|v| v.trim().parse().ok()).unwrap_or(d.retries),
            backoff_ms: num("WATCH_DISPATCH_BACKOFF_MS", d.backoff_ms),
            connect_timeout_ms: num("WATCH_DISPATCH_CONNECT_TIMEOUT_MS", d.connect_timeout_ms).max(1),
            attempt_timeout_ms: num("WATCH_DISPATCH_TIMEOUT_MS", d.attempt_timeout_ms).max(1),
            in_flight: usize::try_from(num("WATCH_DISPATCH_IN_FLIGHT", d.in_flight as u64)).unwrap_or(1).clamp(1, 64),
        };
        Ok(WatchEnv {
            admin_token,
            arming_token,
            read_token,
            canary_tenant: get("WATCH_CANARY_TENANT").filter(|t| !t.trim().is_empty()),
            dispatcher_enabled: get("WATCH_DISPATCHER_ENABLED").is_some_and(|v| truthy(&v)),
            target,
            delivery,
            token_failures: u32::try_from(num("WATCH_TOKEN_FAILURES", u64::from(super::limiter::MAX_FAILURES)))
                .unwrap_or(u32::MAX),
        })
    }

    pub fn from_process() -> Result<Self, EnvError> {
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

    fn vars(vars: &[(&str, &str)]) -> Result<WatchEnv, EnvError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        WatchEnv::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    fn env(v: &[(&str, &str)]) -> WatchEnv {
        vars(v).unwrap()
    }

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        h
    }

    const ADMIN: &str = "admin-token-0123456789";

    #[test]
    fn an_empty_or_unset_token_closes_every_admin_route() {
        for e in [env(&[]), env(&[("WATCH_ADMIN_TOKEN", "")]), env(&[("BOOTSTRAP_TOKEN", "")])] {
            let err = check_bearer(&bearer(""), e.admin_token.as_deref(), "WATCH_ADMIN_TOKEN").unwrap_err();
            assert_eq!(err.status, 401);
        }
    }

    #[test]
    fn the_admin_token_comes_from_either_variable_and_must_match() {
        let e = env(&[("BOOTSTRAP_TOKEN", ADMIN)]);
        assert!(check_bearer(&bearer(ADMIN), e.admin_token.as_deref(), "x").is_ok());
        assert_eq!(check_bearer(&bearer(&ADMIN[1..]), e.admin_token.as_deref(), "x").unwrap_err().status, 401);
        assert_eq!(check_bearer(&HeaderMap::new(), e.admin_token.as_deref(), "x").unwrap_err().status, 401);
        let e = env(&[("WATCH_ADMIN_TOKEN", ADMIN), ("BOOTSTRAP_TOKEN", "bootstrap-token-0123456789")]);
        assert!(check_bearer(&bearer(ADMIN), e.admin_token.as_deref(), "x").is_ok());
    }

    #[test]
    fn a_blank_or_short_token_or_a_shared_arming_token_is_refused_naming_the_variable_not_the_value() {
        let cases = [
            (vec![("WATCH_ADMIN_TOKEN", " \t\n")], EnvError::Blank("WATCH_ADMIN_TOKEN")),
            (vec![("BOOTSTRAP_TOKEN", "short-secret")], EnvError::Short("BOOTSTRAP_TOKEN")),
            (vec![("WATCH_READ_TOKEN", "   ")], EnvError::Blank("WATCH_READ_TOKEN")),
            (
                vec![("WATCH_ADMIN_TOKEN", ADMIN), ("WATCH_ARMING_TOKEN", ADMIN)],
                EnvError::ArmingIsShared("WATCH_ADMIN_TOKEN"),
            ),
            (
                vec![("WATCH_READ_TOKEN", ADMIN), ("WATCH_ARMING_TOKEN", ADMIN)],
                EnvError::ArmingIsShared("WATCH_READ_TOKEN"),
            ),
        ];
        for (v, want) in cases {
            let got = vars(&v).unwrap_err();
            assert_eq!(got, want);
            let text = got.to_string();
            assert!(v.iter().all(|(_, value)| value.trim().is_empty() || !text.contains(value.trim())), "{text}");
        }
        let e = env(&[("WATCH_ARMING_TOKEN", " arming-token-0123456789\n")]);
        assert_eq!(e.arming_token.as_deref(), Some("arming-token-0123456789"), "a file's newline is not part of it");
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
