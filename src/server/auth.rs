//! HTTP basic auth against the web config's bcrypt hashes.
//!
//! A bcrypt check costs tens of milliseconds of CPU by design. Prometheus sends the same
//! credentials on every scrape, so a successful check is remembered (keyed by a keyed hash of
//! user, hash and password, never the password itself); checks run one at a time on a
//! blocking thread, so that a flood of wrong passwords costs at most one core and never
//! delays a probe's reads on the runtime's workers. An unknown user is checked against a dummy
//! hash, so the answer time does not tell which users exist.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use base64::Engine;
use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use tokio::sync::Semaphore;

use super::web_config::WebConfig;

/// A hash at the usual cost 10, checked for unknown users (made once, on first use).
fn dummy_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| bcrypt::hash("llm-probe", 10).unwrap_or_default())
}

/// Successful checks remembered (a reload that changes a hash changes the key, so old
/// entries simply stop matching); the set is cleared when it reaches this size.
const CACHE_CAPACITY: usize = 1024;

/// The outcome of checking a request's credentials.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No users configured, or the right credentials.
    Allowed,
    /// Missing or wrong credentials: answer 401 with `WWW-Authenticate`.
    Denied,
}

/// Remembers successful checks; serialises bcrypt work.
pub struct Authenticator {
    hasher: std::collections::hash_map::RandomState,
    ok: Mutex<HashSet<u64>>,
    bcrypt: Arc<Semaphore>,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator {
            hasher: Default::default(),
            ok: Default::default(),
            bcrypt: Arc::new(Semaphore::new(1)),
        }
    }
}

/// `(user, password)` from an `Authorization: Basic …` header.
fn credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

impl Authenticator {
    fn key(&self, user: &str, hash: &str, password: &str) -> u64 {
        self.hasher.hash_one((user, hash, password))
    }

    /// Checks the request's `Authorization` header against `web`'s users.
    pub async fn check(&self, web: &WebConfig, headers: &HeaderMap) -> Verdict {
        if web.users.is_empty() {
            return Verdict::Allowed;
        }
        let Some((user, password)) = credentials(headers) else {
            return Verdict::Denied;
        };
        let hash = web.users.get(&user).cloned();
        let known = hash.is_some();
        let key = self.key(&user, hash.as_deref().unwrap_or(""), &password);
        if known
            && self
                .ok
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&key)
        {
            return Verdict::Allowed;
        }
        let Ok(_permit) = self.bcrypt.clone().acquire_owned().await else {
            return Verdict::Denied;
        };
        let matches = tokio::task::spawn_blocking(move || {
            let hash = match &hash {
                Some(h) => h.as_str(),
                None => dummy_hash(),
            };
            bcrypt::verify(password, hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        if !(matches && known) {
            return Verdict::Denied;
        }
        let mut ok = self.ok.lock().unwrap_or_else(|e| e.into_inner());
        if ok.len() >= CACHE_CAPACITY {
            ok.clear();
        }
        ok.insert(key);
        Verdict::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn basic(user: &str, password: &str) -> HeaderMap {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut h = HeaderMap::new();
        h.insert(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {token}")).unwrap(),
        );
        h
    }

    #[test]
    fn dummy_hash_is_a_bcrypt_hash() {
        assert!(bcrypt::verify("llm-probe", dummy_hash()).unwrap());
    }

    #[tokio::test]
    async fn checks_users_and_remembers_success() {
        let mut web = WebConfig::default();
        let auth = Authenticator::default();
        assert_eq!(auth.check(&web, &HeaderMap::new()).await, Verdict::Allowed);
        web.users
            .insert("prom".into(), bcrypt::hash("s3cret", 4).unwrap());
        assert_eq!(auth.check(&web, &HeaderMap::new()).await, Verdict::Denied);
        assert_eq!(
            auth.check(&web, &basic("prom", "wrong")).await,
            Verdict::Denied
        );
        assert_eq!(
            auth.check(&web, &basic("nobody", "x")).await,
            Verdict::Denied
        );
        assert_eq!(
            auth.check(&web, &basic("prom", "s3cret")).await,
            Verdict::Allowed
        );
        assert_eq!(auth.ok.lock().unwrap().len(), 1);
        // Remembered: allowed again (from the set), and a changed hash no longer matches it.
        assert_eq!(
            auth.check(&web, &basic("prom", "s3cret")).await,
            Verdict::Allowed
        );
        web.users
            .insert("prom".into(), bcrypt::hash("other", 4).unwrap());
        assert_eq!(
            auth.check(&web, &basic("prom", "s3cret")).await,
            Verdict::Denied
        );
        let mut bearer = HeaderMap::new();
        bearer.insert(AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(auth.check(&web, &bearer).await, Verdict::Denied);
    }
}
