//! A throwaway `redis-server` for the demo and the benchmarks: the crate's
//! own test kit's [`TestServer`] (a free loopback port, a temp dir, no
//! persistence; killed and cleaned up on drop), the one server spawner of the
//! repository. The binary is `REDIS_SERVER` when set, else `redis-server` on
//! `PATH`. The kit is the `test-util` feature, which the repository's
//! dev-dependency on the crate itself turns on for its examples.

use redisson_locks::testing::{default_binary, TestServer};

/// Starts one (with `extra` redis-server arguments) and waits until it listens.
/// Returns it with its `redis://` URL.
pub(crate) fn start(extra: &[&str]) -> Result<(TestServer, String), String> {
    let server = TestServer::start_with(default_binary(), extra).map_err(|e| e.to_string())?;
    let url = server.url();
    Ok((server, url))
}
