//! Locks on a collection's entries, as Redisson derives them: see
//! [`CollectionLocks`].

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::{
    Client, RCountDownLatch, RLock, RPermitExpirableSemaphore, RReadWriteLock, RSemaphore,
};

/// A collection's key as its codec encodes it: what Redisson hashes to name
/// the entry's locks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryKey(Vec<u8>);

impl EntryKey {
    /// The bytes a codec made of the key, as they are (take them from Java:
    /// `codec.getMapKeyEncoder().encode(key)`, for Kryo and any other codec).
    ///
    /// ```
    /// use redisson_locks::EntryKey;
    ///
    /// // The bytes a Java service logged for its key (here, made up), e.g. with
    /// // `ByteBufUtil.hexDump(codec.getMapKeyEncoder().encode(key))`.
    /// let from_java: Vec<u8> = vec![0x03, 0x01, 0x34, 0xb2];
    /// let key = EntryKey::encoded(from_java.clone());
    /// assert_eq!(key.as_bytes(), from_java.as_slice());
    ///
    /// // Bytes are bytes: a `StringCodec` key given as its UTF-8 is the same entry.
    /// assert_eq!(EntryKey::encoded("42"), EntryKey::string("42"));
    /// ```
    pub fn encoded(bytes: impl Into<Vec<u8>>) -> EntryKey {
        EntryKey(bytes.into())
    }

    /// A key under Redisson's `StringCodec`: its UTF-8 bytes (a Java `Long`
    /// or `Integer` key there is its decimal text: `EntryKey::string("42")`).
    ///
    /// ```
    /// use redisson_locks::EntryKey;
    ///
    /// // Java: redisson.getMap("orders", StringCodec.INSTANCE).getLock("über")
    /// assert_eq!(EntryKey::string("über").as_bytes(), "über".as_bytes());
    ///
    /// // A Java `Long` key 42 under `StringCodec` is the text "42".
    /// let order_id: i64 = 42;
    /// assert_eq!(EntryKey::string(&order_id.to_string()).as_bytes(), b"42");
    /// ```
    pub fn string(key: &str) -> EntryKey {
        EntryKey(key.as_bytes().to_vec())
    }

