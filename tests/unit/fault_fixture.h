/* fault_fixture.h: fault injection through SQLite's own hooks, as SQLite's tests do it,
 * for the tests of what the store and the server do when it fails (test_store_faults.c,
 * test_server_faults.c). Kinds of fault, counted only while armed, on the arming thread:
 *
 *   FAULT_MALLOC  SQLite's allocator (SQLITE_CONFIG_MALLOC wrapping its default one):
 *                 the Nth allocation or reallocation returns NULL.
 *   FAULT_IO      a VFS ("faulty", made the default) over the "unix" one: the Nth
 *                 xWrite, xSync or xTruncate returns SQLITE_IOERR_WRITE (_FSYNC,
 *                 _TRUNCATE) without touching the file.
 *   FAULT_PROCESS every allocation of the process, for a test binary that interposes
 *                 malloc and asks fault_now (test_server_faults.c does).
 *
 * A gate (fault_gate_close, _open) holds every xSync of the threads other than the one
 * that closed it until it opens: a test can look at a server while one of its commits
 * sits in its fsync (test_server_lock.c).
 *
 * A transient fault fails the Nth call only (a disk that hiccups, memory that comes
 * back); a persistent one fails the Nth and every call after it (a dead disk). A test
 * arms a fault at N, runs its scenario, and learns from fault_reached() whether the
 * scenario got as far as N: the loop over N ends at the first N it does not reach.
 *
 * fault_install() must run before anything else touches SQLite (it configures the
 * library before sqlite3_initialize). Include after cmocka.h. */
#pragma once

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* FAULT_PROCESS: every malloc of the process (a test that interposes malloc counts with
 * it; SQLite's default allocator calls malloc, so it counts SQLite's too). */
typedef enum FaultKind { FAULT_MALLOC, FAULT_IO, FAULT_PROCESS } FaultKind;

typedef struct FaultPlan {
    bool armed;
    FaultKind kind;
    bool persistent;
    int64_t at;    /* the call (from 1) that fails first */
    int64_t count; /* calls of the armed kind seen since arming */
    int64_t fired; /* calls failed */
} FaultPlan;

/* Each thread its own plan: only the test's thread arms one, so a server's scheduler
 * thread neither fails nor moves the count, and N stays the same from run to run. */
static _Thread_local FaultPlan fault_plan;
static sqlite3_mem_methods fault_mem_orig;
static sqlite3_vfs *fault_vfs_orig;

static inline void fault_arm(FaultKind kind, int64_t at, bool persistent)
{
    fault_plan = (FaultPlan){.armed = true, .kind = kind, .persistent = persistent, .at = at};
}

static inline void fault_disarm(void)
{
    fault_plan.armed = false;
}

/* Did the scenario make the call the plan fails? */
static inline bool fault_reached(void)
{
    return fault_plan.count >= fault_plan.at;
}

static inline bool fault_now(FaultKind kind)
{
    if (!fault_plan.armed || fault_plan.kind != kind)
        return false;
    int64_t n = ++fault_plan.count;
    bool fail = fault_plan.persistent ? n >= fault_plan.at : n == fault_plan.at;
    if (fail)
        fault_plan.fired++;
    return fail;
}

static inline const char *fault_kind_name(FaultKind k)
{
    return k == FAULT_MALLOC ? "malloc" : k == FAULT_IO ? "io" : "process malloc";
}

/* ---- the allocator ---- */

static void *fault_malloc(int n)
{
    return fault_now(FAULT_MALLOC) ? NULL : fault_mem_orig.xMalloc(n);
}

static void *fault_realloc(void *p, int n)
{
    return fault_now(FAULT_MALLOC) ? NULL : fault_mem_orig.xRealloc(p, n);
}

static void fault_free(void *p)
{
    fault_mem_orig.xFree(p);
}

static int fault_size(void *p)
{
    return fault_mem_orig.xSize(p);
}

static int fault_roundup(int n)
{
    return fault_mem_orig.xRoundup(n);
}

static int fault_mem_init(void *arg)
{
    return fault_mem_orig.xInit(fault_mem_orig.pAppData);
}

static void fault_mem_shutdown(void *arg)
{
    fault_mem_orig.xShutdown(fault_mem_orig.pAppData);
}

/* ---- the VFS: every call forwarded to "unix", writes, syncs and truncates counted ---- */

typedef struct FaultFile {
    sqlite3_file base;
    sqlite3_file *real; /* the unix VFS's file, just after this struct */
} FaultFile;

