/* auth.c: API tokens (creation, hashing, resolution with a cache), the first admin
 * token, role names and the role rules of docs/api.md.
 *
 * A token carries 256 random bits, so it cannot be guessed or brute-forced from its
 * hash: a fast hash (BLAKE2b, crypto_generichash) is enough and keeps resolving a
 * token cheap; a slow password KDF would only protect low-entropy secrets. A token
 * stops working when revoked (at once: the cache forgets it) or when it expires. */
#include "server/auth.h"

#include "util/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const role_names[ROLE_COUNT] = {
    [ROLE_ADMIN] = "admin",   [ROLE_LEAD] = "lead",   [ROLE_MEMBER] = "member",
    [ROLE_VIEWER] = "viewer", [ROLE_AGENT] = "agent",
};

const char *role_name(Role r)
{
    return (unsigned)r < ROLE_COUNT ? role_names[r] : "?";
}

int role_from_name(const char *s)
{
    for (int i = 0; s && i < ROLE_COUNT; i++)
        if (!strcmp(s, role_names[i]))
            return i;
    return -1;
}

bool auth_may(Role r, AuthAction a)
{
    switch (a) {
    case ACT_PUBLIC:
        return true;
    case ACT_AGENT:
        return r == ROLE_AGENT;
    case ACT_READ:
        return r != ROLE_AGENT && r < ROLE_COUNT;
    case ACT_SUBMIT:
    case ACT_CANCEL:
        return r == ROLE_ADMIN || r == ROLE_LEAD || r == ROLE_MEMBER;
    case ACT_PRIORITY:
        return r == ROLE_ADMIN || r == ROLE_LEAD;
    case ACT_ADMIN:
        return r == ROLE_ADMIN;
    case ACT_COUNT:
        break;
    }
    return false;
}

int auth_token_new(char ret_token[AUTH_TOKEN_SIZE], uint8_t ret_hash[STORE_TOKEN_HASH_LEN])
{
    if (sodium_init() < 0)
        return -EIO;
    uint8_t raw[AUTH_TOKEN_BYTES];
    randombytes_buf(raw, sizeof(raw));
    char token[AUTH_TOKEN_SIZE];
    memcpy(token, AUTH_TOKEN_PREFIX, strlen(AUTH_TOKEN_PREFIX));
    sodium_bin2base64(token + strlen(AUTH_TOKEN_PREFIX), sizeof(token) - strlen(AUTH_TOKEN_PREFIX),
                      raw, sizeof(raw), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(raw, sizeof(raw));
    auth_token_hash(token, ret_hash);
    memcpy(ret_token, token, sizeof(token));
    sodium_memzero(token, sizeof(token));
    return 0;
}

void auth_token_hash(const char *token, uint8_t ret_hash[STORE_TOKEN_HASH_LEN])
{
    crypto_generichash(ret_hash, STORE_TOKEN_HASH_LEN, (const unsigned char *)token, strlen(token),
                       NULL, 0);
}

int auth_token_create(Store *store, const AuthTokenSpec *spec, int64_t now_ms,
                      char ret_token[AUTH_TOKEN_SIZE], int64_t *ret_id, Buf *err)
{
    StoreToken t = {.created_ms = now_ms, .expires_ms = spec->expires_ms, .revoked_ms = -1};
    snprintf(t.role, sizeof(t.role), "%s", role_name(spec->role));
    _Static_assert(sizeof(t.team) == sizeof(t.node) && sizeof(t.node) == sizeof(t.name) &&
                       sizeof(t.name) == sizeof(t.user),
                   "the fields below are copied with one size");
    const char *fields[] = {spec->team, spec->node, spec->name, spec->user};
    char *dst[] = {t.team, t.node, t.name, t.user};
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
        if (fields[i] && strlen(fields[i]) >= sizeof(t.team)) {
            buf_printf(err, "'%s' is over %zu characters", fields[i], sizeof(t.team) - 1);
            return -EINVAL;
        }
        snprintf(dst[i], sizeof(t.team), "%s", fields[i] ? fields[i] : "");
    }
    char token[AUTH_TOKEN_SIZE];
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    int r = auth_token_new(token, hash);
    if (r < 0) {
        buf_printf(err, "cannot draw random bytes for a token");
        return r;
    }
    int64_t id;
    r = store_token_insert(store, hash, &t, &id);
    if (r < 0) {
        sodium_memzero(token, sizeof(token));
        buf_printf(err, "cannot store the token: %s", strerror(-r));
        return r;
    }
    memcpy(ret_token, token, sizeof(token));
    sodium_memzero(token, sizeof(token));
    *ret_id = id;
    return 0;
}

