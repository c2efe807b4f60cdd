//! The address's database is the database: a lock taken through
//! `Config::new("redis://host:port/3")` lives in database 3, where every client
//! of that address finds it, and in no other.

use std::collections::HashMap;

use redis::AsyncCommands;
use redisson_locks::{Client, Config};

use crate::support::RedisServer;

/// A plain connection to database `db` of `server`.
async fn database(server: &RedisServer, db: i64) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("{}/{db}", server.url()))
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_through_config_new_lives_in_the_addresss_database() {
    let server = RedisServer::start();
    let port = server.port();
    let config = Config::new(format!("redis://127.0.0.1:{port}/3"));
    assert_eq!(config.database, 3);
    let client = Client::connect(config).await.unwrap();
    let guard = client.get_lock("in-db-3").unwrap().lock().await.unwrap();

    let mut db3 = database(&server, 3).await;
    let mut db0 = database(&server, 0).await;
    let fields: HashMap<String, i64> = db3.hgetall("in-db-3").await.unwrap();
    assert_eq!(
        fields,
        HashMap::from([(format!("{}:{}", client.id(), guard.owner_id()), 1)])
    );
    let pttl: i64 = db3.pttl("in-db-3").await.unwrap();
    assert!(pttl > 0, "the watchdog's lease: {pttl}");
    assert!(!db0.exists::<_, bool>("in-db-3").await.unwrap());
    assert!(server.keys().await.is_empty(), "database 0 holds nothing");

    // Another client of the same address is shut out; one of database 0 is not
    // (a lock of the same name elsewhere is another lock).
    let same = Client::connect(Config::new(format!("redis://127.0.0.1:{port}/3")))
        .await
        .unwrap();
    assert!(same
        .get_lock("in-db-3")
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    let zero = Client::connect(Config::new(format!("redis://127.0.0.1:{port}")))
        .await
        .unwrap();
    let elsewhere = zero.get_lock("in-db-3").unwrap().try_lock().await.unwrap();
    let elsewhere = elsewhere.expect("database 0 has its own lock of that name");
    assert!(db0.exists::<_, bool>("in-db-3").await.unwrap());
    elsewhere.unlock().await.unwrap();

    guard.unlock().await.unwrap();
    assert!(!db3.exists::<_, bool>("in-db-3").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_and_a_database_that_disagree_do_not_connect() {
    let server = RedisServer::start();
    let mut config = Config::new(format!("{}/3", server.url()));
    config.database = 5;
    let err = Client::connect(config).await.unwrap_err();
    assert!(err.is_config(), "{err}");
    assert!(
        err.to_string()
            .contains("names database 3 but database is 5"),
        "{err}"
    );
}
