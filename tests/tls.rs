//! TLS (`rediss://`, feature `tls`) against a real `redis-server --tls-port`,
//! with a certificate authority, server and client certificates this test makes
//! itself (rcgen).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use redisson_locks::{Client, Config};

use support::{free_port, within, RedisServer};

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM
/// files in `dir`.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn make_pki(dir: &Path, ca_name: &str) -> Pki {
    std::fs::create_dir_all(dir).unwrap();
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = write("ca.pem", ca_cert.pem());
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |names: Vec<String>, file: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (
            write(&format!("{file}.pem"), cert.pem()),
            write(&format!("{file}-key.pem"), key.serialize_pem()),
        )
    };
    let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()], "server");
    let (client_cert, client_key) = leaf(vec!["client".into()], "client");
    Pki {
        ca,
        server_cert,
        server_key,
        client_cert,
        client_key,
    }
}

/// A server with a TLS port beside its plain one (the plain one is for the
/// test's own admin connection); `mutual`: clients must show a certificate.
fn tls_server(pki: &Pki, mutual: bool) -> (RedisServer, u16) {
    let tls_port = free_port().to_string();
    let args = [
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        pki.server_cert.to_str().unwrap(),
        "--tls-key-file",
        pki.server_key.to_str().unwrap(),
        "--tls-ca-cert-file",
        pki.ca.to_str().unwrap(),
        "--tls-auth-clients",
        if mutual { "yes" } else { "no" },
    ];
    let server = RedisServer::start_with(&args);
    (server, tls_port.parse().unwrap())
}

fn tls_config(port: u16, ca: &Path) -> Config {
    let mut config = Config::from_url(&format!("rediss://127.0.0.1:{port}")).unwrap();
    config.tls.ca_certificate = Some(ca.to_owned());
    config.connect_timeout = Duration::from_secs(5);
    config
}

/// Over TLS with the test's own CA: locks, a waiter woken by the unlock message
/// (pub/sub over TLS), the watchdog; and the lock is the same key the plain
/// port sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_over_tls_with_a_custom_ca() {
    let dir = std::env::temp_dir().join(format!("redisson-locks-tls-{}", std::process::id()));
    let pki = make_pki(&dir.join("a"), "test CA");
    let (server, port) = tls_server(&pki, false);
    let mut config = tls_config(port, &pki.ca);
    config.lock_watchdog_timeout = Duration::from_secs(1);
    let a = Client::connect(config.clone()).await.unwrap();
    let b = Client::connect(config).await.unwrap();

    let held = a.get_lock("secure").unwrap().lock().await.unwrap();
    assert_eq!(server.keys().await, vec!["secure".to_owned()]);
    let lock = b.get_lock("secure").unwrap();
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.valid_for()) });
    // Renewed past two leases; then the unlock wakes the waiter at once.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!held.is_lease_lost());
    assert!(!waiter.is_finished());
    held.unlock().await.unwrap();
    let valid = within(Duration::from_secs(5), "TLS waiter", waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(valid.is_some());
    support::assert_nothing_left(&server, &[&a, &b]).await;
}

/// Mutual TLS: without a client certificate the server refuses the client (a
/// typed, non-panicking error); with one, it is let in. A server whose
/// certificate another CA signed is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_and_untrusted_servers() {
    let dir = std::env::temp_dir().join(format!("redisson-locks-mtls-{}", std::process::id()));
    let pki = make_pki(&dir.join("a"), "test CA");
    let other = make_pki(&dir.join("b"), "another CA");
    let (server, port) = tls_server(&pki, true);

    let refused = Client::connect(tls_config(port, &pki.ca))
        .await
        .unwrap_err();
    assert!(refused.is_redis() || refused.is_timeout(), "{refused:?}");

    let mut with_cert = tls_config(port, &pki.ca);
    with_cert.tls.client_certificate = Some(pki.client_cert.clone());
    with_cert.tls.client_key = Some(pki.client_key.clone());
    let client = Client::connect(with_cert.clone()).await.unwrap();
    let guard = client
        .get_fair_lock("mutual")
        .unwrap()
        .lock()
        .await
        .unwrap();
    guard.unlock().await.unwrap();

    let mut untrusted = with_cert.clone();
    untrusted.tls.ca_certificate = Some(other.ca.clone());
    let err = Client::connect(untrusted).await.unwrap_err();
    assert!(err.is_redis() || err.is_timeout(), "{err:?}");

    let mut half = with_cert;
    half.tls.client_key = None;
    assert!(Client::connect(half).await.unwrap_err().is_config());
    let mut missing = tls_config(port, Path::new("/nonexistent/ca.pem"));
    missing.connect_timeout = Duration::from_secs(1);
    assert!(Client::connect(missing).await.unwrap_err().is_config());
    support::assert_nothing_left(&server, &[&client]).await;
}
