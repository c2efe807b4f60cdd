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

use redis::{Cmd, RedisResult, RedisWrite, ToRedisArgs, Value};

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
            parts: Flat::default(),
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
    /// The keys and the arguments, in the order they were added.
    parts: Flat,
}

/// A call's keys and arguments written one after another into one buffer,
/// each ending at its offset and marked key or argument: two allocations per
/// call, not one per part (the uncontended lock's path sends two scripts per
/// hold). Callers may add keys and arguments in any order; `KEYS` and `ARGV`
/// each keep theirs.
#[derive(Debug, Default)]
struct Flat {
    bytes: Vec<u8>,
    /// Where each part ends, and whether it is a key.
    ends: Vec<(usize, bool)>,
    /// Whether the parts written now are keys.
    writing_keys: bool,
}

impl Flat {
    /// How many keys.
    fn keys(&self) -> usize {
        self.ends.iter().filter(|(_, key)| *key).count()
    }

    /// The keys (`true`) or the arguments (`false`), in order.
    fn parts(&self, keys: bool) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|(end, _)| *end));
        starts
            .zip(self.ends.iter().copied())
            .filter(move |(_, (_, key))| *key == keys)
            .map(|(start, (end, _))| &self.bytes[start..end])
    }

    fn push_end(&mut self) {
        if self.ends.capacity() == 0 {
            self.ends.reserve(FLAT_PARTS);
        }
        self.ends.push((self.bytes.len(), self.writing_keys));
    }
}

impl RedisWrite for Flat {
    fn write_arg(&mut self, arg: &[u8]) {
        if self.bytes.capacity() == 0 {
            self.bytes.reserve(FLAT_BYTES.max(arg.len()));
        }
        self.bytes.extend_from_slice(arg);
        self.push_end();
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        FlatArg(self)
    }
}

/// What one call's keys and arguments usually take: room for them up front.
const FLAT_BYTES: usize = 512;
const FLAT_PARTS: usize = 12;

/// A writer into the next argument of a [`Flat`]: its end is where the
/// buffer ends when the writer is dropped.
struct FlatArg<'a>(&'a mut Flat);

impl std::io::Write for FlatArg<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for FlatArg<'_> {
    fn drop(&mut self) {
        self.0.push_end();
    }
}

impl ScriptCall<'_> {
    /// Adds `KEYS[n]`.
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        self.parts.writing_keys = true;
        key.write_redis_args(&mut self.parts);
        self
    }

    /// Adds `ARGV[n]`.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.parts.writing_keys = false;
        arg.write_redis_args(&mut self.parts);
        self
    }

    /// `verb body numkeys keys... args...`, built in one buffer sized up front.
    fn command(&self, verb: &str, body: &str) -> Cmd {
        let parts = &self.parts;
        let count = 3 + parts.ends.len();
        let size = verb.len() + body.len() + 8 + parts.bytes.len();
        let mut cmd = Cmd::with_capacity(count, size);
        cmd.arg(verb).arg(body).arg(parts.keys());
        for part in parts.parts(true).chain(parts.parts(false)) {
            cmd.arg(part);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The flat buffer sends what a list of arguments would: the same
    /// command, byte for byte, for keys and arguments of every shape (empty,
    /// numbers, written through `writer_for_next_arg`).
    #[test]
    fn a_flat_call_is_the_command_a_list_would_make() {
        let script = LuaScript::new("return 1");
        let mut call = script.call();
        // Added interleaved, sent keys first, as `pes_renew` adds them.
        call.key("lock:{a}").arg(30_000u64).key("");
        call.arg(&b"\x00\xff"[..]).arg(-4i64).arg(&["x", "yz"]);
        let mut expected = redis::cmd("EVALSHA");
        expected
            .arg(&script.sha)
            .arg(2)
            .arg("lock:{a}")
            .arg("")
            .arg(30_000u64)
            .arg(&b"\x00\xff"[..])
            .arg(-4i64)
            .arg("x")
            .arg("yz");
        let sent = call.command("EVALSHA", &script.sha);
        assert_eq!(sent.get_packed_command(), expected.get_packed_command());
        let mut args = Flat::default();
        {
            use std::io::Write;
            let mut next = args.writer_for_next_arg();
            next.write_all(b"ab").unwrap();
            next.write_all(b"c").unwrap();
        }
        args.write_arg(b"");
        let seen: Vec<&[u8]> = args.parts(false).collect();
        assert_eq!(seen, [&b"abc"[..], &b""[..]]);
    }
}