    /// A `String` key under Redisson's `JsonJacksonCodec`: a JSON string, as
    /// Jackson writes it (control characters escaped, `\u` in upper-case hex,
    /// characters beyond U+FFFF as two escaped surrogates, others as UTF-8).
    ///
    /// ```
    /// use redisson_locks::EntryKey;
    ///
    /// // Java: redisson.getMap("orders", new JsonJacksonCodec()).getLock("k")
    /// assert_eq!(EntryKey::json_string("k").as_bytes(), br#""k""#);
    /// // Quoted, so not the same entry as the key under `StringCodec`.
    /// assert_ne!(EntryKey::json_string("k"), EntryKey::string("k"));
    ///
    /// // Escaped as Jackson escapes: quotes, control characters, and what lies
    /// // beyond U+FFFF; other characters stay UTF-8.
    /// assert_eq!(
    ///     EntryKey::json_string("a\"b\n\u{1}é😀").as_bytes(),
    ///     r#""a\"b\n\u0001é\uD83D\uDE00""#.as_bytes()
    /// );
    /// ```
    pub fn json_string(key: &str) -> EntryKey {
        let mut json = String::with_capacity(key.len() + 2);
        json.push('"');
        for c in key.chars() {
            match c {
                '"' => json.push_str("\\\""),
                '\\' => json.push_str("\\\\"),
                '\u{8}' => json.push_str("\\b"),
                '\t' => json.push_str("\\t"),
                '\n' => json.push_str("\\n"),
                '\u{c}' => json.push_str("\\f"),
                '\r' => json.push_str("\\r"),
                c if u32::from(c) < 0x20 => {
                    let _ = write!(json, "\\u{:04X}", u32::from(c));
                }
                c if u32::from(c) > 0xFFFF => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let _ = write!(json, "\\u{unit:04X}");
                    }
                }
                c => json.push(c),
            }
        }
        json.push('"');
        EntryKey(json.into_bytes())
    }

    /// A Java `Integer` key under `JsonJacksonCodec`: its decimal text.
    ///
    /// ```
    /// use redisson_locks::EntryKey;
    ///
    /// // Java: redisson.getMap("seats", new JsonJacksonCodec()).getLock(-7)
    /// assert_eq!(EntryKey::json_int(-7).as_bytes(), b"-7");
    /// // The same bytes as the text under `StringCodec`: the same entry's locks.
    /// assert_eq!(EntryKey::json_int(42), EntryKey::string("42"));
    /// // Not a `Long` 42, which Jackson writes with its type.
    /// assert_ne!(EntryKey::json_int(42), EntryKey::json_long(42));
    /// ```
    pub fn json_int(key: i32) -> EntryKey {
        EntryKey(key.to_string().into_bytes())
    }

    /// A Java `Long` key under `JsonJacksonCodec`, which writes its type
    /// beside it: `["java.lang.Long",42]`.
    ///
    /// ```
    /// use redisson_locks::EntryKey;
    ///
    /// // Java: redisson.getMap("orders", new JsonJacksonCodec()).getLock(42L)
    /// let key = EntryKey::json_long(42);
    /// assert_eq!(key.as_bytes(), br#"["java.lang.Long",42]"#);
    /// ```
    pub fn json_long(key: i64) -> EntryKey {
        EntryKey(format!("[\"java.lang.Long\",{key}]").into_bytes())
    }

    /// The encoded bytes.
    ///
    /// ```
    /// use redisson_locks::EntryKey;
    ///
    /// // To compare with the bytes a Java service logged for the same key.
    /// let key = EntryKey::json_string("order-7");
    /// let hex: String = key.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    /// assert_eq!(hex, "226f726465722d3722"); // "order-7", quotes included
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Which Redisson collection the entries belong to. The lock names do not
/// depend on it (every type derives them the same way); it is kept for what
/// the handle says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectionType {
    /// `RMap` (and `RMapCache`, `RLocalCachedMap`: the same methods).
    Map,
    /// `RSet`.
    Set,
    /// `RSetCache`.
    SetCache,
    /// `RListMultimap`, `RSetMultimap` (`RMultimap`).
    Multimap,
    /// `RJsonStore` (Redisson PRO).
    JsonStore,
}

/// Locks on a collection's entries, as Redisson derives them: Java code that
/// takes `redisson.getMap("orders").getLock(orderId)` (or `getFairLock`,
/// `getReadWriteLock`, `getSemaphore`, `getPermitExpirableSemaphore`,
/// `getCountDownLatch`, on an `RMap`, `RSet`, `RSetCache`, `RListMultimap`,
/// `RSetMultimap` or `RJsonStore`) locks a name made from the collection's
/// name and the key's encoded bytes. [`CollectionLocks`] makes the same
/// names, so a Rust service contends on the same entry.
///
/// The name is `{collection}:<hash>:<kind>` (`collection:<hash>:<kind>` when
/// the collection's name has a hash tag of its own): `<hash>` is the 128-bit
/// HighwayHash of the key as the collection's codec encodes it, in base64
/// without padding (the hash the single-hash multi-lock uses), and `<kind>` is
/// `lock`, `fairlock`, `rw_lock`, `semaphore`, `permitexpirablesemaphore` or
/// `countdownlatch`. Every collection type uses the same rule (checked against
/// Redisson 3.52 and 4.7 for all but `RJsonStore`, which is Redisson PRO: it is
/// not in the open-source jar, and its names follow the same rule untested).
///
/// The codec's bytes matter: the same key under `StringCodec` and under a JSON
/// codec are different entries. [`EntryKey`] builds the bytes of the codecs a
/// Rust service can share with Java without a JVM (`StringCodec`, and
/// `JsonJacksonCodec`'s strings and numbers); for any other codec (Kryo, the
/// default since Redisson 3.x: its bytes depend on Java's classes), take the
/// bytes Java produces (`codec.getMapKeyEncoder().encode(key)`) and pass them
/// to [`EntryKey::encoded`].
///
/// Made by [`Client::get_map`] and its siblings.
#[derive(Debug, Clone)]
pub struct CollectionLocks {
    client: Client,
    name: String,
    kind: CollectionType,
}

