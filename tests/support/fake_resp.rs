//! A tiny fake Redis that speaks just enough RESP3 to be connected to, and answers
//! every script call with a reply of a shape no lock script gives.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub struct FakeRedis {
    port: u16,
    task: JoinHandle<()>,
}

impl FakeRedis {
    /// `script_reply` is the raw RESP sent back to EVAL/EVALSHA.
    pub async fn start(script_reply: &'static str) -> FakeRedis {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut pending = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&buf[..n]);
                        while let Some((command, used)) = parse_command(&pending) {
                            pending.drain(..used);
                            let reply = answer(&command, script_reply);
                            if socket.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        FakeRedis { port, task }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for FakeRedis {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(command: &[String], script_reply: &'static str) -> String {
    let name = command
        .first()
        .map(|c| c.to_ascii_uppercase())
        .unwrap_or_default();
    match name.as_str() {
        "HELLO" => "%3\r\n+server\r\n+redis\r\n+version\r\n+7.0.0\r\n+proto\r\n:3\r\n".into(),
        "PING" => "+PONG\r\n".into(),
        "CONFIG" => "%1\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n".into(),
        "EVAL" | "EVALSHA" => script_reply.into(),
        "SCRIPT" => "$40\r\n0000000000000000000000000000000000000000\r\n".into(),
        _ => "+OK\r\n".into(),
    }
}

/// Parses one `*N $len arg ...` command from the front of `data`.
fn parse_command(data: &[u8]) -> Option<(Vec<String>, usize)> {
    let (count, mut at) = parse_line(data, 0, b'*')?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, start) = parse_line(data, at, b'$')?;
        let end = start + len;
        if data.len() < end + 2 {
            return None;
        }
        args.push(String::from_utf8_lossy(&data[start..end]).into_owned());
        at = end + 2;
    }
    Some((args, at))
}

fn parse_line(data: &[u8], at: usize, marker: u8) -> Option<(usize, usize)> {
    if data.get(at) != Some(&marker) {
        return None;
    }
    let rest = &data[at + 1..];
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    let number = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    Some((number, at + 1 + end + 2))
}