/* The token of "Bearer TOKEN" when it has a token's shape, else NULL: malformed
 * headers are refused without a store round trip. */
static const char *bearer_token(const char *authorization)
{
    if (!authorization)
        return NULL;
    while (*authorization == ' ')
        authorization++;
    if (strncasecmp(authorization, "Bearer ", 7))
        return NULL;
    const char *t = authorization + 7;
    while (*t == ' ')
        t++;
    size_t prefix = strlen(AUTH_TOKEN_PREFIX);
    if (strncmp(t, AUTH_TOKEN_PREFIX, prefix))
        return NULL;
    size_t n = 0;
    for (const char *p = t + prefix; *p && *p != ' '; p++, n++) {
        char ch = *p;
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
        if (!ok)
            return NULL;
    }
    if (n != AUTH_TOKEN_SIZE - 1 - prefix)
        return NULL;
    for (const char *p = t + prefix + n; *p; p++)
        if (*p != ' ')
            return NULL;
    return t;
}

/* A token row as a caller, or why it may not act: revoked, expired (at now_ms), or a
 * role this build does not know. *ret_expires_ms is when it stops working (-1 never). */
static int resolve_hash(Server *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], int64_t now_ms,
                        Caller *ret, int64_t *ret_expires_ms)
{
    StoreToken tok;
    int r = store_token_find(s->store, hash, &tok);
    if (r < 0)
        return -EIO;
    if (r == 0)
        return -EACCES;
    if (tok.revoked_ms >= 0)
        return -EKEYREVOKED;
    if (tok.expires_ms >= 0 && now_ms >= tok.expires_ms)
        return -EKEYEXPIRED;
    int role = role_from_name(tok.role);
    if (role < 0)
        return -EACCES;
    Caller c = {.token_id = tok.id, .role = (Role)role};
    snprintf(c.team, sizeof(c.team), "%s", tok.team);
    snprintf(c.node, sizeof(c.node), "%s", tok.node);
    snprintf(c.user, sizeof(c.user), "%s", tok.user);
    *ret = c;
    *ret_expires_ms = tok.expires_ms;
    return 0;
}

/* Copy the token (at most AUTH_TOKEN_SIZE - 1 characters, the shape was checked) and
 * hash it. */
static void hash_bearer(const char *t, uint8_t ret_hash[STORE_TOKEN_HASH_LEN])
{
    char token[AUTH_TOKEN_SIZE];
    memcpy(token, t, AUTH_TOKEN_SIZE - 1);
    token[AUTH_TOKEN_SIZE - 1] = '\0';
    auth_token_hash(token, ret_hash);
    sodium_memzero(token, sizeof(token));
}

int auth_resolve(Server *s, const char *authorization, Caller *ret)
{
    const char *t = bearer_token(authorization);
    if (!t)
        return -EACCES;
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    hash_bearer(t, hash);
    int64_t expires_ms;
    return resolve_hash(s, hash, server_now_ms(), ret, &expires_ms);
}

const char *auth_refusal(int r, const char *authorization)
{
    switch (r) {
    case -EKEYREVOKED:
        return "the token was revoked";
    case -EKEYEXPIRED:
        return "the token has expired: ask an admin for a new one";
    default:
        return authorization ? "the token is not known to this server"
                             : "no token: send 'Authorization: Bearer TOKEN'";
    }
}

/* Open addressing over the hash's first bytes (uniform: it is a cryptographic hash). */
#define CACHE_SLOTS 4096
#define CACHE_PROBE 8

typedef struct CacheSlot {
    bool used;
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    Caller who;
    int64_t expires_ms;   /* -1 never */
    int64_t last_used_ms; /* written with atomics under the read lock */
} CacheSlot;

struct AuthCache {
    pthread_rwlock_t lock;
    /* bumped by every forget: a resolution that began before it is not cached, since
     * the store may have answered before the revocation was written */
    uint64_t generation;
    CacheSlot slot[CACHE_SLOTS];
};

AuthCache *auth_cache_new(void)
{
    AuthCache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (pthread_rwlock_init(&c->lock, NULL)) {
        free(c);
        return NULL;
    }
    return c;
}

void auth_cache_free(AuthCache *c)
{
    if (!c)
        return;
    pthread_rwlock_destroy(&c->lock);
    sodium_memzero(c->slot, sizeof(c->slot));
    free(c);
}

