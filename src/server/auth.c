/* auth.c: API tokens (creation, hashing, resolution with a cache), the first admin
 * token, role names and the role rules of docs/api.md.
 *
 * A token carries 256 random bits, so it cannot be guessed or brute-forced from its
 * hash: a fast hash (BLAKE2b, crypto_generichash) is enough and keeps resolving a
 * token cheap; a slow password KDF would only protect low-entropy secrets. */
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

int auth_token_create(Store *store, Role role, const char *team, const char *node, const char *name,
                      int64_t now_ms, char ret_token[AUTH_TOKEN_SIZE], int64_t *ret_id, Buf *err)
{
    char token[AUTH_TOKEN_SIZE];
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    int r = auth_token_new(token, hash);
    if (r < 0) {
        buf_printf(err, "cannot draw random bytes for a token");
        return r;
    }
    int64_t id;
    r = store_token_insert(store, hash, role_name(role), team, node, name, now_ms, &id);
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

static int resolve_hash(Server *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], Caller *ret)
{
    StoreToken tok;
    int r = store_token_find(s->store, hash, &tok);
    if (r < 0)
        return -EIO;
    if (r == 0)
        return -EACCES;
    int role = role_from_name(tok.role);
    if (role < 0)
        return -EACCES;
    Caller c = {.token_id = tok.id, .role = (Role)role};
    snprintf(c.team, sizeof(c.team), "%s", tok.team);
    snprintf(c.node, sizeof(c.node), "%s", tok.node);
    *ret = c;
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
    return resolve_hash(s, hash, ret);
}

/* Open addressing over the hash's first bytes (uniform: it is a cryptographic hash). */
#define CACHE_SLOTS 4096
#define CACHE_PROBE 8

typedef struct CacheSlot {
    bool used;
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    Caller who;
} CacheSlot;

struct AuthCache {
    pthread_rwlock_t lock;
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

    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = 0; i < CACHE_PROBE; i++) {
        const CacheSlot *sl = &c->slot[(home + i) % CACHE_SLOTS];
        if (!sl->used)
            break;
        if (!memcmp(sl->hash, hash, sizeof(hash))) {
            *ret = sl->who;
            pthread_rwlock_unlock(&c->lock);
            return 0;
        }
    }
    pthread_rwlock_unlock(&c->lock);

    Caller who;
    int r = resolve_hash(s, hash, &who);
    if (r < 0)
        return r; /* unknown tokens are not cached: they would let anyone fill it */

    pthread_rwlock_wrlock(&c->lock);
    for (size_t i = 0; i < CACHE_PROBE; i++) {
        CacheSlot *sl = &c->slot[(home + i) % CACHE_SLOTS];
        if (sl->used && memcmp(sl->hash, hash, sizeof(hash)))
            continue;
        sl->used = true;
        memcpy(sl->hash, hash, sizeof(hash));
        sl->who = who;
        break;
    }
    pthread_rwlock_unlock(&c->lock);
    *ret = who;
    return 0;
}

static int write_token_file(const char *path, const char *token, Buf *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        if (e == EEXIST)
            buf_printf(err,
                       "%s exists but the database has no token: move it away to have a new "
                       "admin token written",
                       path);
        else
            buf_printf(err, "cannot create %s: %s", path, strerror(e));
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
    if (e) {
        unlink(path);
        buf_printf(err, "cannot write %s: %s", path, strerror(e));
        return -e;
    }
    return 0;
}

int auth_bootstrap(Server *s, char **ret_path, Buf *err)
{
    int64_t n;
    int r = store_token_count(s->store, &n);
    if (r < 0) {
        buf_printf(err, "cannot count the tokens in the store: %s", strerror(-r));
        return r;
    }
    if (n > 0) {
        *ret_path = NULL;
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
    r = auth_token_new(token, hash);
    if (r < 0) {
        buf_printf(err, "cannot draw random bytes for a token");
        return r;
    }
    /* The file first: a token in the store that nobody can read would lock everyone
     * out, since the next start sees tokens and writes no file. */
    r = write_token_file(path, token, err);
    sodium_memzero(token, sizeof(token));
    if (r < 0)
        return r;
    int64_t id;
    r = store_token_insert(s->store, hash, "admin", NULL, NULL, "admin.token", server_now_ms(),
                           &id);
    if (r < 0) {
        unlink(path);
        buf_printf(err, "cannot store the admin token: %s", strerror(-r));
        return r;
    }
    *ret_path = TAKE_PTR(path);
    return 0;
}
