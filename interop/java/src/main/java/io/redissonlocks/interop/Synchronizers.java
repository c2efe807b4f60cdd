package io.redissonlocks.interop;

import static io.redissonlocks.interop.Driver.num;
import static io.redissonlocks.interop.Driver.obj;
import static io.redissonlocks.interop.Driver.str;

import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RCountDownLatch;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The synchronizer ops of the driver: Redisson's {@code RSemaphore} ({@code sem_*}),
 * {@code RPermitExpirableSemaphore} ({@code pes_*}) and {@code RCountDownLatch}
 * ({@code latch_*}), each on the object named by the command's {@code name}.
 */
final class Synchronizers {
    private Synchronizers() {
    }

    static Map<String, Object> execute(RedissonClient redisson, String op, Map<String, Object> cmd)
            throws Exception {
        if (op.startsWith("sem_")) {
            return semaphore(redisson.getSemaphore(str(cmd, "name")), op, cmd);
        }
        if (op.startsWith("pes_")) {
            return expirable(redisson.getPermitExpirableSemaphore(str(cmd, "name")), op, cmd);
        }
        if (op.startsWith("latch_")) {
            return latch(redisson.getCountDownLatch(str(cmd, "name")), op, cmd);
        }
        return obj("event", "error", "message", "unknown op " + op);
    }

    /** {@code permits} (default 1); {@code wait_ms} -1 waits without a limit. */
    private static Map<String, Object> semaphore(RSemaphore sem, String op, Map<String, Object> cmd)
            throws Exception {
        int permits = (int) num(cmd, "permits", 1);
        switch (op) {
            case "sem_acquire": {
                long wait = num(cmd, "wait_ms", -1);
                boolean acquired;
                if (wait < 0) {
                    sem.acquire(permits);
                    acquired = true;
                } else {
                    acquired = sem.tryAcquire(permits, wait, TimeUnit.MILLISECONDS);
                }
                return obj("event", acquired ? "sem_acquired" : "sem_not_acquired");
            }
            case "sem_release":
                sem.release(permits);
                return obj("event", "sem_released");
            case "sem_try_set":
                return obj("event", "sem_set", "result", sem.trySetPermits(permits));
            case "sem_add":
                sem.addPermits(permits);
                return obj("event", "sem_added");
            case "sem_available":
                return obj("event", "sem_available", "permits", (long) sem.availablePermits());
            case "sem_drain":
                return obj("event", "sem_drained", "permits", (long) sem.drainPermits());
            default:
                return obj("event", "error", "message", "unknown op " + op);
        }
    }

    /** {@code lease_ms} 0: Redisson's default lease; {@code wait_ms} -1: no limit. */
    private static Map<String, Object> expirable(RPermitExpirableSemaphore sem, String op,
            Map<String, Object> cmd) throws Exception {
        switch (op) {
            case "pes_acquire": {
                long lease = num(cmd, "lease_ms", 0);
                long wait = num(cmd, "wait_ms", -1);
                String id;
                if (wait < 0) {
                    id = lease > 0 ? sem.acquire(lease, TimeUnit.MILLISECONDS) : sem.acquire();
                } else {
                    id = sem.tryAcquire(wait, lease > 0 ? lease : -1, TimeUnit.MILLISECONDS);
                }
                return id != null ? obj("event", "pes_acquired", "id", id) : obj("event", "pes_not_acquired");
            }
            case "pes_release":
                sem.release(str(cmd, "id"));
                return obj("event", "pes_released");
            case "pes_try_release":
                return obj("event", "pes_released", "result", sem.tryRelease(str(cmd, "id")));
            case "pes_update_lease":
                return obj("event", "pes_updated", "result",
                        sem.updateLeaseTime(str(cmd, "id"), num(cmd, "lease_ms", 0), TimeUnit.MILLISECONDS));
            case "pes_available":
                return obj("event", "pes_available", "permits", (long) sem.availablePermits());
            case "pes_try_set":
                return obj("event", "pes_set", "result", sem.trySetPermits((int) num(cmd, "permits", 1)));
            case "pes_add":
                sem.addPermits((int) num(cmd, "permits", 1));
                return obj("event", "pes_added");
            default:
                return obj("event", "error", "message", "unknown op " + op);
        }
    }

    /** {@code wait_ms} -1: {@code await()} without a limit. */
    private static Map<String, Object> latch(RCountDownLatch latch, String op, Map<String, Object> cmd)
            throws Exception {
        switch (op) {
            case "latch_try_set":
                return obj("event", "latch_set", "result", latch.trySetCount(num(cmd, "count", 1)));
            case "latch_count_down":
                latch.countDown();
                return obj("event", "latch_counted_down");
            case "latch_await": {
                long wait = num(cmd, "wait_ms", -1);
                boolean opened;
                if (wait < 0) {
                    latch.await();
                    opened = true;
                } else {
                    opened = latch.await(wait, TimeUnit.MILLISECONDS);
                }
                return obj("event", opened ? "latch_opened" : "latch_timed_out");
            }
            case "latch_count":
                return obj("event", "latch_count", "count", latch.getCount());
            case "latch_delete":
                return obj("event", "latch_deleted", "result", latch.delete());
            default:
                return obj("event", "error", "message", "unknown op " + op);
        }
    }
}