impl CollectionLocks {
    pub(crate) fn new(
        client: Client,
        name: String,
        kind: CollectionType,
    ) -> Result<CollectionLocks> {
        if name.is_empty() {
            return Err(Error::invalid("a collection's name must not be empty"));
        }
        Ok(CollectionLocks { client, name, kind })
    }

    /// The collection's name.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// let orders = client.get_map("orders")?;
    /// assert_eq!(orders.name(), "orders");
    /// // The collection's name, not its locks': theirs are made from it.
    /// let lock = orders.get_lock(&EntryKey::string("42"))?;
    /// assert!(lock.name().starts_with("{orders}:"));
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The collection's type.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::{CollectionType, EntryKey};
    /// let sessions = client.get_set_cache("sessions")?;
    /// assert_eq!(sessions.collection_type(), CollectionType::SetCache);
    ///
    /// // The type is what the handle says of itself: the lock names do not
    /// // depend on it.
    /// let key = EntryKey::string("s-1");
    /// assert_eq!(
    ///     sessions.get_lock(&key)?.name(),
    ///     client.get_map("sessions")?.get_lock(&key)?.name()
    /// );
    /// # Ok(()) }
    /// ```
    pub fn collection_type(&self) -> CollectionType {
        self.kind
    }

    /// The name Redisson gives the lock of `kind` (`"lock"`, `"fairlock"`,
    /// `"rw_lock"`, `"semaphore"`, `"permitexpirablesemaphore"`,
    /// `"countdownlatch"`) on entry `key`.
    fn entry_name(&self, key: &EntryKey, kind: &str) -> Result<String> {
        if key.0.is_empty() {
            return Err(Error::invalid(format!(
                "an entry lock of '{}' needs a key: its encoded bytes are empty",
                self.name
            )));
        }
        Ok(crate::transport::keys::entry_lock_name(
            &self.name, &key.0, kind,
        ))
    }

