/* test_http_auth.c: API tokens and role rules (server/auth.c): the token's shape and
 * randomness, its hash (stable, and what the store is asked for), resolution of
 * "Authorization: Bearer" headers against a real SQLite store (uncached and cached),
 * the first admin token in admin.token (mode 0600, once, never over a file, taken up
 * after a start killed before the store had it), expiry and revocation (the cache
 * forgets a revoked token), and the table of what each role may do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/auth.h"
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool base64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static void test_token_shape(void **state)
{
    char a[AUTH_TOKEN_SIZE], b[AUTH_TOKEN_SIZE];
    uint8_t ha[STORE_TOKEN_HASH_LEN], hb[STORE_TOKEN_HASH_LEN], again[STORE_TOKEN_HASH_LEN];
    assert_int_equal(auth_token_new(a, ha), 0);
    assert_int_equal(auth_token_new(b, hb), 0);
    /* "gpo_" + 43 characters: 32 bytes in base64url without padding */
    assert_int_equal(strlen(a), 4 + 43);
    assert_memory_equal(a, "gpo_", 4);
    for (size_t i = 4; a[i]; i++)
        assert_true(base64url(a[i]));
    assert_string_not_equal(a, b);
    assert_memory_not_equal(ha, hb, sizeof(ha));
    /* the hash the store keeps is a function of the token alone */
    auth_token_hash(a, again);
    assert_memory_equal(ha, again, sizeof(ha));
    auth_token_hash(a, again);
    assert_memory_equal(ha, again, sizeof(ha));
    /* and not the token itself, nor its prefix */
    assert_memory_not_equal(ha, a, sizeof(ha));
}

static void test_tokens_distinct(void **state)
{
    /* 256 random bits each: a repeat among a thousand would mean no randomness */
    enum { N = 1000 };
    char(*t)[AUTH_TOKEN_SIZE] = calloc(N, sizeof(*t));
    uint8_t h[STORE_TOKEN_HASH_LEN];
    assert_non_null(t);
    for (int i = 0; i < N; i++)
        assert_int_equal(auth_token_new(t[i], h), 0);
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            assert_string_not_equal(t[i], t[j]);
    free(t);
}

static void test_role_names(void **state)
{
    for (int r = 0; r < ROLE_COUNT; r++)
        assert_int_equal(role_from_name(role_name((Role)r)), r);
    assert_string_equal(role_name(ROLE_LEAD), "lead");
    assert_int_equal(role_from_name("Admin"), -1);
    assert_int_equal(role_from_name("root"), -1);
    assert_int_equal(role_from_name(""), -1);
    assert_int_equal(role_from_name(NULL), -1);
}

static void test_role_table(void **state)
{
    /* docs/api.md, Roles: rows are roles, columns actions:
     * public read submit cancel priority admin agent */
    static const bool may[ROLE_COUNT][ACT_COUNT] = {
        [ROLE_ADMIN] = {1, 1, 1, 1, 1, 1, 0},  [ROLE_LEAD] = {1, 1, 1, 1, 1, 0, 0},
        [ROLE_MEMBER] = {1, 1, 1, 1, 0, 0, 0}, [ROLE_VIEWER] = {1, 1, 0, 0, 0, 0, 0},
        [ROLE_AGENT] = {1, 0, 0, 0, 0, 0, 1},
    };
    assert_int_equal(ACT_COUNT, 7);
    for (int r = 0; r < ROLE_COUNT; r++)
        for (int a = 0; a < ACT_COUNT; a++) {
            if (auth_may((Role)r, (AuthAction)a) != may[r][a])
                fail_msg("role %s, action %d: expected %s", role_name((Role)r), a,
                         may[r][a] ? "allowed" : "refused");
        }
    assert_false(auth_may(ROLE_COUNT, ACT_READ));
}

/* A server as far as auth.c looks at it: a store and a data directory. */
typedef struct Fixture {
    char dir[64];
    Server s;
} Fixture;