static size_t cache_home(const uint8_t hash[STORE_TOKEN_HASH_LEN])
{
    size_t h;
    memcpy(&h, hash, sizeof(h));
    return h % CACHE_SLOTS;
}

int auth_cache_resolve(AuthCache *c, Server *s, const char *authorization, Caller *ret)
{
    const char *t = bearer_token(authorization);
    if (!t)
        return -EACCES;
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    hash_bearer(t, hash);
    size_t home = cache_home(hash);
    int64_t now = server_now_ms();

    pthread_rwlock_rdlock(&c->lock);
    uint64_t generation = c->generation;
    for (size_t i = 0; i < CACHE_PROBE; i++) {
        CacheSlot *sl = &c->slot[(home + i) % CACHE_SLOTS];
        if (!sl->used)
            break;
        if (!memcmp(sl->hash, hash, sizeof(hash))) {
            int r = 0;
            if (sl->expires_ms >= 0 && now >= sl->expires_ms) {
                r = -EKEYEXPIRED;
            } else {
                *ret = sl->who;
                __atomic_store_n(&sl->last_used_ms, now, __ATOMIC_RELAXED);
            }
            pthread_rwlock_unlock(&c->lock);
            return r;
        }
    }
    pthread_rwlock_unlock(&c->lock);

    Caller who;
    int64_t expires_ms;
    int r = resolve_hash(s, hash, now, &who, &expires_ms);
    if (r < 0)
        return r; /* unknown tokens are not cached: they would let anyone fill it */

    pthread_rwlock_wrlock(&c->lock);
    for (size_t i = 0; c->generation == generation && i < CACHE_PROBE; i++) {
        CacheSlot *sl = &c->slot[(home + i) % CACHE_SLOTS];
        if (sl->used && memcmp(sl->hash, hash, sizeof(hash)))
            continue;
        *sl = (CacheSlot){.used = true, .who = who, .expires_ms = expires_ms, .last_used_ms = now};
        memcpy(sl->hash, hash, sizeof(hash));
        break;
    }
    pthread_rwlock_unlock(&c->lock);
    *ret = who;
    return 0;
}

/* A forgotten slot leaves a hole in the probe sequences through it: a token further
 * along is then a miss, asks the store and is cached again in the hole (a duplicate
 * at worst, which forget also clears, as it matches by token id). */
void auth_cache_forget(AuthCache *c, int64_t token_id)
{
    if (!c)
        return;
    pthread_rwlock_wrlock(&c->lock);
    c->generation++;
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        if (c->slot[i].used && c->slot[i].who.token_id == token_id)
            sodium_memzero(&c->slot[i], sizeof(c->slot[i]));
    pthread_rwlock_unlock(&c->lock);
}

int64_t auth_cache_last_used(AuthCache *c, int64_t token_id)
{
    int64_t last = -1;
    if (!c)
        return last;
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        const CacheSlot *sl = &c->slot[i];
        if (sl->used && sl->who.token_id == token_id) {
            int64_t t = __atomic_load_n(&sl->last_used_ms, __ATOMIC_RELAXED);
            last = MAX(last, t);
        }
    }
    pthread_rwlock_unlock(&c->lock);
    return last;
}

/* Sync a directory, so that a rename in it outlives a crash. */
static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* Write token to path whole or not at all: a temporary file (created afresh with
 * O_EXCL, so no link planted there is followed), synced, then linked to path (unlike
 * rename, link never replaces a path that exists) and unlinked, the directory synced. */
static int write_token_file(const char *dir, const char *path, const char *token, Buf *err)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", path) < 0) {
        tmp = NULL;
        return -ENOMEM;
    }
    unlink(tmp); /* a temporary file of a start killed before it was renamed */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int e = errno;
        buf_printf(err, "cannot create %s: %s", tmp, strerror(e));
        return -e;
    }
    char line[AUTH_TOKEN_SIZE + 1];
    int n = snprintf(line, sizeof(line), "%s\n", token);
    ssize_t w = write(fd, line, (size_t)n);
    int e = w == n ? 0 : (w < 0 ? errno : EIO);
    if (!e && fsync(fd) < 0)
        e = errno;
    sodium_memzero(line, sizeof(line));
    if (close(fd) < 0 && !e)
        e = errno;
    if (!e && link(tmp, path) < 0)
        e = errno;
    unlink(tmp);
    if (e) {
        if (e == EEXIST)
            buf_printf(err, "%s appeared while the first admin token was made: start again", path);
        else
            buf_printf(err, "cannot write %s: %s", path, strerror(e));
        return -e;
    }
    int r = sync_dir(dir);
    if (r < 0) {
        unlink(path);
        buf_printf(err, "cannot sync %s: %s", dir, strerror(-r));
        return r;
    }
    return 0;
}

