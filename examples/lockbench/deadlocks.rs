//! `--scale deadlocks`: rings of N clients (each a process as far as Redis can
//! tell), client i holding lock i and waiting for lock i+1, at the default
//! threshold (1 s). Reports, per ring size, how long after the last wait began
//! every client named the cycle, and how long a whole-server search
//! (`find_deadlocks`, the tool's `deadlocks`) took.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redisson_locks::Client;
use serde_json::json;
use tokio::sync::Barrier;

use crate::options::err;

/// The ring sizes measured.
const RINGS: [usize; 5] = [2, 3, 10, 30, 60];

pub(crate) async fn rings(url: &str) -> Result<serde_json::Value, String> {
    let mut results = Vec::new();
    for size in RINGS {
        results.push(ring(url, size).await?);
    }
    Ok(json!({ "scale": "deadlocks", "threshold_ms": 1000, "rings": results }))
}

async fn ring(url: &str, size: usize) -> Result<serde_json::Value, String> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let name = |i: usize| format!("lockbench:{run}:ring:{}", i % size);
    let mut clients = Vec::with_capacity(size);
    for _ in 0..size {
        clients.push(
            Client::connect(crate::options::client_config(url)?)
                .await
                .map_err(err)?,
        );
    }
    let all_hold = Arc::new(Barrier::new(size + 1));
    let mut sides = Vec::with_capacity(size);
    for (i, client) in clients.iter().enumerate() {
        let first = client.get_lock(name(i)).map_err(err)?;
        let second = client.get_lock(name(i + 1)).map_err(err)?;
        let all_hold = all_hold.clone();
        sides.push(tokio::spawn(async move {
            let held = first.lock().await;
            all_hold.wait().await;
            let _ = second.lock().await;
            drop(held);
        }));
    }
    all_hold.wait().await;
    let waiting = Instant::now();
    let mut named_by_all = None;
    while waiting.elapsed() < Duration::from_secs(120) {
        if clients.iter().all(|c| !c.deadlocks().is_empty()) {
            named_by_all = Some(waiting.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first_named = clients.iter().filter(|c| !c.deadlocks().is_empty()).count();
    let searched = Instant::now();
    let found = clients[0].find_deadlocks("*").await.map_err(err)?;
    let search_ms = searched.elapsed().as_secs_f64() * 1000.0;
    for side in sides {
        side.abort();
        let _ = side.await;
    }
    for client in clients {
        client.close().await;
    }
    Ok(json!({
        "clients": size,
        "named_by_all_ms": named_by_all.map(|d| d.as_secs_f64() * 1000.0),
        "clients_naming": first_named,
        "find_deadlocks_ms": search_ms,
        "cycles_found": found.cycles.len(),
        "waits_recorded": found.waits,
    }))
}
