//! Uncontended lock + unlock against its physical floor, printed as one JSON line.
//!
//! ```text
//! cargo bench --bench uncontended [-- --ops 5000] [-- --url redis://...]
//! ```
//!
//! The floor is two EVALSHA round trips of a trivial script on the same kind of
//! connection (one multiplexed RESP3 connection): a lock and an unlock cannot cost
//! less than two round trips. Starts a throwaway `redis-server` unless `--url` is
//! given.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redisson_locks::{Client, Config};

struct Server(Child, std::path::PathBuf);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn start_server() -> Result<(Server, String), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let dir = std::env::temp_dir().join(format!("redisson-locks-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("redis-server: {e}"))?;
    let server = Server(child, dir);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            return Err("redis-server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((server, format!("redis://127.0.0.1:{port}")))
}

/// Calls of `command` so far (INFO commandstats). Commands run inside scripts are
/// counted under their own names, so EVALSHA alone counts round trips here.
async fn command_calls(
    conn: &mut redis::aio::MultiplexedConnection,
    command: &str,
) -> Result<u64, String> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .map_err(|e| e.to_string())?;
    let prefix = format!("cmdstat_{command}:calls=");
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), String> {
    let mut ops: u32 = 5000;
    let mut url = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ops" => ops = args.next().and_then(|v| v.parse().ok()).ok_or("--ops N")?,
            "--url" => url = Some(args.next().ok_or("--url URL")?),
            // cargo bench passes --bench; ignore anything else it adds.
            _ => {}
        }
    }
    let (_server, url) = match url {
        Some(url) => (None, url),
        None => {
            let (server, url) = start_server()?;
            (Some(server), url)
        }
    };

    // The floor: two trivial EVALSHA round trips on one multiplexed RESP3 connection.
    let info =
        redis::IntoConnectionInfo::into_connection_info(url.as_str()).map_err(|e| e.to_string())?;
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let floor_client =
        redis::Client::open(info.set_redis_settings(settings)).map_err(|e| e.to_string())?;
    let mut floor_conn = floor_client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let trivial = redis::Script::new("return 1");
    let _: i64 = trivial
        .invoke_async(&mut floor_conn)
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    for _ in 0..ops {
        for _ in 0..2 {
            let _: i64 = trivial
                .invoke_async(&mut floor_conn)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    let floor_per_s = f64::from(ops) / started.elapsed().as_secs_f64();

    let client = Client::connect(Config::from_url(&url).map_err(|e| e.to_string())?)
        .await
        .map_err(|e| e.to_string())?;
    let lock = client
        .get_lock("bench:uncontended")
        .map_err(|e| e.to_string())?;
    lock.lock()
        .await
        .map_err(|e| e.to_string())?
        .unlock()
        .await
        .map_err(|e| e.to_string())?;
    let mut stats = redis::Client::open(url.as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let evalsha_before = command_calls(&mut stats, "evalsha").await?;
    let mut latencies = Vec::with_capacity(ops as usize);
    let started = Instant::now();
    for _ in 0..ops {
        let t = Instant::now();
        let guard = lock.lock().await.map_err(|e| e.to_string())?;
        guard.unlock().await.map_err(|e| e.to_string())?;
        latencies.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    let evalsha = command_calls(&mut stats, "evalsha").await? - evalsha_before;
    let lock_per_s = f64::from(ops) / elapsed.as_secs_f64();
    latencies.sort();
    let us = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    println!(
        "{}",
        serde_json::json!({
            "bench": "uncontended", "kind": "reentrant", "ops": ops,
            "lock_unlock_per_s": lock_per_s, "floor_two_evalsha_per_s": floor_per_s,
            "ratio_to_floor": lock_per_s / floor_per_s,
            "round_trips_per_lock_unlock": evalsha as f64 / f64::from(ops),
            "lock_unlock_us": {"p50": us(0.5), "p99": us(0.99), "max": us(1.0)},
        })
    );
    Ok(())
}
