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
//! Scripts are also *pinned* (`script_cache.rs`): loaded with SCRIPT LOAD when
//! the client connects, and again after any NOSCRIPT.

use redis::{Cmd, RedisResult, ToRedisArgs, Value};

use crate::transport::conn::Conn;

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

    /// Its text, as EVAL and SCRIPT LOAD send it.
    pub(crate) fn code(&self) -> &'static str {
        self.code
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
                conn.scripts().missed(conn, conn.spawner());
                self.command("EVAL", self.script.code)
                    .query_async(conn)
                    .await
            }
            other => other,
        }
    }
}
