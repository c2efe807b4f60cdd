//! A throwaway `redis-server` for the demo and the benchmarks: a free loopback
//! port, a temp dir, no persistence; killed and cleaned up on drop. The binary is
//! `REDIS_SERVER` when set (as in the tests), else `redis-server` on `PATH`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running throwaway server.
pub(crate) struct ThrowawayServer {
    child: Child,
    dir: std::path::PathBuf,
}

impl ThrowawayServer {
    /// Starts one (with `extra` redis-server arguments) and waits until it listens.
    /// Returns it with its `redis://` URL.
    pub(crate) fn start(extra: &[&str]) -> Result<(ThrowawayServer, String), String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = std::env::temp_dir().join(format!(
            "redisson-locks-throwaway-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let binary = std::env::var("REDIS_SERVER")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "redis-server".into());
        let child = Command::new(&binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no"])
            .args(extra)
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start {binary} ({e}); is it installed?"))?;
        let server = ThrowawayServer { child, dir };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("{binary} did not start listening within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok((server, format!("redis://127.0.0.1:{port}")))
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
