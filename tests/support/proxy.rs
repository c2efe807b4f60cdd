//! A TCP proxy between a client and redis-server that can delay, black-hole or hold
//! back replies, and sever every connection: network faults without external tools.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with the bytes it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward at once.
    Pass,
    /// Forward after this long.
    Delay(Duration),
    /// Forward nothing either way until the mode changes (then what was held
    /// arrives, as TCP would retransmit it).
    Blackhole,
    /// Forward requests, hold replies back until the mode changes.
    HoldReplies,
}

pub struct Proxy {
    port: u16,
    mode: watch::Sender<Mode>,
    connections: std::sync::Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
    acceptor: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream_port`.
    pub async fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
        let port = listener.local_addr().expect("proxy addr").port();
        let (mode, _) = watch::channel(Mode::Pass);
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let acceptor = tokio::spawn({
            let mode = mode.clone();
            let connections = connections.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
                        continue;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let up = tokio::spawn(pump(client_read, server_write, mode.subscribe(), false));
                    let down =
                        tokio::spawn(pump(server_read, client_write, mode.subscribe(), true));
                    let mut list = connections.lock().unwrap();
                    list.push(up);
                    list.push(down);
                }
            }
        });
        Proxy {
            port,
            mode,
            connections,
            acceptor,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Closes every connection made so far (both sides see the close).
    pub fn sever(&self) {
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.sever();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    replies: bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            let current = *mode.borrow_and_update();
            match current {
                Mode::Pass => break,
                Mode::HoldReplies if !replies => break,
                Mode::Delay(d) => {
                    tokio::time::sleep(d).await;
                    break;
                }
                Mode::Blackhole | Mode::HoldReplies => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
