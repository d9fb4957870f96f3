//! HTTP basic auth against the web config's bcrypt hashes.
//!
//! A bcrypt check costs tens to hundreds of milliseconds of CPU by design (the cost is capped at
//! [`super::web_config::MAX_BCRYPT_COST`]). Prometheus sends the same credentials on every
//! scrape, so a successful check is remembered (keyed by a keyed hash of user, hash and
//! password, never the password itself) and answered without a check or a wait, even during a
//! flood of wrong passwords. Checks run on blocking threads, [`PARALLEL_CHECKS`] at once, so a
//! flood costs at most that many cores and never delays a probe's reads on the runtime's
//! workers; at most [`MAX_WAITING_CHECKS`] requests wait for a turn (first come, first
//! served), and more are answered `429 Too Many Requests` at once, so that waiting requests
//! never hold the server's connection slots. An unknown user is checked against a dummy hash,
//! so the answer time does not tell which users exist.
//!
//! `/-/healthy` and `/-/ready` stay behind the same auth, as in Prometheus (and the
//! `healthcheck` command sends credentials): a liveness probe's credentials are remembered
//! after its first success, so it is answered at once under a flood.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// bcrypt checks that run at once.
pub const PARALLEL_CHECKS: usize = 2;

/// Requests that may wait for a check's turn; more are answered 429 at once.
pub const MAX_WAITING_CHECKS: usize = 32;

/// Checks one client address may have waiting or running; more from it are answered 429 at
/// once, so that one flooding client cannot fill the queue ahead of everyone else.
pub const CHECKS_PER_CLIENT: usize = 2;

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
    /// Credentials not checked: [`MAX_WAITING_CHECKS`] requests already wait for a check;
    /// answer 429 with `Retry-After`.
    Busy,
}

/// Remembers successful checks; serialises bcrypt work.
pub struct Authenticator {
    hasher: std::collections::hash_map::RandomState,
    ok: Mutex<HashSet<u64>>,
    bcrypt: Arc<Semaphore>,
    /// Requests waiting for or running a check.
    checks: AtomicUsize,
    /// The same, per client address.
    per_client: Mutex<HashMap<IpAddr, usize>>,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator {
            hasher: Default::default(),
            ok: Default::default(),
            bcrypt: Arc::new(Semaphore::new(PARALLEL_CHECKS)),
            checks: AtomicUsize::new(0),
            per_client: Default::default(),
        }
    }
}

/// Counts a request in [`Authenticator::checks`] and its client's count while it lives.
struct Counted<'a> {
    auth: &'a Authenticator,
    client: Option<IpAddr>,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.auth.checks.fetch_sub(1, Ordering::AcqRel);
        if let Some(ip) = self.client {
            let mut per = self
                .auth
                .per_client
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(n) = per.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    per.remove(&ip);
                }
            }
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

    /// Checks the request's `Authorization` header against `web`'s users; `client` is the
    /// address it came from (`None`: unknown), for [`CHECKS_PER_CLIENT`].
    pub async fn check(
        &self,
        web: &WebConfig,
        headers: &HeaderMap,
        client: Option<IpAddr>,
    ) -> Verdict {
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
        let waiting = self.checks.fetch_add(1, Ordering::AcqRel);
        let mut counted = Counted {
            auth: self,
            client: None,
        };
        if waiting >= PARALLEL_CHECKS + MAX_WAITING_CHECKS {
            return Verdict::Busy;
        }
        if let Some(ip) = client {
            let mut per = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
            let n = per.entry(ip).or_insert(0);
            if *n >= CHECKS_PER_CLIENT {
                return Verdict::Busy;
            }
            *n += 1;
            counted.client = Some(ip);
        }
        // Owned: a check already started finishes (and frees its turn) even if the client
        // leaves, so turns never outnumber the blocking threads working.
        let Ok(permit) = self.bcrypt.clone().acquire_owned().await else {
            return Verdict::Denied;
        };
        let matches = tokio::task::spawn_blocking(move || {
            let _permit = permit;
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
        assert_eq!(
            auth.check(&web, &HeaderMap::new(), None).await,
            Verdict::Allowed
        );
        web.users
            .insert("prom".into(), bcrypt::hash("s3cret", 4).unwrap());
        assert_eq!(
            auth.check(&web, &HeaderMap::new(), None).await,
            Verdict::Denied
        );
        assert_eq!(
            auth.check(&web, &basic("prom", "wrong"), None).await,
            Verdict::Denied
        );
        assert_eq!(
            auth.check(&web, &basic("nobody", "x"), None).await,
            Verdict::Denied
        );
        assert_eq!(
            auth.check(&web, &basic("prom", "s3cret"), None).await,
            Verdict::Allowed
        );
        assert_eq!(auth.ok.lock().unwrap().len(), 1);
        // Remembered: allowed again (from the set), and a changed hash no longer matches it.
        assert_eq!(
            auth.check(&web, &basic("prom", "s3cret"), None).await,
            Verdict::Allowed
        );
        web.users
            .insert("prom".into(), bcrypt::hash("other", 4).unwrap());
        assert_eq!(
            auth.check(&web, &basic("prom", "s3cret"), None).await,
            Verdict::Denied
        );
        let mut bearer = HeaderMap::new();
        bearer.insert(AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(auth.check(&web, &bearer, None).await, Verdict::Denied);
    }

    /// A client with [`CHECKS_PER_CLIENT`] checks waiting or running gets `Busy` at once;
    /// another client does not, and a remembered success never waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_client_cannot_fill_the_queue() {
        let mut web = WebConfig::default();
        web.users
            .insert("prom".into(), bcrypt::hash("right", 11).unwrap());
        let auth = Arc::new(Authenticator::default());
        let web = Arc::new(web);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let mut running = Vec::new();
        for i in 0..CHECKS_PER_CLIENT {
            let (auth, web) = (auth.clone(), web.clone());
            running.push(tokio::spawn(async move {
                auth.check(&web, &basic("prom", &format!("wrong{i}")), Some(a))
                    .await
            }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let t = std::time::Instant::now();
        assert_eq!(
            auth.check(&web, &basic("prom", "wrong"), Some(a)).await,
            Verdict::Busy
        );
        assert!(t.elapsed() < std::time::Duration::from_millis(50));
        assert_eq!(
            auth.check(&web, &basic("prom", "right"), Some(b)).await,
            Verdict::Allowed
        );
        for r in running {
            assert_eq!(r.await.unwrap(), Verdict::Denied);
        }
        assert!(auth.per_client.lock().unwrap().is_empty());
        assert_eq!(auth.checks.load(Ordering::Acquire), 0);
    }
}