/* The token in an existing admin.token, when it may be taken up: a regular file (not
 * a link) of this user, readable by it alone, holding one well-formed token. 0 with
 * ret_token filled, or a negative errno with err saying what is wrong with the file. */
static int read_token_file(const char *path, char ret_token[AUTH_TOKEN_SIZE], Buf *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        buf_printf(err, "%s exists but cannot be read (%s) and the database has no token", path,
                   strerror(e));
        return -e;
    }
    struct stat sb;
    char buf[AUTH_TOKEN_SIZE + 2];
    ssize_t n = -1;
    const char *why = NULL;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        why = "it is not a regular file";
    else if (sb.st_uid != geteuid())
        why = "another user owns it";
    else if (sb.st_mode & 077)
        why = "others may read it (mode is not 0600)";
    else if ((n = read(fd, buf, sizeof(buf) - 1)) < 0)
        why = "it cannot be read";
    close(fd);
    if (!why) {
        buf[n] = '\0';
        if (n > 0 && buf[n - 1] == '\n')
            buf[--n] = '\0';
        char header[AUTH_TOKEN_SIZE + 16];
        snprintf(header, sizeof(header), "Bearer %s", buf);
        if (!bearer_token(header))
            why = "it does not hold one gpuorch token";
        sodium_memzero(header, sizeof(header));
    }
    if (why) {
        sodium_memzero(buf, sizeof(buf));
        buf_printf(err,
                   "%s exists but the database has no token, and the file cannot be taken up: "
                   "%s; move it away to have a new admin token written",
                   path, why);
        return -EEXIST;
    }
    memcpy(ret_token, buf, AUTH_TOKEN_SIZE);
    sodium_memzero(buf, sizeof(buf));
    return 0;
}

int auth_bootstrap(Server *s, char **ret_path, bool *ret_adopted, Buf *err)
{
    int64_t n;
    int r = store_token_count(s->store, &n);
    if (r < 0) {
        buf_printf(err, "cannot count the tokens in the store: %s", strerror(-r));
        return r;
    }
    if (n > 0) {
        *ret_path = NULL;
        *ret_adopted = false;
        return 0;
    }
    const char *dir = s->opt.data_dir && *s->opt.data_dir ? s->opt.data_dir : ".";
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/admin.token", dir) < 0) {
        path = NULL;
        return -ENOMEM;
    }
    char token[AUTH_TOKEN_SIZE];
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    bool adopted = access(path, F_OK) == 0;
    if (adopted) {
        /* an earlier first start wrote the file and was stopped before the store had
         * the hash: the file is the one an operator may already have copied */
        if ((r = read_token_file(path, token, err)) < 0)
            return r;
        auth_token_hash(token, hash);
        /* and was stopped between linking the file and unlinking its temporary one */
        _cleanup_free_ char *tmp = NULL;
        if (asprintf(&tmp, "%s.tmp", path) < 0)
            tmp = NULL;
        else
            unlink(tmp);
    } else {
        if ((r = auth_token_new(token, hash)) < 0) {
            buf_printf(err, "cannot draw random bytes for a token");
            return r;
        }
        /* The file first: a token in the store that nobody can read would lock
         * everyone out, since the next start sees tokens and writes no file. */
        r = write_token_file(dir, path, token, err);
    }
    sodium_memzero(token, sizeof(token));
    if (r < 0)
        return r;
    StoreToken t = {.created_ms = server_now_ms(), .expires_ms = -1, .revoked_ms = -1};
    snprintf(t.role, sizeof(t.role), "%s", role_name(ROLE_ADMIN));
    snprintf(t.name, sizeof(t.name), "admin.token");
    snprintf(t.user, sizeof(t.user), "%s", AUTH_ADMIN_USER);
    int64_t id;
    r = store_token_insert(s->store, hash, &t, &id);
    if (r < 0) {
        /* the file stays: the next start takes it up */
        buf_printf(err, "cannot store the admin token: %s", strerror(-r));
        return r;
    }
    *ret_path = TAKE_PTR(path);
    *ret_adopted = adopted;
    return 0;
}
