//! The Redis store: shared state for agents on many machines.
//!
//! A key is `{prefix}:{length of namespace}:{namespace}:{key}`: the length makes the namespace
//! unambiguous whatever the key contains. TTLs are Redis expiries (`SET … PX`); listing uses
//! `SCAN MATCH` on a glob-escaped pattern, never `KEYS`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use capability_types::CapabilityError;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use crate::RawStore;

/// Key-value state in Redis.
pub struct RedisStore {
    url_shown: String,
    prefix: String,
    manager: ConnectionManager,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url_shown)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn redis_error(e: redis::RedisError) -> CapabilityError {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        CapabilityError::not_available(format!("redis: {e}"))
    } else {
        CapabilityError::failed(format!("redis: {e}"))
    }
}

/// Escapes the glob characters of `MATCH` patterns.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^' | '-') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A Redis URL as errors and `Debug` show it: without its user information and without its
/// query and fragment (a Unix socket URL may carry `pass=` there), so that a password never
/// reaches a log.
///
/// Everything up to the URL's last `@` is taken for user information, wherever that `@` is: a
/// password written unescaped may hold `@`, `/`, `?` or `#`, and a URL that only seems to end
/// earlier is shown shorter rather than with a part of its password.
///
/// ```
/// assert_eq!(
///     capability_kv::shown_redis_url("redis://:pa@ss@cache:6379/0"),
///     "redis://…@cache:6379/0"
/// );
/// ```
pub fn shown_redis_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (hidden, rest) = match rest.rsplit_once('@') {
        Some((_, after)) => ("…@", after),
        None => ("", rest),
    };
    let place = format!(
        "{hidden}{}",
        rest.split(['?', '#']).next().unwrap_or_default()
    );
    if scheme.is_empty() {
        place
    } else {
        format!("{scheme}://{place}")
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`) with keys under `prefix` (default `toolcap`).
    /// Fails with `not_available` when the server cannot be reached.
    ///
    /// # Ambient Authority
    ///
    /// Opens a network connection to `url`.
    pub async fn connect(url: &str, prefix: Option<&str>) -> Result<Arc<Self>, CapabilityError> {
        let url_shown = shown_redis_url(url);
        let client = redis::Client::open(url)
            .map_err(|e| CapabilityError::invalid_input(format!("redis URL {url_shown}: {e}")))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_number_of_retries(2);
        let manager = tokio::time::timeout(
            Duration::from_secs(10),
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| {
            CapabilityError::not_available(format!("redis at {url_shown} did not answer in time"))
        })?
        .map_err(|e| {
            CapabilityError::not_available(format!("cannot reach redis at {url_shown}: {e}"))
        })?;
        Ok(Arc::new(Self {
            url_shown,
            prefix: prefix.unwrap_or("toolcap").to_owned(),
            manager,
        }))
    }

    fn head(&self, namespace: &str) -> String {
        format!("{}:{}:{}:", self.prefix, namespace.len(), namespace)
    }
}

#[async_trait]
impl RawStore for RedisStore {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Vec<u8>>, CapabilityError> {
        let mut conn = self.manager.clone();
        conn.get(format!("{}{key}", self.head(namespace)).into_bytes())
            .await
            .map_err(redis_error)
    }

    async fn get_limited(
        &self,
        namespace: &str,
        key: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, CapabilityError> {
        // GETRANGE transfers at most `max + 1` bytes however large the value is; a missing key
        // reads as empty, and no stored value is empty (values are JSON).
        let mut conn = self.manager.clone();
        let end = isize::try_from(max).unwrap_or(isize::MAX);
        let head: Vec<u8> = conn
            .getrange(
                format!("{}{key}", self.head(namespace)).into_bytes(),
                0,
                end,
            )
            .await
            .map_err(redis_error)?;
        if head.is_empty() {
            return Ok(None);
        }
        crate::check_read_limit(key, Some(head.len()), max)?;
        Ok(Some(head))
    }

    async fn set(
        &self,
        namespace: &str,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError> {
        let mut conn = self.manager.clone();
        let full = format!("{}{key}", self.head(namespace)).into_bytes();
        match ttl {
            Some(t) => {
                // Redis takes at most what it can add to its clock in a signed 64-bit count of
                // milliseconds; a longer TTL (2^62 ms is some 146 million years) stays as that.
                const LONGEST_MS: u64 = 1 << 62;
                let ms = u64::try_from(t.as_millis())
                    .unwrap_or(u64::MAX)
                    .clamp(1, LONGEST_MS);
                conn.pset_ex::<_, _, ()>(full, value, ms)
                    .await
                    .map_err(redis_error)
            }
            None => conn.set::<_, _, ()>(full, value).await.map_err(redis_error),
        }
    }

    async fn delete(&self, namespace: &str, key: &str) -> Result<bool, CapabilityError> {
        let mut conn = self.manager.clone();
        let removed: u64 = conn
            .del(format!("{}{key}", self.head(namespace)).into_bytes())
            .await
            .map_err(redis_error)?;
        Ok(removed > 0)
    }

    async fn list(&self, namespace: &str, prefix: &str) -> Result<Vec<String>, CapabilityError> {
        self.list_limited(namespace, prefix, usize::MAX).await
    }

    async fn list_limited(
        &self,
        namespace: &str,
        prefix: &str,
        max: usize,
    ) -> Result<Vec<String>, CapabilityError> {
        let head = self.head(namespace);
        let pattern = format!("{}*", glob_escape(&format!("{head}{prefix}")));
        let mut conn = self.manager.clone();
        let mut cursor: u64 = 0;
        // Distinct: SCAN may return a key more than once.
        let mut keys = std::collections::BTreeSet::new();
        loop {
            let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .map_err(redis_error)?;
            for raw in batch {
                let full = String::from_utf8_lossy(&raw).into_owned();
                // MATCH already limits to the namespace; the check keeps it exact regardless.
                if let Some(rest) = full.strip_prefix(&head)
                    && rest.starts_with(prefix)
                {
                    keys.insert(rest.to_owned());
                }
            }
            crate::check_list_limit(prefix, keys.len(), max)?;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        Ok(keys.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{glob_escape, shown_redis_url};

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(
            glob_escape("a*b?c[d]e\\f^g-h"),
            "a\\*b\\?c\\[d\\]e\\\\f\\^g\\-h"
        );
        assert_eq!(glob_escape("plain:key_%"), "plain:key_%");
    }

    #[test]
    fn a_shown_url_keeps_the_server_and_drops_every_credential() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("redis://:pw@host:6379/", "redis://…@host:6379/"),
            ("redis://user:pw@host", "redis://…@host"),
            ("redis://:p@ss@host/1", "redis://…@host/1"),
            ("redis://:p/a@ss@host/1", "redis://…@host/1"),
            ("redis://:p#a?s@host/1", "redis://…@host/1"),
            ("unix:///run/redis.sock?pass=p@w", "unix://…@w"),
            ("rediss://u:p@h:1/?insecure", "rediss://…@h:1/"),
            (
                "redis+unix:///run/redis.sock?pass=pw",
                "redis+unix:///run/redis.sock",
            ),
            (
                "unix:///run/redis.sock?db=1&password=pw#x",
                "unix:///run/redis.sock",
            ),
            ("pw@host:6379", "…@host:6379"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(shown_redis_url(url), shown, "{url}");
        }
    }
}