    /// The entry's lock (Redisson `getLock(key)`): a reentrant [`RLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("orders", StringCodec.INSTANCE).getLock("42")
    /// let lock = client.get_map("orders")?.get_lock(&EntryKey::string("42"))?;
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty key, or a name over
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) (or, in a cluster, one whose
    /// keys would be split over slots).
    pub fn get_lock(&self, key: &EntryKey) -> Result<RLock> {
        self.client.get_lock(self.entry_name(key, "lock")?)
    }

    /// The entry's fair lock (Redisson `getFairLock(key)`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("orders", StringCodec.INSTANCE).getFairLock("42")
    /// let lock = client.get_map("orders")?.get_fair_lock(&EntryKey::string("42"))?;
    /// assert!(lock.is_fair());
    /// assert_eq!(lock.name(), "{orders}:RE0IojEvPTY8Dofe3IkBNA:fairlock");
    /// let guard = lock.lock().await?; // after every Java or Rust waiter that asked first
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](CollectionLocks::get_lock).
    pub fn get_fair_lock(&self, key: &EntryKey) -> Result<RLock> {
        self.client.get_fair_lock(self.entry_name(key, "fairlock")?)
    }

    /// The entry's read-write lock (Redisson `getReadWriteLock(key)`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("prices", new JsonJacksonCodec()).getReadWriteLock(1001L)
    /// let rw = client.get_map("prices")?.get_read_write_lock(&EntryKey::json_long(1001))?;
    /// let reading = rw.read_lock().lock().await?; // shared with Java's readers
    /// reading.unlock().await?;
    /// let writing = rw.write_lock().lock().await?; // alone
    /// writing.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](CollectionLocks::get_lock).
    pub fn get_read_write_lock(&self, key: &EntryKey) -> Result<RReadWriteLock> {
        self.client
            .get_read_write_lock(self.entry_name(key, "rw_lock")?)
    }

    /// The entry's semaphore (Redisson `getSemaphore(key)`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("tenants", StringCodec.INSTANCE).getSemaphore("acme")
    /// let jobs = client.get_map("tenants")?.get_semaphore(&EntryKey::string("acme"))?;
    /// jobs.try_set_permits(5).await?; // at most 5 of acme's jobs at once
    /// jobs.acquire().await?;
    /// // ... one job ...
    /// jobs.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](CollectionLocks::get_lock).
    pub fn get_semaphore(&self, key: &EntryKey) -> Result<RSemaphore> {
        self.client
            .get_semaphore(self.entry_name(key, "semaphore")?)
    }

    /// The entry's permit-expirable semaphore (Redisson
    /// `getPermitExpirableSemaphore(key)`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("tenants", StringCodec.INSTANCE)
    /// //           .getPermitExpirableSemaphore("acme")
    /// let slots = client
    ///     .get_map("tenants")?
    ///     .get_permit_expirable_semaphore(&EntryKey::string("acme"))?;
    /// slots.try_set_permits(2).await?;
    /// // A permit whose holder dies comes back after its 30 s lease.
    /// let permit = slots.acquire(Duration::from_secs(30)).await?;
    /// slots.release(&permit).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](CollectionLocks::get_lock).
    pub fn get_permit_expirable_semaphore(
        &self,
        key: &EntryKey,
    ) -> Result<RPermitExpirableSemaphore> {
        self.client
            .get_permit_expirable_semaphore(self.entry_name(key, "permitexpirablesemaphore")?)
    }

    /// The entry's count-down latch (Redisson `getCountDownLatch(key)`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("orders", StringCodec.INSTANCE).getCountDownLatch("42")
    /// let packed = client.get_map("orders")?.get_count_down_latch(&EntryKey::string("42"))?;
    /// packed.try_set_count(3).await?; // three items to pack
    /// // ... each packer calls `packed.count_down()` ...
    /// packed.wait().await?; // the order ships once all three are packed
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](CollectionLocks::get_lock); and in a cluster always
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument): an entry's
    /// name carries its collection's hash tag (`{orders}:...`), and a latch
    /// so named would have its channel in another slot than its key (see
    /// [`Client::get_count_down_latch`](crate::Client::get_count_down_latch)).
    pub fn get_count_down_latch(&self, key: &EntryKey) -> Result<RCountDownLatch> {
        self.client
            .get_count_down_latch(self.entry_name(key, "countdownlatch")?)
    }
}

impl Client {
    /// The locks on the entries of Redisson map `name` (`redisson.getMap(name)`
    /// and its `getLock(key)`, `getFairLock`, `getReadWriteLock`,
    /// `getSemaphore`, `getPermitExpirableSemaphore`, `getCountDownLatch`).
    /// No I/O happens here, and the map's own data is never touched.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getMap("lock_name").getReadWriteLock("lock_id"), on StringCodec
    /// let rw = client.get_map("lock_name")?.get_read_write_lock(&EntryKey::string("lock_id"))?;
    /// let reading = rw.read_lock().lock().await?;
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name.
    pub fn get_map(&self, name: impl Into<String>) -> Result<CollectionLocks> {
        CollectionLocks::new(self.clone(), name.into(), CollectionType::Map)
    }

