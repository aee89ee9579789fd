/* auth.h: API tokens and what each role may do. A token is "gpo_" and 32 random bytes
 * in base64url; the store keeps only its hash, so a leaked database leaks no token.
 * A request's bearer token resolves to a Caller; the route table checks the caller's
 * role against the route's action (auth_may); which team's jobs a lead or member may
 * touch, and who may make a job production, the server's model checks with the job at
 * hand (state.c). */
#pragma once

#include "server/state.h"
#include "store/store.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>

#define AUTH_TOKEN_PREFIX "gpo_"
#define AUTH_TOKEN_BYTES  32
/* "gpo_" + 43 base64url characters (32 bytes, no padding) + NUL */
#define AUTH_TOKEN_SIZE 48
/* The first admin token's user. */
#define AUTH_ADMIN_USER "admin"

/* What a request does, for the role checks (docs/api.md, Roles). */
typedef enum AuthAction {
    ACT_PUBLIC,   /* /healthz, /metrics: no token */
    ACT_READ,     /* GET jobs, nodes, teams, usage, logs */
    ACT_SUBMIT,   /* POST /jobs (for the caller's team) */
    ACT_CANCEL,   /* DELETE a job (of the caller's team) */
    ACT_PRIORITY, /* PATCH a job's priority (of the lead's team) */
    ACT_ADMIN,    /* teams' quotas, tokens */
    ACT_AGENT,    /* /api/v1/agent/... */
    ACT_COUNT
} AuthAction;

/* May a token of role r do a at all? */
bool auth_may(Role r, AuthAction a);

/* A new random token and its hash. 0, or -EIO when the system has no randomness. */
int auth_token_new(char ret_token[AUTH_TOKEN_SIZE], uint8_t ret_hash[STORE_TOKEN_HASH_LEN]);
/* The hash the store keeps of a token. */
void auth_token_hash(const char *token, uint8_t ret_hash[STORE_TOKEN_HASH_LEN]);

/* What a new token is: role; team for lead and member, else NULL; node for an agent
 * that may act for that node only, else NULL; name a label, user who it acts for (the
 * jobs it submits record it), each NULL for none; expires_ms when it stops working
 * (ms since the epoch), -1 never. */
typedef struct AuthTokenSpec {
    Role role;
    const char *team, *node, *name, *user;
    int64_t expires_ms;
} AuthTokenSpec;

/* Create a token and store its hash. The caller shows ret_token once. 0 or a negative
 * errno with err set. */
int auth_token_create(Store *store, const AuthTokenSpec *spec, int64_t now_ms,
                      char ret_token[AUTH_TOKEN_SIZE], int64_t *ret_id, Buf *err);

/* The caller an "Authorization: Bearer TOKEN" header names: 0; -EACCES for a missing,
 * malformed or unknown token, -EKEYREVOKED for a revoked one, -EKEYEXPIRED for one
 * past its expiry (-EIO when the store failed). Asks the store. */
int auth_resolve(Server *s, const char *authorization, Caller *ret);
/* The sentence a 401 gives for auth_resolve's error r (authorization: the header). */
const char *auth_refusal(int r, const char *authorization);

/* Resolved tokens are cached, with their expiry, to keep the store out of the hot
 * path; revoking a token forgets it (auth_cache_forget) before the revocation is
 * answered, and a resolution that raced with a revocation is not cached. Thread-safe;
 * bounded (past its size it asks the store). */
typedef struct AuthCache AuthCache;
AuthCache *auth_cache_new(void);
void auth_cache_free(AuthCache *c);
int auth_cache_resolve(AuthCache *c, Server *s, const char *authorization, Caller *ret);
/* Drop every cached resolution of token id (c may be NULL: nothing cached). */
void auth_cache_forget(AuthCache *c, int64_t token_id);
/* When token id was last used through the cache since the server started (ms since
 * the epoch), -1 when not (or c is NULL). */
int64_t auth_cache_last_used(AuthCache *c, int64_t token_id);

/* On a store without tokens, make the first admin token (user "admin") and have it in
 * <data_dir>/admin.token (mode 0600). The file owns the secret and is written first
 * (to admin.token.tmp, synced, linked into place, the directory synced); the store's hash
 * follows. A first start killed between the two leaves the file alone: the next start
 * finds it (a well-formed token, a regular file of ours, mode 0600) and registers its
 * hash instead of making another. A malformed or foreign file is refused with a
 * message, never overwritten. *ret_path is the file's path (malloc'd) when one was
 * written or taken up, NULL when tokens existed; *ret_adopted says it was taken up.
 * 0 or a negative errno with err set. */
int auth_bootstrap(Server *s, char **ret_path, bool *ret_adopted, Buf *err);