static sqlite3_file *real_of(sqlite3_file *f)
{
    return ((FaultFile *)f)->real;
}

static int ff_close(sqlite3_file *f)
{
    return real_of(f)->pMethods->xClose(real_of(f));
}

static int ff_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    return real_of(f)->pMethods->xRead(real_of(f), buf, n, off);
}

static int ff_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    if (fault_now(FAULT_IO))
        return SQLITE_IOERR_WRITE;
    return real_of(f)->pMethods->xWrite(real_of(f), buf, n, off);
}

static int ff_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    if (fault_now(FAULT_IO))
        return SQLITE_IOERR_TRUNCATE;
    return real_of(f)->pMethods->xTruncate(real_of(f), size);
}

/* ---- the gate on other threads' syncs ---- */

static pthread_mutex_t fault_gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fault_gate_cond = PTHREAD_COND_INITIALIZER;
static bool fault_gate_closed;
static pthread_t fault_gate_owner;
static int fault_gate_held; /* syncs waiting at the gate now */

static inline void fault_gate_close(void)
{
    pthread_mutex_lock(&fault_gate_lock);
    fault_gate_closed = true;
    fault_gate_owner = pthread_self();
    pthread_mutex_unlock(&fault_gate_lock);
}

static inline void fault_gate_open(void)
{
    pthread_mutex_lock(&fault_gate_lock);
    fault_gate_closed = false;
    pthread_cond_broadcast(&fault_gate_cond);
    pthread_mutex_unlock(&fault_gate_lock);
}

/* Wait until another thread's sync waits at the closed gate; false after ms. */
static inline bool fault_gate_wait_held(int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&fault_gate_lock);
    int r = 0;
    while (!fault_gate_held && r == 0)
        r = pthread_cond_timedwait(&fault_gate_cond, &fault_gate_lock, &until);
    bool held = fault_gate_held > 0;
    pthread_mutex_unlock(&fault_gate_lock);
    return held;
}

static void fault_gate_pass(void)
{
    pthread_mutex_lock(&fault_gate_lock);
    if (fault_gate_closed && !pthread_equal(pthread_self(), fault_gate_owner)) {
        fault_gate_held++;
        pthread_cond_broadcast(&fault_gate_cond);
        while (fault_gate_closed)
            pthread_cond_wait(&fault_gate_cond, &fault_gate_lock);
        fault_gate_held--;
    }
    pthread_mutex_unlock(&fault_gate_lock);
}

static int ff_sync(sqlite3_file *f, int flags)
{
    fault_gate_pass();
    if (fault_now(FAULT_IO))
        return SQLITE_IOERR_FSYNC;
    return real_of(f)->pMethods->xSync(real_of(f), flags);
}

static int ff_file_size(sqlite3_file *f, sqlite3_int64 *ret)
{
    return real_of(f)->pMethods->xFileSize(real_of(f), ret);
}

static int ff_lock(sqlite3_file *f, int l)
{
    return real_of(f)->pMethods->xLock(real_of(f), l);
}

static int ff_unlock(sqlite3_file *f, int l)
{
    return real_of(f)->pMethods->xUnlock(real_of(f), l);
}

static int ff_check_reserved(sqlite3_file *f, int *ret)
{
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), ret);
}

static int ff_file_control(sqlite3_file *f, int op, void *arg)
{
    return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}

static int ff_sector_size(sqlite3_file *f)
{
    return real_of(f)->pMethods->xSectorSize(real_of(f));
}

static int ff_device_chars(sqlite3_file *f)
{
    return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f));
}

static int ff_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **ret)
{
    return real_of(f)->pMethods->xShmMap(real_of(f), page, size, extend, ret);
}

static int ff_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return real_of(f)->pMethods->xShmLock(real_of(f), off, n, flags);
}

static void ff_shm_barrier(sqlite3_file *f)
{
    real_of(f)->pMethods->xShmBarrier(real_of(f));
}

static int ff_shm_unmap(sqlite3_file *f, int del)
{
    return real_of(f)->pMethods->xShmUnmap(real_of(f), del);
}

static int ff_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **ret)
{
    return real_of(f)->pMethods->xFetch(real_of(f), off, n, ret);
}

static int ff_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

