/* pg_fixture.h: a real, throwaway PostgreSQL 15 for one test binary (test_store.c,
 * test_store_pg.c). pg_fixture_start makes a fresh directory under /tmp, runs initdb
 * into it as an unprivileged user (the `postgres` system user the Debian package
 * creates when the tests run as root, else the user running them), and starts the
 * server listening only on a unix socket in that directory (listen_addresses = '',
 * fsync on), with "local all postgres trust" and a password for every other role.
 * A keeper process, in a session of its own, holds the read end of a pipe whose write
 * end only the test process holds: when the pipe closes (pg_fixture_stop, or the test
 * process killed) it stops the server (pg_ctl stop -m fast) and removes the directory.
 * Where PostgreSQL is not installed, pg.why says so and the tests skip (cmocka's skip),
 * never pass. Include after cmocka.h; link libpq. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct PgFixture {
    bool up;
    char why[256]; /* why the PostgreSQL tests skip, when !up */
    char dir[64];  /* the instance: data/, log, and the socket */
    char bin[256]; /* initdb's and pg_ctl's directory */
    uid_t uid;     /* who runs the server */
    gid_t gid;
    int keep_fd; /* the write end of the keeper's pipe */
    pid_t keeper;
    unsigned dbs; /* databases made so far */
} PgFixture;

static PgFixture pg = {.keep_fd = -1};

/* Run argv (argv[0] a program in pg.bin) as the server's user, output to dir/log;
 * its exit status, or -1. */
static inline int pg_fixture_run(const char *const *argv)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char path[512], log[128];
        snprintf(log, sizeof(log), "%s/log", pg.dir);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (getuid() == 0 && (setgroups(0, NULL) < 0 || setgid(pg.gid) < 0 || setuid(pg.uid) < 0))
            _exit(126);
        snprintf(path, sizeof(path), "%s/%s", pg.bin, argv[0]);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline int pg_fixture_ctl(const char *what, const char *mode)
{
    char data[96], log[96];
    snprintf(data, sizeof(data), "%s/data", pg.dir);
    snprintf(log, sizeof(log), "%s/server.log", pg.dir);
    if (strcmp(what, "start") == 0) {
        const char *argv[] = {"pg_ctl", "-D", data, "-l", log, "-w", "-t", "120", "start", NULL};
        return pg_fixture_run(argv);
    }
    const char *argv[] = {"pg_ctl", "-D", data, "-w", "-t", "120", "-m", mode, "stop", NULL};
    return pg_fixture_run(argv);
}

/* The keeper: wait for the pipe to close, then stop the server and remove its files. */
static inline void pg_fixture_keep(int rfd)
{
    setsid();
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    char c;
    for (;;) {
        ssize_t k = read(rfd, &c, 1);
        if (k == 0 || (k < 0 && errno != EINTR))
            break;
    }
    pg_fixture_ctl("stop", "fast");
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", pg.dir);
    if (system(cmd) != 0)
        _exit(1);
    _exit(0);
}

static inline bool pg_fixture_find_bin(void)
{
    const char *dirs[] = {getenv("GPUORCH_PG_BIN"), "/usr/lib/postgresql/15/bin"};
    for (size_t i = 0; i < 2; i++) {
        char path[300];
        if (!dirs[i])
            continue;
        snprintf(path, sizeof(path), "%s/initdb", dirs[i]);
        if (access(path, X_OK) == 0) {
            snprintf(pg.bin, sizeof(pg.bin), "%s", dirs[i]);
            return true;
        }
    }
    FILE *p = popen("pg_config --bindir 2>/dev/null", "r");
    if (!p)
        return false;
    bool found = fgets(pg.bin, sizeof(pg.bin), p) != NULL;
    pclose(p);
    pg.bin[strcspn(pg.bin, "\n")] = '\0';
    char path[300];
    snprintf(path, sizeof(path), "%s/initdb", pg.bin);
    return found && access(path, X_OK) == 0;
}