static int setup(void **state)
{
    Fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/gpuorch-auth-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    char url[128];
    snprintf(url, sizeof(url), "sqlite:%s/db", f->dir);
    Buf err = {0};
    if (store_open(url, &f->s.store, &err) < 0) {
        fprintf(stderr, "store_open: %s\n", buf_str(&err));
        buf_free(&err);
        return -1;
    }
    f->s.opt.data_dir = f->dir;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    store_close(f->s.store);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void header(char *out, size_t n, const char *token)
{
    snprintf(out, n, "Bearer %s", token);
}

static void test_resolve(void **state)
{
    Fixture *f = *state;
    char tok[AUTH_TOKEN_SIZE], other[AUTH_TOKEN_SIZE], h[128];
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    int64_t id;
    Buf err = {0};
    AuthTokenSpec member = {
        .role = ROLE_MEMBER, .team = "search", .name = "ci", .user = "alice", .expires_ms = -1};
    assert_int_equal(auth_token_create(f->s.store, &member, 1000, tok, &id, &err), 0);
    assert_true(id > 0);
    assert_int_equal(auth_token_new(other, hash), 0); /* never stored */

    Caller c;
    header(h, sizeof(h), tok);
    assert_int_equal(auth_resolve(&f->s, h, &c), 0);
    assert_int_equal(c.role, ROLE_MEMBER);
    assert_string_equal(c.team, "search");
    assert_string_equal(c.user, "alice");
    assert_int_equal(c.token_id, id);
    /* the scheme is case-insensitive; spaces around the token are tolerated */
    snprintf(h, sizeof(h), "bearer   %s ", tok);
    assert_int_equal(auth_resolve(&f->s, h, &c), 0);

    header(h, sizeof(h), other);
    assert_int_equal(auth_resolve(&f->s, h, &c), -EACCES);
    assert_int_equal(auth_resolve(&f->s, NULL, &c), -EACCES);
    assert_int_equal(auth_resolve(&f->s, "", &c), -EACCES);
    assert_int_equal(auth_resolve(&f->s, tok, &c), -EACCES); /* no scheme */
    snprintf(h, sizeof(h), "Basic %s", tok);
    assert_int_equal(auth_resolve(&f->s, h, &c), -EACCES);
    snprintf(h, sizeof(h), "Bearer %s", tok + 4); /* without the prefix */
    assert_int_equal(auth_resolve(&f->s, h, &c), -EACCES);
    snprintf(h, sizeof(h), "Bearer %.46s", tok); /* one character short */
    assert_int_equal(auth_resolve(&f->s, h, &c), -EACCES);
    snprintf(h, sizeof(h), "Bearer %sA", tok); /* one too many */
    assert_int_equal(auth_resolve(&f->s, h, &c), -EACCES);
    snprintf(h, sizeof(h), "Bearer %s x", tok); /* something after it */
    assert_int_equal(auth_resolve(&f->s, h, &c), -EACCES);

    /* the cache answers the same, the first time and from memory */
    AuthCache *cache = auth_cache_new();
    assert_non_null(cache);
    for (int round = 0; round < 3; round++) {
        Caller cc = {0};
        header(h, sizeof(h), tok);
        assert_int_equal(auth_cache_resolve(cache, &f->s, h, &cc), 0);
        assert_int_equal(cc.role, ROLE_MEMBER);
        assert_string_equal(cc.team, "search");
        assert_int_equal(cc.token_id, id);
        header(h, sizeof(h), other);
        assert_int_equal(auth_cache_resolve(cache, &f->s, h, &cc), -EACCES);
    }
    /* a token created after the cache saw misses resolves too */
    char later[AUTH_TOKEN_SIZE];
    int64_t later_id;
    AuthTokenSpec agent = {.role = ROLE_AGENT, .node = "h100-0", .name = "node", .expires_ms = -1};
    assert_int_equal(auth_token_create(f->s.store, &agent, 2000, later, &later_id, &err), 0);
    header(h, sizeof(h), later);
    assert_int_equal(auth_cache_resolve(cache, &f->s, h, &c), 0);
    assert_int_equal(c.role, ROLE_AGENT);
    assert_string_equal(c.team, "");
    assert_string_equal(c.node, "h100-0");
    assert_int_not_equal(later_id, id);
    auth_cache_free(cache);
    buf_free(&err);
}

static void test_bootstrap(void **state)
{
    Fixture *f = *state;
    char *path = NULL;
    Buf err = {0};
    bool adopted = true;
    assert_int_equal(auth_bootstrap(&f->s, &path, &adopted, &err), 0);
    assert_non_null(path);
    assert_false(adopted);
    char want[128];
    snprintf(want, sizeof(want), "%s/admin.token", f->dir);
    assert_string_equal(path, want);

    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text;
    size_t len;
    assert_int_equal(file_read_all(path, &text, &len), 0);
    assert_int_equal(len, 4 + 43 + 1);
    assert_int_equal(text[len - 1], '\n');
    text[len - 1] = '\0';
    char h[128];
    header(h, sizeof(h), text);
    Caller c;
    assert_int_equal(auth_resolve(&f->s, h, &c), 0);
    assert_int_equal(c.role, ROLE_ADMIN);
    assert_string_equal(c.user, "admin");
    free(text);
    /* no temporary file is left */
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);

    /* tokens exist now: nothing more is written */
    char *again = (char *)1;
    assert_int_equal(auth_bootstrap(&f->s, &again, &adopted, &err), 0);
    assert_null(again);
    int64_t n;
    assert_int_equal(store_token_count(f->s.store, &n), 0);
    assert_int_equal(n, 1);
    free(path);
    buf_free(&err);
}

