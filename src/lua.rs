//! Sending a Lua script: EVALSHA, and the script's text when the server does not
//! have it.
//!
//! `redis::Script` answers a NOSCRIPT reply by loading the script and sending
//! EVALSHA once more; a second SCRIPT FLUSH in between (or a failover to a server
//! that never saw it) makes that fail too, and the caller gets an error for a
//! script that surely never ran. Here a NOSCRIPT reply is followed by EVAL with
//! the script's text, which cannot be refused for that reason (and caches the
//! script again), so a flushed cache costs one round trip and never an error.
//!
//! Scripts are also *pinned*: loaded with SCRIPT LOAD when the client
//! connects, and again after any NOSCRIPT (a restart, a failover to a server
//! that never saw them, SCRIPT FLUSH). Since Redis 7.4 the scripts EVAL caches
//! are evicted (least recently used, 500 kept) while loaded ones are kept, so a
//! server shared with other EVAL users would otherwise make this client pay
//! the EVAL fallback after every idle spell. [`ScriptCache`] counts both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use redis::{Cmd, RedisResult, ToRedisArgs, Value};

use crate::conn::Conn;

/// One Lua script: its text and its SHA1.
#[derive(Debug)]
pub(crate) struct LuaScript {
    code: &'static str,
    sha: String,
}

impl LuaScript {
    pub(crate) fn new(code: &'static str) -> Self {
        LuaScript {
            sha: redis::Script::new(code).get_hash().to_owned(),
            code,
        }
    }

    /// Its SHA1, as EVALSHA names it.
    #[cfg(test)]
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }

    /// A call of this script; add `KEYS` and `ARGV` in order.
    pub(crate) fn call(&self) -> ScriptCall<'_> {
        ScriptCall {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// A call with `key` as `KEYS[1]`.
    pub(crate) fn key<T: ToRedisArgs>(&self, key: T) -> ScriptCall<'_> {
        let mut call = self.call();
        call.key(key);
        call
    }
}

/// The keys and arguments of one script call.
#[derive(Debug)]
pub(crate) struct ScriptCall<'a> {
    script: &'a LuaScript,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl ScriptCall<'_> {
    /// Adds `KEYS[n]`.
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds `ARGV[n]`.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    fn command(&self, verb: &str, body: &str) -> Cmd {
        let mut cmd = redis::cmd(verb);
        cmd.arg(body)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }

    /// Runs the script: EVALSHA, then EVAL with its text on NOSCRIPT (a NOSCRIPT
    /// reply means it surely did not run), counted, and the client's scripts
    /// loaded again in the background.
    pub(crate) async fn invoke(&self, conn: &mut Conn) -> RedisResult<Value> {
        match self
            .command("EVALSHA", &self.script.sha)
            .query_async(conn)
            .await
        {
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                conn.scripts().missed(conn);
                self.command("EVAL", self.script.code)
                    .query_async(conn)
                    .await
            }
            other => other,
        }
    }
}

/// Every script a client may send, for [`ScriptCache::pin`].
pub(crate) type Catalogue = fn() -> Vec<&'static LuaScript>;

/// What a client knows of the server's script cache: the scripts to pin, and
/// how often one was missing.
#[derive(Debug, Default)]
pub(crate) struct ScriptCache {
    catalogue: OnceLock<Catalogue>,
    /// NOSCRIPT replies, each answered with EVAL.
    fallbacks: AtomicU64,
    /// A round of SCRIPT LOAD is on its way.
    pinning: AtomicBool,
}

impl ScriptCache {
    /// Names the scripts to pin (once, at connect).
    pub(crate) fn set_catalogue(&self, catalogue: Catalogue) {
        let _ = self.catalogue.set(catalogue);
    }

    /// How many script calls found their script missing and sent its text.
    pub(crate) fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// A script was missing: counts it, and loads them all again in the
    /// background unless that is under way.
    fn missed(&self, conn: &Conn) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        crate::metrics::script_fallback();
        if self.catalogue.get().is_none() || self.pinning.swap(true, Ordering::AcqRel) {
            return;
        }
        let conn = conn.clone();
        conn.clone().spawner().spawn(async move {
            // A failure leaves the EVAL fallback to cover: nothing to report.
            let _ = conn.scripts().pin(&conn).await;
        });
    }

    /// Loads every script of the catalogue with SCRIPT LOAD (on every
    /// primary of a cluster: the command is routed to all of them), all at
    /// once on the multiplexed connection.
    ///
    /// # Errors
    /// The first refusal (an ACL without SCRIPT, a server gone); the EVAL
    /// fallback still covers every call.
    pub(crate) async fn pin(&self, conn: &Conn) -> RedisResult<()> {
        self.pinning.store(true, Ordering::Release);
        let scripts = self
            .catalogue
            .get()
            .map(|catalogue| catalogue())
            .unwrap_or_default();
        let loads = scripts.iter().map(|script| {
            let mut conn = conn.clone();
            async move {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(script.code)
                    .query_async::<Value>(&mut conn)
                    .await
            }
        });
        let loaded = futures_util::future::join_all(loads).await;
        self.pinning.store(false, Ordering::Release);
        loaded.into_iter().collect::<RedisResult<Vec<Value>>>()?;
        Ok(())
    }
}
