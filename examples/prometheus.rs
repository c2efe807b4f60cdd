//! Serving the crate's metrics to Prometheus (feature `metrics`).
//!
//! ```text
//! cargo run --example prometheus --features metrics -- [--serve] [--port 9898]
//! ```
//!
//! It installs `metrics-exporter-prometheus`'s recorder (built without its own
//! HTTP stack: `build_recorder()` and its handle), connects a client, runs a
//! few tasks that contend for a lock, time out on another, try one that is
//! busy and share a semaphore, and serves the handle's text at
//! `http://127.0.0.1:PORT/metrics` with a minimal HTTP/1.1 responder on a
//! tokio `TcpListener`. It then scrapes itself once, prints the scrape and
//! exits; with `--serve` it keeps serving (and keeps the tasks busy, a round
//! every few seconds) until stopped.
//!
//! Any `metrics` exporter works the same way: install it as the global
//! recorder before the first acquisition.
//!
//! It uses `REDIS_URL` when set; otherwise it starts a throwaway `redis-server`
//! on a free loopback port and stops it at the end.

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use redisson_locks::{Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[path = "support/prometheus_recorder.rs"]
mod prometheus_recorder;
#[path = "support/throwaway_server.rs"]
mod throwaway_server;

const USAGE: &str = "usage: prometheus [--serve] [--port 9898]\n\
    Without --serve: one scrape printed, then exit (on a free port unless --port).\n\
    REDIS_URL selects a server; otherwise a throwaway redis-server is started.";

struct Options {
    serve: bool,
    port: Option<u16>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        serve: false,
        port: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--serve" => options.serve = true,
            "--port" => {
                let value = args
                    .next()
                    .ok_or(format!("--port needs a value\n{USAGE}"))?;
                let port = value
                    .parse()
                    .map_err(|_| format!("--port: '{value}' is not a TCP port"))?;
                options.port = Some(port);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() {
    if let Err(message) = run().await {
        eprintln!("prometheus failed: {message}");
        std::process::exit(1);
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

async fn run() -> Result<(), String> {
    let options = parse_options()?;
    // First of all: what is recorded before a recorder is installed is lost.
    let handle = prometheus_recorder::install()?;

    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (server, url) = throwaway_server::start(&[])?;
            (Some(server), url)
        }
    };
    let mut config = Config::from_url(&url).map_err(err)?;
    // A handful of fixed names here: one series per name is affordable. Leave
    // it off (the default) where names are many or made per request.
    config.metrics_lock_names = true;
    let client = Client::connect(config).await.map_err(err)?;

    let port = options.port.unwrap_or(if options.serve { 9898 } else { 0 });
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    let address = listener.local_addr().map_err(err)?;
    tokio::spawn(serve(listener, handle.clone()));

    contend(&client).await?;
    if !options.serve {
        // Scraped the way Prometheus would, over HTTP.
        print!("{}", scrape(address).await?);
        client.close().await;
        return Ok(());
    }
    eprintln!("serving http://{address}/metrics (stop with Ctrl-C)");
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        contend(&client).await?;
    }
}

/// One round of work: eight tasks take turns on `orders`, three give up
/// waiting for `reports` (held meanwhile), one finds `nightly` busy, and six
/// share a semaphore of two permits.
async fn contend(client: &Client) -> Result<(), String> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let lock = client.get_lock("orders").map_err(err)?;
        tasks.spawn(async move {
            for _ in 0..5 {
                let guard = lock.lock().await?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                guard.unlock().await?;
            }
            Ok::<_, redisson_locks::Error>(())
        });
    }
    let reports = client.get_fair_lock("reports").map_err(err)?;
    let held = reports.lock().await.map_err(err)?;
    for _ in 0..3 {
        let lock = reports.clone();
        tasks.spawn(async move {
            let gave_up = lock.try_lock_wait(Duration::from_millis(50)).await?;
            assert!(gave_up.is_none(), "reports is held for the whole round");
            Ok(())
        });
    }
    let nightly = client.get_lock("nightly").map_err(err)?;
    let running = nightly.lock().await.map_err(err)?;
    tasks.spawn(async move {
        assert!(nightly.try_lock().await?.is_none(), "nightly is held");
        Ok(())
    });
    let workers = client.get_semaphore("workers").map_err(err)?;
    workers.try_set_permits(2).await.map_err(err)?;
    for _ in 0..6 {
        let workers = workers.clone();
        tasks.spawn(async move {
            workers.acquire().await?;
            tokio::time::sleep(Duration::from_millis(5)).await;
            workers.release().await
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(err)?.map_err(err)?;
    }
    running.unlock().await.map_err(err)?;
    held.unlock().await.map_err(err)
}

/// Answers every connection: `GET /metrics` with the scrape, anything else
/// with 404 (405 for another method). One request per connection, then close.
async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            if let Err(e) = respond(stream, &handle).await {
                eprintln!("metrics request failed: {e}");
            }
        });
    }
}

async fn respond(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let head = read_head(&mut stream).await?;
    let request_line = head.lines().next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => ("200 OK", handle.render()),
        ("GET", _) => ("404 Not Found", "not found: try /metrics\n".to_owned()),
        _ => ("405 Method Not Allowed", "only GET\n".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\n\
         Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// Reads a request up to the end of its head (a scrape has no body), at most
/// 8 KiB and 5 s: a client that sends more, or nothing, is dropped.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    let reading = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buffer).await?;
            if n == 0 || head.len() + n > 8192 {
                return Err(std::io::Error::other("request head cut short or too long"));
            }
            head.extend_from_slice(&buffer[..n]);
        }
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(5), reading)
        .await
        .map_err(|_| std::io::Error::other("request head too slow"))??;
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// One scrape of `address`, as a Prometheus server sends it: the body.
async fn scrape(address: std::net::SocketAddr) -> Result<String, String> {
    let mut stream = TcpStream::connect(address).await.map_err(err)?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nAccept: text/plain\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(err)?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.map_err(err)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("a response without a head")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the scrape failed: {head}"));
    }
    Ok(body.to_owned())
}