    /// As [`get_map`](Client::get_map), for an `RSet`'s values.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getSet("tags", StringCodec.INSTANCE).getLock("urgent")
    /// let lock = client.get_set("tags")?.get_lock(&EntryKey::string("urgent"))?;
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_map`](Client::get_map).
    pub fn get_set(&self, name: impl Into<String>) -> Result<CollectionLocks> {
        CollectionLocks::new(self.clone(), name.into(), CollectionType::Set)
    }

    /// As [`get_map`](Client::get_map), for an `RSetCache`'s values.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getSetCache("sessions", StringCodec.INSTANCE).getLock("s-81")
    /// let session = client.get_set_cache("sessions")?.get_lock(&EntryKey::string("s-81"))?;
    /// if let Some(guard) = session.try_lock().await? {
    ///     // ... refresh the session ...
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_map`](Client::get_map).
    pub fn get_set_cache(&self, name: impl Into<String>) -> Result<CollectionLocks> {
        CollectionLocks::new(self.clone(), name.into(), CollectionType::SetCache)
    }

    /// As [`get_map`](Client::get_map), for an `RListMultimap`'s or
    /// `RSetMultimap`'s keys.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java: redisson.getListMultimap("lines", new JsonJacksonCodec()).getLock(42)
    /// let lines = client.get_multimap("lines")?.get_lock(&EntryKey::json_int(42))?;
    /// let guard = lines.lock().await?;
    /// // ... edit key 42's values, as Java code holding the same lock would ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_map`](Client::get_map).
    pub fn get_multimap(&self, name: impl Into<String>) -> Result<CollectionLocks> {
        CollectionLocks::new(self.clone(), name.into(), CollectionType::Multimap)
    }

    /// As [`get_map`](Client::get_map), for an `RJsonStore`'s keys (Redisson
    /// PRO; the names follow the same rule, untested against it).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::EntryKey;
    /// // Java (Redisson PRO): redisson.getJsonStore("profiles", codec).getLock("u-7"),
    /// // with the key as the store's key codec encodes it (here its UTF-8 text).
    /// let lock = client.get_json_store("profiles")?.get_lock(&EntryKey::string("u-7"))?;
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_map`](Client::get_map).
    pub fn get_json_store(&self, name: impl Into<String>) -> Result<CollectionLocks> {
        CollectionLocks::new(self.clone(), name.into(), CollectionType::JsonStore)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::keys::entry_lock_name;

    /// Names printed by Redisson 3.52 and 4.7 (`getMap(..).getLock(..).getName()`
    /// and the other kinds), for keys under `StringCodec` and `JsonJacksonCodec`.
    #[test]
    fn names_are_redissons() {
        let name = |collection: &str, key: EntryKey, kind: &str| {
            entry_lock_name(collection, key.as_bytes(), kind)
        };
        assert_eq!(
            name("m", EntryKey::string("k"), "lock"),
            "{m}:zGp2RnUc2cZchMHly8iqUA:lock"
        );
        assert_eq!(
            name("s", EntryKey::string("k"), "fairlock"),
            "{s}:zGp2RnUc2cZchMHly8iqUA:fairlock"
        );
        assert_eq!(
            name("m", EntryKey::string("k"), "rw_lock"),
            "{m}:zGp2RnUc2cZchMHly8iqUA:rw_lock"
        );
        assert_eq!(
            name("sm", EntryKey::string("k"), "permitexpirablesemaphore"),
            "{sm}:zGp2RnUc2cZchMHly8iqUA:permitexpirablesemaphore"
        );
        assert_eq!(
            name("{t}m", EntryKey::string("k"), "lock"),
            "{t}m:zGp2RnUc2cZchMHly8iqUA:lock"
        );
        assert_eq!(
            name("m", EntryKey::string("42"), "lock"),
            "{m}:RE0IojEvPTY8Dofe3IkBNA:lock"
        );
        assert_eq!(
            name("m", EntryKey::string("über"), "lock"),
            "{m}:GzuwQEB/5bLb7VUiU1pjGg:lock"
        );
        assert_eq!(
            name("m", EntryKey::json_string("k"), "lock"),
            "{m}:MVqIGLrZGxv6VtioR3jeNg:lock"
        );
        assert_eq!(
            name("m", EntryKey::json_string("über"), "lock"),
            "{m}:E54TPr3IF7IeMgrHgtE7qg:lock"
        );
        assert_eq!(
            name("m", EntryKey::json_long(42), "lock"),
            "{m}:WwNbBTVB1zGkaLw39wufaA:lock"
        );
        assert_eq!(
            name("m", EntryKey::json_int(42), "lock"),
            "{m}:RE0IojEvPTY8Dofe3IkBNA:lock"
        );
    }

    /// The bytes Jackson (in Redisson 3.52's `JsonJacksonCodec`) wrote for a
    /// string of every kind of character.
    #[test]
    fn json_strings_are_jacksons() {
        let key = EntryKey::json_string("a\u{1}\u{1f}\n\t\u{8}\u{c}\r\"\\/\u{7f}\u{2028}é😀");
        let expected = "22615c75303030315c75303031465c6e5c745c625c665c725c225c5c2f7fe280a8c3a95c75443833445c754445303022";
        let hex: String = key.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected);
    }
}