static inline int pg_fixture_append(const char *file, const char *mode, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/data/%s", pg.dir, file);
    FILE *f = fopen(path, mode);
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* Start the server; 0 with pg.up, or 0 with pg.why when it cannot be (the tests skip),
 * -1 when starting it failed (the tests fail). */
static inline int pg_fixture_start(void)
{
    if (!pg_fixture_find_bin()) {
        snprintf(pg.why, sizeof(pg.why),
                 "PostgreSQL 15 is not installed (no initdb in /usr/lib/postgresql/15/bin, "
                 "nor from pg_config --bindir): `apt-get install postgresql-15`");
        return 0;
    }
    pg.uid = getuid();
    pg.gid = getgid();
    if (pg.uid == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw) {
            snprintf(pg.why, sizeof(pg.why),
                     "running as root and there is no `postgres` user to run PostgreSQL as");
            return 0;
        }
        pg.uid = pw->pw_uid;
        pg.gid = pw->pw_gid;
    }
    snprintf(pg.dir, sizeof(pg.dir), "/tmp/gpuorch-pg-XXXXXX");
    if (!mkdtemp(pg.dir) || chown(pg.dir, pg.uid, pg.gid) < 0)
        return -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pg.keeper = fork();
    if (pg.keeper < 0)
        return -1;
    if (pg.keeper == 0) {
        close(fds[1]);
        pg_fixture_keep(fds[0]);
    }
    close(fds[0]);
    pg.keep_fd = fds[1];
    char data[96];
    snprintf(data, sizeof(data), "%s/data", pg.dir);
    const char *initdb[] = {"initdb", "-D", data,   "-U",         "postgres", "-A",
                            "trust",  "-E", "UTF8", "--locale=C", "-N",       NULL};
    if (pg_fixture_run(initdb) != 0) {
        fprintf(stderr, "pg_fixture: initdb failed; see %s/log\n", pg.dir);
        return -1;
    }
    char conf[512];
    /* wal_writer_delay at its longest: a commit not flushed by its own session waits
     * for it, so a crash test finds acknowledged commits that were not durable */
    snprintf(conf, sizeof(conf),
             "listen_addresses = ''\nunix_socket_directories = '%s'\nfsync = on\n"
             "max_connections = 60\nwal_writer_delay = 10000ms\n",
             pg.dir);
    if (pg_fixture_append("postgresql.conf", "a", conf) < 0 ||
        pg_fixture_append("pg_hba.conf", "w",
                          "local all postgres trust\nlocal all all scram-sha-256\n") < 0)
        return -1;
    if (pg_fixture_ctl("start", NULL) != 0) {
        fprintf(stderr, "pg_fixture: pg_ctl start failed; see %s/server.log\n", pg.dir);
        return -1;
    }
    pg.up = true;
    return 0;
}

/* Stop the server and remove its directory (the keeper does it once the pipe closes). */
static inline void pg_fixture_stop(void)
{
    if (pg.keep_fd < 0)
        return;
    close(pg.keep_fd);
    pg.keep_fd = -1;
    while (waitpid(pg.keeper, NULL, 0) < 0 && errno == EINTR)
        ;
    pg.up = false;
}

/* The URL of database db as the superuser (or as user:password when user is given). */
static inline void pg_fixture_url(char *url, size_t n, const char *db, const char *user,
                                  const char *password)
{
    if (user)
        snprintf(url, n, "postgresql://%s:%s@/%s?host=%s", user, password ? password : "", db,
                 pg.dir);
    else
        snprintf(url, n, "postgresql:///%s?host=%s&user=postgres", db, pg.dir);
}

/* Run sql as the superuser on database db; the first value of its result copied into
 * out when given. 0, or -1 with the server's message printed. */
static inline int pg_fixture_sql(const char *db, const char *sql, char *out, size_t n)
{
    char url[256];
    pg_fixture_url(url, sizeof(url), db, NULL, NULL);
    PGconn *c = PQconnectdb(url);
    int r = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *res = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(res);
        r = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : -1;
        if (r < 0)
            fprintf(stderr, "pg_fixture: %s: %s", sql, PQresultErrorMessage(res));
        if (r == 0 && out)
            snprintf(out, n, "%s",
                     st == PGRES_TUPLES_OK && PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
        PQclear(res);
    } else {
        fprintf(stderr, "pg_fixture: %s", PQerrorMessage(c));
    }
    PQfinish(c);
    return r;
}

/* A fresh database; its name into name and the URL to it into url. 0 or -1. */
static inline int pg_fixture_createdb(char *name, size_t name_n, char *url, size_t url_n)
{
    snprintf(name, name_n, "t%u_%d", ++pg.dbs, (int)getpid());
    char sql[128];
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    if (pg_fixture_sql("postgres", sql, NULL, 0) < 0)
        return -1;
    pg_fixture_url(url, url_n, name, NULL, NULL);
    return 0;
}

/* Stop the server at once, as a crash would (no checkpoint, nothing flushed), then start
 * it again: it recovers from its WAL. 0 or -1. */
static inline int pg_fixture_crash_restart(void)
{
    if (pg_fixture_ctl("stop", "immediate") != 0)
        return -1;
    return pg_fixture_ctl("start", NULL) == 0 ? 0 : -1;
}
