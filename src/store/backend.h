/* backend.h: the seam between store.c and a database back end (internal to src/store).
 * A back end fills a StoreOps table, one function per public store function, and embeds
 * struct Store as its first member; store.c parses the URL, picks the back end and
 * dispatches: SQLite (sqlite.c) and PostgreSQL (pg.c). */
#pragma once

#include "store/store.h"

#include <stdarg.h>

typedef struct StoreOps {
    void (*close)(Store *s);
    int (*ping)(Store *s);
    int (*write)(Store *s, StoreWrite *w, Buf *err);
    int (*jobs_load)(Store *s, int (*fn)(void *arg, StoreJob *j), void *arg);
    int (*jobs_load_live)(Store *s, int64_t ended_since_ms, int (*fn)(void *arg, StoreJob *j),
                          void *arg);
    int (*job_get)(Store *s, int64_t id, StoreJob *ret);
    int (*jobs_page)(Store *s, const StoreJobQuery *q, int (*fn)(void *arg, StoreJob *j),
                     void *arg);
    int (*events_for)(Store *s, int64_t job,
                      int (*fn)(void *arg, int64_t t_ms, const char *type, const char *detail),
                      void *arg);
    int (*usage_query)(Store *s, int64_t from_ms, int64_t to_ms,
                       int (*fn)(void *arg, const StoreUsage *u), void *arg);
    int (*span_open)(Store *s, const StoreNodeSpan *spans, size_t n, int64_t *ret_ids);
    int (*spans_end)(Store *s, const int64_t *ids, size_t n, int64_t end_ms, bool close);
    int (*spans_close_open)(Store *s, size_t *ret_n);
    int (*spans_query)(Store *s, int64_t from_ms, int64_t to_ms,
                       int (*fn)(void *arg, const StoreNodeSpan *span), void *arg);
    int (*team_set)(Store *s, const char *name, double guaranteed_gpus, double burst_gpus,
                    double weight);
    int (*teams_load)(Store *s,
                      int (*fn)(void *arg, const char *name, double guaranteed_gpus,
                                double burst_gpus, double weight),
                      void *arg);
    int (*team_budget_set)(Store *s, const char *name, double budget_gpu_hours);
    int (*team_budgets_load)(Store *s,
                             int (*fn)(void *arg, const char *name, double budget_gpu_hours),
                             void *arg);
    int (*token_insert)(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], const StoreToken *t,
                        int64_t *ret_id);
    int (*token_find)(Store *s, const uint8_t hash[STORE_TOKEN_HASH_LEN], StoreToken *ret);
    int (*token_count)(Store *s, int64_t *ret);
    int (*token_list)(Store *s, int (*fn)(void *arg, const StoreToken *t), void *arg);
    int (*token_revoke)(Store *s, int64_t id, int64_t now_ms);
    int (*server_id)(Store *s, char ret[STORE_SERVER_ID_LEN + 1]);
    int (*mig_set)(Store *s, const char *node, unsigned index, const char *layout_json);
    int (*mig_load)(Store *s,
                    int (*fn)(void *arg, const char *node, unsigned index, const char *layout_json),
                    void *arg);
    int (*learned_load)(Store *s,
                        int (*fn)(void *arg, const char *cls, uint64_t peak_mib, unsigned ooms),
                        void *arg);
    int (*lead)(Store *s, const char *url, int64_t now_ms, Buf *err);
    bool (*leading)(Store *s, bool check);
    int (*leader)(Store *s, char *url, size_t n, int64_t *since_ms);
} StoreOps;

/* How many schema steps every back end knows (migrations.c, pg_migrations.c): each
 * checks its own list against it at build time, so that store_schema_version means the
 * same on both. */
#define STORE_SCHEMA_VERSIONS 12

struct Store {
    const StoreOps *ops;
    int schema_version; /* set by the back end's open */
};

/* Append "store LABEL: message" to err (when err is given) and return e. */
int store_fail(Buf *err, int e, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The SQLite back end (sqlite.c): path is a file name, never a URL. */
int sqlite_open(const char *path, Store **ret, Buf *err);
/* The PostgreSQL back end (pg.c): url is a postgres:// or postgresql:// URI. */
int pg_open(const char *url, Store **ret, Buf *err);