static const sqlite3_io_methods fault_io = {
    .iVersion = 3,
    .xClose = ff_close,
    .xRead = ff_read,
    .xWrite = ff_write,
    .xTruncate = ff_truncate,
    .xSync = ff_sync,
    .xFileSize = ff_file_size,
    .xLock = ff_lock,
    .xUnlock = ff_unlock,
    .xCheckReservedLock = ff_check_reserved,
    .xFileControl = ff_file_control,
    .xSectorSize = ff_sector_size,
    .xDeviceCharacteristics = ff_device_chars,
    .xShmMap = ff_shm_map,
    .xShmLock = ff_shm_lock,
    .xShmBarrier = ff_shm_barrier,
    .xShmUnmap = ff_shm_unmap,
    .xFetch = ff_fetch,
    .xUnfetch = ff_unfetch,
};

static int fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *ret)
{
    FaultFile *f = (FaultFile *)file;
    f->real = (sqlite3_file *)&f[1];
    f->base.pMethods = NULL;
    int rc = fault_vfs_orig->xOpen(fault_vfs_orig, name, f->real, flags, ret);
    /* SQLite closes a file whose pMethods is set, even when opening it failed */
    if (f->real->pMethods)
        f->base.pMethods = &fault_io;
    return rc;
}

static int fv_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    return fault_vfs_orig->xDelete(fault_vfs_orig, name, sync_dir);
}

static int fv_access(sqlite3_vfs *vfs, const char *name, int flags, int *ret)
{
    return fault_vfs_orig->xAccess(fault_vfs_orig, name, flags, ret);
}

static int fv_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    return fault_vfs_orig->xFullPathname(fault_vfs_orig, name, n, out);
}

static int fv_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    return fault_vfs_orig->xRandomness(fault_vfs_orig, n, out);
}

static int fv_sleep(sqlite3_vfs *vfs, int us)
{
    return fault_vfs_orig->xSleep(fault_vfs_orig, us);
}

static int fv_current_time(sqlite3_vfs *vfs, double *ret)
{
    return fault_vfs_orig->xCurrentTime(fault_vfs_orig, ret);
}

static int fv_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    return fault_vfs_orig->xGetLastError(fault_vfs_orig, n, out);
}

static int fv_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *ret)
{
    return fault_vfs_orig->xCurrentTimeInt64(fault_vfs_orig, ret);
}

static sqlite3_vfs fault_vfs = {
    .iVersion = 2,
    .mxPathname = 512,
    .zName = "faulty",
    .xOpen = fv_open,
    .xDelete = fv_delete,
    .xAccess = fv_access,
    .xFullPathname = fv_full_pathname,
    .xRandomness = fv_randomness,
    .xSleep = fv_sleep,
    .xCurrentTime = fv_current_time,
    .xGetLastError = fv_last_error,
    .xCurrentTimeInt64 = fv_current_time64,
};

/* Put both hooks in place; 0, or -1 when SQLite was already initialised. */
static inline int fault_install(void)
{
    if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &fault_mem_orig) != SQLITE_OK)
        return -1;
    static const sqlite3_mem_methods mem = {
        .xMalloc = fault_malloc,
        .xFree = fault_free,
        .xRealloc = fault_realloc,
        .xSize = fault_size,
        .xRoundup = fault_roundup,
        .xInit = fault_mem_init,
        .xShutdown = fault_mem_shutdown,
    };
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &mem) != SQLITE_OK ||
        sqlite3_initialize() != SQLITE_OK)
        return -1;
    fault_vfs_orig = sqlite3_vfs_find("unix");
    if (!fault_vfs_orig)
        return -1;
    fault_vfs.szOsFile = (int)sizeof(FaultFile) + fault_vfs_orig->szOsFile;
    fault_vfs.mxPathname = fault_vfs_orig->mxPathname;
    return sqlite3_vfs_register(&fault_vfs, 1) == SQLITE_OK ? 0 : -1;
}

/* The step between the N tried: 1 (every N) when GPUORCH_FAULT_STRIDE=1, the full run;
 * otherwise def, so that `make test` samples the range in seconds. */
static inline int64_t fault_stride(int64_t def)
{
    const char *e = getenv("GPUORCH_FAULT_STRIDE");
    long long v = e ? atoll(e) : 0;
    return v > 0 ? v : def;
}

/* A scratch directory on tmpfs when there is one: each N opens a new database, and a
 * real fsync per commit would make the loop minutes long. */
static inline void fault_tmpdir(char *dir, size_t n, const char *what)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, n, "%s/gpuorch-%s-XXXXXX", base, what);
}
