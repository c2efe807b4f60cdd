package io.redissonlocks.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A Redisson client driven line by line: one JSON command per line on stdin, one
 * JSON event per line on stdout. Each named actor is a thread of its own (Redisson's
 * lock owner is the thread), running its commands in order.
 *
 * <p>Usage: {@code Driver --redis redis://127.0.0.1:PORT --watchdog-ms N [--fair-wait-ms N]
 * [--database N]}. Redisson reads no database from the address: {@code --database} is
 * {@code setDatabase}.
 */
public final class Driver {
    private static final PrintWriter OUT =
            new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), false);

    private static RedissonClient redisson;
    private static final Map<String, Actor> ACTORS = new ConcurrentHashMap<>();

    public static void main(String[] args) throws IOException {
        String url = null;
        long watchdogMs = 30_000;
        long fairWaitMs = -1;
        int database = -1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--redis": url = args[++i]; break;
                case "--watchdog-ms": watchdogMs = Long.parseLong(args[++i]); break;
                case "--fair-wait-ms": fairWaitMs = Long.parseLong(args[++i]); break;
                case "--database": database = Integer.parseInt(args[++i]); break;
                default:
                    System.err.println("unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        if (url == null) {
            System.err.println("usage: Driver --redis redis://HOST:PORT --watchdog-ms N [--fair-wait-ms N] [--database N]");
            System.exit(2);
        }
        Config config = new Config();
        config.useSingleServer().setAddress(url);
        if (database >= 0) {
            config.useSingleServer().setDatabase(database);
        }
        config.setLockWatchdogTimeout(watchdogMs);
        // Values of getMultiLock(group, values) are hashed in their encoded form:
        // with StringCodec that is a string's UTF-8 bytes, which is what the Rust
        // side hashes for a &str. (The locks themselves use their own codecs.)
        config.setCodec(StringCodec.INSTANCE);
        if (fairWaitMs >= 0) {
            setFairWait(config, fairWaitMs);
        }
        redisson = Redisson.create(config);
        emit(obj("event", "ready", "client_id", redisson.getId(),
                "fair_wait_supported", fairWaitSupported,
                "non_reentrant_supported", nonReentrantSupported()));

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            Map<String, Object> cmd;
            try {
                cmd = Json.parse(line);
            } catch (RuntimeException e) {
                emit(obj("event", "error", "message", "bad json: " + e.getMessage()));
                continue;
            }
            if ("exit".equals(cmd.get("op"))) {
                break;
            }
            dispatch(cmd);
        }
        exit();
    }

    private static boolean fairWaitSupported;

    /** {@code Config.setFairLockWaitTimeout} exists only in some releases: reflection. */
    private static void setFairWait(Config config, long ms) {
        try {
            Method m = Config.class.getMethod("setFairLockWaitTimeout", long.class);
            m.invoke(config, ms);
            fairWaitSupported = true;
        } catch (ReflectiveOperationException e) {
            System.err.println("this Redisson has no Config.setFairLockWaitTimeout; ignored");
        }
    }

    /** Shuts Redisson down within a bound, then exits whatever happened. */
    private static void exit() {
        Thread killer = new Thread(() -> {
            try {
                Thread.sleep(5_000);
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
            Runtime.getRuntime().halt(3);
        }, "exit-timer");
        killer.setDaemon(true);
        killer.start();
        try {
            redisson.shutdown(0, 2, TimeUnit.SECONDS);
        } catch (Throwable t) {
            System.err.println("shutdown: " + t);
        }
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }

    private static void dispatch(Map<String, Object> cmd) {
        Object op = cmd.get("op");
        Object actorName = cmd.get("actor");
        if ("contend".equals(op)) {
            Thread t = new Thread(() -> contend(cmd), "contend");
            t.setDaemon(true);
            t.start();
            return;
        }
        if (!(actorName instanceof String)) {
            emit(withActor(cmd, obj("event", "error", "message", "missing actor for op " + op)));
            return;
        }
        Actor actor = ACTORS.computeIfAbsent((String) actorName, Actor::new);
        actor.queue.add(cmd);
    }

    /** One actor: a thread running its commands in order. */
    private static final class Actor implements Runnable {
        final String name;
        final LinkedBlockingQueue<Map<String, Object>> queue = new LinkedBlockingQueue<>();

        Actor(String name) {
            this.name = name;
            Thread t = new Thread(this, "actor-" + name);
            t.setDaemon(true);
            t.start();
        }

        @Override
        public void run() {
            while (true) {
                Map<String, Object> cmd;
                try {
                    cmd = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                Map<String, Object> event;
                try {
                    event = execute(cmd);
                } catch (IllegalMonitorStateException e) {
                    event = obj("event", "error", "error", "not_held", "message", String.valueOf(e.getMessage()));
                } catch (Throwable t) {
                    Throwable root = t;
                    while (root.getCause() != null && root.getCause() != root) {
                        root = root.getCause();
                    }
                    if (root instanceof IllegalMonitorStateException) {
                        event = obj("event", "error", "error", "not_held", "message", String.valueOf(root.getMessage()));
                    } else {
                        event = obj("event", "error", "message", t.toString());
                    }
                }
                emit(withActor(cmd, event));
            }
        }
    }

    private static RLock lockOf(Map<String, Object> cmd) {
        String name = str(cmd, "name");
        String kind = cmd.containsKey("kind") ? str(cmd, "kind") : "reentrant";
        switch (kind) {
            case "reentrant": return redisson.getLock(name);
            case "fair": return redisson.getFairLock(name);
            case "read": return redisson.getReadWriteLock(name).readLock();
            case "write": return redisson.getReadWriteLock(name).writeLock();
            case "fenced": return redisson.getFencedLock(name);
            case "spin": return redisson.getSpinLock(name);
            // Redisson 4 has these; 3.x does not (looked up by name so that one
            // source builds against both).
            // Redisson's multi-lock on one hash: `name` is the group, `values` the
            // members, comma-separated.
            case "group_multi":
                return redisson.getMultiLock(name,
                        java.util.Arrays.<Object>asList((Object[]) str(cmd, "values").split(",")));
            // Redisson's multi-lock over separate locks: `name` is their names,
            // comma-separated.
            case "multi": {
                String[] names = name.split(",");
                RLock[] locks = new RLock[names.length];
                for (int i = 0; i < names.length; i++) {
                    locks[i] = redisson.getLock(names[i]);
                }
                return redisson.getMultiLock(locks);
            }
            // A lock on a collection's entry: `name` is the collection, with
            // `collection_type`, `codec`, `key` (and `key_type`); `entry_kind`
            // is lock, fairlock, read or write.
            case "entry": {
                String entryKind = str(cmd, "entry_kind");
                switch (entryKind) {
                    case "read": return ((org.redisson.api.RReadWriteLock) entryObject(cmd, "getReadWriteLock")).readLock();
                    case "write": return ((org.redisson.api.RReadWriteLock) entryObject(cmd, "getReadWriteLock")).writeLock();
                    case "fairlock": return (RLock) entryObject(cmd, "getFairLock");
                    default: return (RLock) entryObject(cmd, "getLock");
                }
            }
            case "nonreentrant": return byName("getNonReentrantLock", name);
            case "nonreentrant_fair": return byName("getNonReentrantFairLock", name);
            default: throw new IllegalArgumentException("unknown kind " + kind);
        }
    }

    /** The collection `cmd` names, with its codec. */
    private static Object collectionOf(Map<String, Object> cmd) throws ReflectiveOperationException {
        String name = str(cmd, "name");
        org.redisson.client.codec.Codec codec = "json".equals(str(cmd, "codec"))
                ? (org.redisson.client.codec.Codec) Class.forName("org.redisson.codec.JsonJacksonCodec")
                        .getDeclaredConstructor().newInstance()
                : StringCodec.INSTANCE;
        switch (str(cmd, "collection_type")) {
            case "map": return redisson.getMap(name, codec);
            case "set": return redisson.getSet(name, codec);
            case "setcache": return redisson.getSetCache(name, codec);
            case "listmultimap": return redisson.getListMultimap(name, codec);
            case "setmultimap": return redisson.getSetMultimap(name, codec);
            default: throw new IllegalArgumentException("unknown collection " + str(cmd, "collection_type"));
        }
    }

    /** The key `cmd` names: a String, or with `key_type` a Long or an Integer. */
    private static Object keyOf(Map<String, Object> cmd) {
        String key = str(cmd, "key");
        String type = cmd.containsKey("key_type") ? str(cmd, "key_type") : "string";
        switch (type) {
            case "long": return Long.parseLong(key);
            case "int": return Integer.parseInt(key);
            default: return key;
        }
    }

    /** `collection.method(key)`: the object Redisson derives from an entry. */
    private static Object entryObject(Map<String, Object> cmd, String method) {
        try {
            Object collection = collectionOf(cmd);
            java.lang.reflect.Method m = null;
            for (java.lang.reflect.Method candidate : collection.getClass().getMethods()) {
                if (candidate.getName().equals(method) && candidate.getParameterCount() == 1) {
                    m = candidate;
                    break;
                }
            }
            if (m == null) {
                throw new UnsupportedOperationException(method + " is not on " + collection.getClass());
            }
            return m.invoke(collection, keyOf(cmd));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The names Redisson gives every object it derives from an entry. */
    private static Map<String, Object> entryNames(Map<String, Object> cmd) {
        return obj("event", "entry_names",
                "lock", ((RLock) entryObject(cmd, "getLock")).getName(),
                "fairlock", ((RLock) entryObject(cmd, "getFairLock")).getName(),
                "rw_lock", ((org.redisson.api.RReadWriteLock) entryObject(cmd, "getReadWriteLock")).readLock().getName(),
                "semaphore", ((org.redisson.api.RObject) entryObject(cmd, "getSemaphore")).getName(),
                "permitexpirablesemaphore", ((org.redisson.api.RObject) entryObject(cmd, "getPermitExpirableSemaphore")).getName(),
                "countdownlatch", ((org.redisson.api.RObject) entryObject(cmd, "getCountDownLatch")).getName());
    }

    /** A lock from a `RedissonClient` method that this Redisson may not have. */
    private static RLock byName(String method, String name) {
        try {
            return (RLock) redisson.getClass().getMethod(method, String.class).invoke(redisson, name);
        } catch (ReflectiveOperationException e) {
            throw new UnsupportedOperationException(method + " is not in this Redisson", e);
        }
    }

    /** Does this Redisson have the non-reentrant locks? */
    private static boolean nonReentrantSupported() {
        try {
            redisson.getClass().getMethod("getNonReentrantLock", String.class);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    /** Runs one actor command on the actor's thread; the event to print. */
    private static Map<String, Object> execute(Map<String, Object> cmd) throws Exception {
        String op = str(cmd, "op");
        switch (op) {
            case "lock": {
                RLock lock = lockOf(cmd);
                long lease = num(cmd, "lease_ms", 0);
                long wait = num(cmd, "wait_ms", -1);
                if (lock instanceof org.redisson.api.RFencedLock) {
                    org.redisson.api.RFencedLock fenced = (org.redisson.api.RFencedLock) lock;
                    Long token = wait < 0
                            ? (lease > 0 ? fenced.lockAndGetToken(lease, TimeUnit.MILLISECONDS)
                                         : fenced.lockAndGetToken())
                            : fenced.tryLockAndGetToken(wait, lease > 0 ? lease : -1, TimeUnit.MILLISECONDS);
                    return token != null
                            ? obj("event", "acquired", "thread", Thread.currentThread().getId(), "token", token)
                            : obj("event", "not_acquired", "thread", Thread.currentThread().getId());
                }
                boolean acquired;
                if (wait < 0) {
                    if (lease > 0) {
                        lock.lock(lease, TimeUnit.MILLISECONDS);
                    } else {
                        lock.lock();
                    }
                    acquired = true;
                } else {
                    acquired = lock.tryLock(wait, lease > 0 ? lease : -1, TimeUnit.MILLISECONDS);
                }
                return acquired
                        ? obj("event", "acquired", "thread", Thread.currentThread().getId())
                        : obj("event", "not_acquired", "thread", Thread.currentThread().getId());
            }
            case "unlock":
                lockOf(cmd).unlock();
                return obj("event", "unlocked");
            case "inspect": {
                RLock lock = lockOf(cmd);
                return obj("event", "inspected",
                        "hold_count", (long) lock.getHoldCount(),
                        "held_by_current", lock.isHeldByCurrentThread(),
                        "locked", lock.isLocked(),
                        "ttl_ms", lock.remainTimeToLive(),
                        "thread", Thread.currentThread().getId());
            }
            case "force_unlock":
                return obj("event", "forced", "result", lockOf(cmd).forceUnlock());
            case "entry_names":
                return entryNames(cmd);
            case "record":
                redisson.<String>getList(str(cmd, "list"), StringCodec.INSTANCE).add(str(cmd, "value"));
                return obj("event", "recorded");
            case "incr_nonatomic":
                incrNonAtomic(str(cmd, "key"));
                return obj("event", "incremented");
            case "sleep":
                Thread.sleep(num(cmd, "ms", 0));
                return obj("event", "slept");
            default:
                // The synchronizers (semaphores, latches), or an unknown op.
                return Synchronizers.execute(redisson, op, cmd);
        }
    }

    /** GET, sleep 1 ms, SET: overlapping critical sections lose increments. */
    private static void incrNonAtomic(String key) throws InterruptedException {
        RBucket<String> bucket = redisson.getBucket(key, StringCodec.INSTANCE);
        String value = bucket.get();
        long n = value == null ? 0 : Long.parseLong(value);
        Thread.sleep(1);
        bucket.set(Long.toString(n + 1));
    }

    /** T threads, each N times: lock, non-atomic increment, sleep H, unlock. */
    private static void contend(Map<String, Object> cmd) {
        int threads = (int) num(cmd, "threads", 1);
        int ops = (int) num(cmd, "ops", 1);
        long holdMs = num(cmd, "hold_ms", 0);
        long lease = num(cmd, "lease_ms", 0);
        String counter = str(cmd, "counter");
        AtomicLong grants = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        List<String> firstErrors = new ArrayList<>();
        RLock lock;
        try {
            lock = lockOf(cmd);
        } catch (RuntimeException e) {
            emit(withActor(cmd, obj("event", "error", "message", e.toString())));
            return;
        }
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                for (int i = 0; i < ops; i++) {
                    try {
                        if (lease > 0) {
                            lock.lock(lease, TimeUnit.MILLISECONDS);
                        } else {
                            lock.lock();
                        }
                        grants.incrementAndGet();
                        try {
                            incrNonAtomic(counter);
                            if (holdMs > 0) {
                                Thread.sleep(holdMs);
                            }
                        } finally {
                            lock.unlock();
                        }
                    } catch (Throwable e) {
                        errors.incrementAndGet();
                        synchronized (firstErrors) {
                            if (firstErrors.size() < 5) {
                                firstErrors.add(e.toString());
                            }
                        }
                    }
                }
            }, "contend-" + t);
            w.setDaemon(true);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            try {
                w.join();
            } catch (InterruptedException e) {
                return;
            }
        }
        String errorText;
        synchronized (firstErrors) {
            errorText = String.join("; ", firstErrors);
        }
        emit(withActor(cmd, obj("event", "contended", "grants", grants.get(), "errors", errors.get(),
                "error_messages", errorText)));
    }

    // ---- events ----

    private static synchronized void emit(Map<String, Object> event) {
        OUT.println(Json.format(event));
        OUT.flush();
    }

    private static Map<String, Object> withActor(Map<String, Object> cmd, Map<String, Object> event) {
        Object actor = cmd.get("actor");
        if (actor == null) {
            return event;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("event", event.get("event"));
        out.put("actor", actor);
        out.putAll(event);
        return out;
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    static String str(Map<String, Object> cmd, String key) {
        Object v = cmd.get(key);
        if (!(v instanceof String)) {
            throw new IllegalArgumentException("missing string field " + key);
        }
        return (String) v;
    }

    static long num(Map<String, Object> cmd, String key, long dflt) {
        Object v = cmd.get(key);
        if (v == null) {
            return dflt;
        }
        if (!(v instanceof Number)) {
            throw new IllegalArgumentException("field " + key + " is not a number");
        }
        return ((Number) v).longValue();
    }
}
