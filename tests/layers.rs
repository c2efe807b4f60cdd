//! The layers of `src/` point one way: every `crate::` path a file names
//! (outside comments) belongs to its own layer or one below it.
//!
//! From the bottom: the shared vocabulary (the error enum, the configuration,
//! numbers, tracing, metrics), the transport, the engine, the kinds (`lock/`,
//! `sync/`), the operator surface (`inspect/`), leader election (built on a
//! fenced lock and the inspector), and the face (`client.rs`, `entry.rs`,
//! `blocking/`, `testing.rs`, `lib.rs`). The tool in `src/bin/` is a crate of
//! its own over the public API. A new arrow upward fails here with the file,
//! the line and the two layers, so the tree keeps saying what depends on what.

use std::path::{Path, PathBuf};

/// The layers, bottom first.
const LAYERS: [&str; 7] = [
    "shared vocabulary",
    "transport",
    "engine",
    "kinds",
    "operator surface",
    "leader election",
    "face",
];

/// The layer of a file, from its path under `src/`.
fn layer_of_file(path: &str) -> Option<usize> {
    let folders = [
        ("config/", 0),
        ("transport/", 1),
        ("engine/", 2),
        ("lock/", 3),
        ("sync/", 3),
        ("inspect/", 4),
        ("leader/", 5),
        ("blocking/", 6),
    ];
    if path.starts_with("bin/") {
        return None;
    }
    if let Some((_, layer)) = folders.iter().find(|(folder, _)| path.starts_with(folder)) {
        return Some(*layer);
    }
    match path {
        "error.rs" | "numeral.rs" | "trace.rs" | "metrics.rs" => Some(0),
        "client.rs" | "entry.rs" | "testing.rs" | "lib.rs" => Some(6),
        other => panic!("src/{other} sits at the root but belongs to no layer: add it here"),
    }
}

/// The layer of what `crate::<first>` names: a module, or a name the crate
/// root re-exports.
fn layer_of_path(first: &str) -> Option<usize> {
    let layer = match first {
        "error" | "numeral" | "trace" | "metrics" | "config" | "Config" | "Error" | "Result"
        | "OwnerMode" | "OnDeadlock" | "SelfWait" | "TlsConfig" | "Durability" | "MAX_DURATION"
        | "MAX_RETRY_ATTEMPTS" | "RedisErrorKind" | "RedisFailure" | "redact_address" => 0,
        "transport" | "MAX_NAME_LEN" => 1,
        "engine" | "current_id" | "BackOff" | "Deadlock" | "WaitStep" => 2,
        "lock"
        | "sync"
        | "FencedStore"
        | "FencedWrite"
        | "LockGuard"
        | "MultiGuard"
        | "MultiLock"
        | "RFencedLock"
        | "RLock"
        | "RReadWriteLock"
        | "RedGuard"
        | "RedLock"
        | "RemainingTtl"
        | "Permit"
        | "PermitId"
        | "FairPermits"
        | "RFairSemaphore"
        | "RCountDownLatch"
        | "RPermitExpirableSemaphore"
        | "RSemaphore" => 3,
        "inspect" => 4,
        "leader" | "Leader" | "LeaderChange" | "LeaderElection" | "Leadership" | "Observer" => 5,
        "client" | "entry" | "blocking" | "testing" | "Client" | "CollectionLocks"
        | "CollectionType" | "EntryKey" | "porting" => 6,
        _ => return None,
    };
    Some(layer)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::<first>` in `line`, comments left out.
fn crate_paths(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            // A group, `crate::{a, b}`: each leaf's first segment.
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                found.extend(
                    group
                        .split(',')
                        .map(|leaf| leaf.trim().split("::").next().unwrap_or("").to_owned())
                        .filter(|leaf| !leaf.is_empty()),
                );
            }
        } else {
            found.push(name);
        }
    }
    found
}

#[test]
fn every_arrow_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .expect("under src/")
            .to_string_lossy()
            .replace('\\', "/");
        let Some(own) = layer_of_file(&relative) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a readable source file");
        for (number, line) in text.lines().enumerate() {
            for first in crate_paths(line) {
                let Some(named) = layer_of_path(&first) else {
                    panic!(
                        "src/{relative}:{}: crate::{first} is in no layer of this test: add it",
                        number + 1
                    );
                };
                checked += 1;
                if named > own {
                    upward.push(format!(
                        "src/{relative}:{} ({}) names crate::{first} ({})",
                        number + 1,
                        LAYERS[own],
                        LAYERS[named]
                    ));
                }
            }
        }
    }
    assert!(
        checked > 300,
        "only {checked} crate:: paths found: is src/ where it was?"
    );
    assert!(
        upward.is_empty(),
        "arrows up the layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_reader_finds_paths_and_groups() {
    assert_eq!(crate_paths("use crate::engine::Engine;"), ["engine"]);
    assert_eq!(
        crate_paths("use crate::{Config, lock::RLock};"),
        ["Config", "lock"]
    );
    assert!(crate_paths("// see crate::Client").is_empty());
    assert!(crate_paths("let x = $crate::lua::X;").is_empty());
    // A layer table that put the face below the engine would be caught.
    assert!(layer_of_path("Client") > layer_of_file("engine/mod.rs"));
}