static void test_bootstrap_never_overwrites(void **state)
{
    Fixture *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/admin.token", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "old\n", 4), 4);
    close(fd);

    char *ret = (char *)1;
    bool adopted;
    Buf err = {0};
    assert_int_equal(auth_bootstrap(&f->s, &ret, &adopted, &err), -EEXIST);
    assert_ptr_equal(ret, (char *)1); /* untouched on failure */
    assert_non_null(strstr(buf_str(&err), "admin.token exists"));
    assert_non_null(strstr(buf_str(&err), "does not hold one gpuorch token"));
    /* the old file is left as it was, and no token went into the store */
    char *text;
    size_t len;
    assert_int_equal(file_read_all(path, &text, &len), 0);
    assert_string_equal(text, "old\n");
    free(text);
    int64_t n;
    assert_int_equal(store_token_count(f->s.store, &n), 0);
    assert_int_equal(n, 0);
    buf_free(&err);
}

/* A first start killed after the file was in place but before the store had the hash:
 * the next start takes the file up, and only a file that is safely ours. */
static void test_bootstrap_takes_up_file(void **state)
{
    Fixture *f = *state;
    char path[128], tok[AUTH_TOKEN_SIZE], line[AUTH_TOKEN_SIZE + 1], h[128];
    uint8_t hash[STORE_TOKEN_HASH_LEN];
    snprintf(path, sizeof(path), "%s/admin.token", f->dir);
    assert_int_equal(auth_token_new(tok, hash), 0);
    snprintf(line, sizeof(line), "%s\n", tok);

    /* readable by others: refused, left alone */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, 0644), 0);
    assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    close(fd);
    char *ret = NULL;
    bool adopted = false;
    Buf err = {0};
    assert_int_equal(auth_bootstrap(&f->s, &ret, &adopted, &err), -EEXIST);
    assert_non_null(strstr(buf_str(&err), "mode is not 0600"));
    buf_free(&err);

    /* a stale temporary file of a start killed before its rename does not matter */
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "gpo_", 4), 4);
    close(fd);

    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(auth_bootstrap(&f->s, &ret, &adopted, &err), 0);
    assert_true(adopted);
    assert_non_null(ret);
    header(h, sizeof(h), tok);
    Caller c;
    assert_int_equal(auth_resolve(&f->s, h, &c), 0);
    assert_int_equal(c.role, ROLE_ADMIN);
    assert_string_equal(c.user, "admin");
    free(ret);
    buf_free(&err);
}

/* Expiry and revocation: refused by the store's answer and by the cache at once. */
static void test_expiry_and_revocation(void **state)
{
    Fixture *f = *state;
    char tok[AUTH_TOKEN_SIZE], past[AUTH_TOKEN_SIZE], h[128];
    int64_t id, past_id;
    Buf err = {0};
    int64_t now = server_now_ms();
    AuthTokenSpec live = {.role = ROLE_VIEWER, .user = "bob", .expires_ms = now + 3600 * 1000};
    AuthTokenSpec old = {.role = ROLE_VIEWER, .user = "bob", .expires_ms = now - 1};
    assert_int_equal(auth_token_create(f->s.store, &live, now, tok, &id, &err), 0);
    assert_int_equal(auth_token_create(f->s.store, &old, now - 10, past, &past_id, &err), 0);
    Caller c;
    header(h, sizeof(h), past);
    assert_int_equal(auth_resolve(&f->s, h, &c), -EKEYEXPIRED);
    assert_non_null(strstr(auth_refusal(-EKEYEXPIRED, h), "expired"));

    AuthCache *cache = auth_cache_new();
    assert_non_null(cache);
    assert_int_equal(auth_cache_resolve(cache, &f->s, h, &c), -EKEYEXPIRED);
    header(h, sizeof(h), tok);
    assert_int_equal(auth_cache_last_used(cache, id), -1);
    assert_int_equal(auth_cache_resolve(cache, &f->s, h, &c), 0); /* now cached */
    assert_true(auth_cache_last_used(cache, id) >= now);
    assert_int_equal(store_token_revoke(f->s.store, id, server_now_ms()), 0);
    /* the cache still holds it until it is told: revocation tells it */
    assert_int_equal(auth_cache_resolve(cache, &f->s, h, &c), 0);
    auth_cache_forget(cache, id);
    assert_int_equal(auth_cache_resolve(cache, &f->s, h, &c), -EKEYREVOKED);
    assert_int_equal(auth_cache_resolve(cache, &f->s, h, &c), -EKEYREVOKED);
    assert_int_equal(auth_resolve(&f->s, h, &c), -EKEYREVOKED);
    assert_non_null(strstr(auth_refusal(-EKEYREVOKED, h), "revoked"));
    auth_cache_free(cache);
    buf_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_shape),
        cmocka_unit_test(test_tokens_distinct),
        cmocka_unit_test(test_role_names),
        cmocka_unit_test(test_role_table),
        cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bootstrap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bootstrap_never_overwrites, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bootstrap_takes_up_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_and_revocation, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
