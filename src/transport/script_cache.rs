//! Pinning the client's scripts in the server's cache: every script is loaded
//! with SCRIPT LOAD when the client connects, and again after any NOSCRIPT (a
//! restart, a failover to a server that never saw them, SCRIPT FLUSH, an
//! eviction). Since Redis 7.4, and on Valkey 9, the scripts EVAL caches are
//! evicted (least recently used, 500 kept) while loaded ones are kept, so a
//! server shared with other EVAL users would otherwise make this client pay
//! the EVAL fallback (`lua.rs`) after every idle spell.
//!
//! It names no connection type and no script: the connection is any
//! `ConnectionLike`, and the scripts and what to do on a fallback (count it in
//! the metrics) are handed in at connect, so the transport stays below the
//! layers that know them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use crate::transport::background::Spawner;

/// The texts of every script a client may send.
pub(crate) type Catalogue = fn() -> Vec<&'static str>;

/// What a client knows of the server's script cache: the scripts to pin, and
/// how often one was missing.
#[derive(Debug, Default)]
pub(crate) struct ScriptCache {
    catalogue: OnceLock<Catalogue>,
    /// Told of each fallback (the metrics' counter).
    on_fallback: OnceLock<fn()>,
    /// NOSCRIPT replies, each answered with EVAL.
    fallbacks: AtomicU64,
    /// A round of SCRIPT LOAD is on its way.
    pinning: AtomicBool,
}

impl ScriptCache {
    /// Names the scripts to pin, and what to tell of each fallback (once, at
    /// connect).
    pub(crate) fn set_catalogue(&self, catalogue: Catalogue, on_fallback: fn()) {
        let _ = self.catalogue.set(catalogue);
        let _ = self.on_fallback.set(on_fallback);
    }

    /// How many script calls found their script missing and sent its text.
    pub(crate) fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// A script was missing: counts it, and loads them all again on
    /// `spawner`, through `conn`, unless that is under way.
    pub(crate) fn missed<C>(self: &Arc<Self>, conn: &C, spawner: &Spawner)
    where
        C: ConnectionLike + Clone + Send + Sync + 'static,
    {
        self.count_fallback();
        if self.catalogue.get().is_none() || self.pinning.swap(true, Ordering::AcqRel) {
            return;
        }
        let (cache, conn) = (self.clone(), conn.clone());
        spawner.spawn(async move {
            // A failure leaves the EVAL fallback to cover: nothing to report.
            let _ = cache.pin(&conn).await;
        });
    }

    fn count_fallback(&self) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        if let Some(tell) = self.on_fallback.get() {
            tell();
        }
    }

    /// Loads every script of the catalogue with SCRIPT LOAD (on every
    /// primary of a cluster: the command is routed to all of them), all at
    /// once on the multiplexed connection.
    ///
    /// # Errors
    /// The first refusal (an ACL without SCRIPT, a server gone); the EVAL
    /// fallback still covers every call.
    pub(crate) async fn pin<C>(&self, conn: &C) -> RedisResult<()>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        self.pinning.store(true, Ordering::Release);
        let scripts = self
            .catalogue
            .get()
            .map(|catalogue| catalogue())
            .unwrap_or_default();
        let loads = scripts.into_iter().map(|code| {
            let mut conn = conn.clone();
            async move {
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(code)
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
