/* client.h: what the client commands (submit, queue, nodes, ...) share: the common
 * options (--server, --token, -o, --help), finding the server and the token, sending
 * a request and turning a failed one into a message and an exit code, query strings,
 * and the time arguments people type. Functions returning an int return the process
 * exit code of cli.h (0, 1 or 2) unless they say otherwise; they print the message. */
#pragma once

#include "net/http_client.h"
#include "util/buf.h"

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLIENT_DEFAULT_SERVER "http://127.0.0.1:8080"
#define CLIENT_TOKEN_FILE     "var/admin.token"
/* Tables fit this many columns unless a command is asked for its wide form. */
#define CLIENT_WIDTH 80

enum { CLIENT_OPT_SERVER = 0x100, CLIENT_OPT_TOKEN };

/* Entries for a command's getopt_long table; -o/--output is listed by the commands
 * that take it, with CLIENT_OPT_OUTPUT. */
#define CLIENT_OPTIONS                                                                             \
    {"server", required_argument, NULL, CLIENT_OPT_SERVER},                                        \
        {"token", required_argument, NULL, CLIENT_OPT_TOKEN},                                      \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }
#define CLIENT_OPT_OUTPUT                                                                          \
    {                                                                                              \
        "output", required_argument, NULL, 'o'                                                     \
    }

/* The common options, for each command's --help. */
#define CLIENT_HELP                                                                                \
    "  --server URL[,URL]   the gpuorch server, or the servers of an HA group, tried in\n"         \
    "                       turn (else $GPUORCH_SERVER, else " CLIENT_DEFAULT_SERVER ")\n"         \
    "  --token TOKEN        the API token (else $GPUORCH_TOKEN, else the file\n"                   \
    "                       ./" CLIENT_TOKEN_FILE ")\n"

typedef struct Client {
    const char *cmd;      /* "submit": every message starts "gpuorch submit: " */
    const char *server;   /* --server; resolved by client_connect */
    const char *token;    /* --token; resolved by client_connect */
    const char *format;   /* -o, "table" unless given */
    bool server_from_env; /* for the message about a bad URL */
    char *token_file;     /* owned: the token read from ./var/admin.token */
    HttpClient *http;     /* owned, after client_connect */
} Client;

void client_init(Client *c, const char *cmd);
void client_free(Client *c);
/* Take one of the common options (and -o); false when opt is none of them. */
bool client_option(Client *c, int opt, const char *arg);
/* A command's own options: 0 when taken, -1 for one it does not know (usage error),
 * or an exit code (it printed why). */
typedef int (*ClientOwnOption)(void *ctx, int opt, const char *arg);
/* getopt_long over argv: the common options go to c, 'h' prints usage to stdout, the
 * rest to `own` (may be NULL). Returns -1 to go on, else the exit code (0 after
 * --help, 2 for a bad option, after printing usage to stderr). */
int client_parse_options(Client *c, int argc, char **argv, const char *shortopts,
                         const struct option *opts, ClientOwnOption own, void *ctx,
                         void (*usage)(FILE *));
/* -o must be one of `allowed` (NULL-terminated): 0 or 2. */
int client_check_format(const Client *c, const char *const *allowed);
bool client_json_output(const Client *c);

/* Resolve the server and the token, open the connection: 0, 2 (a server that is not
 * an http:// or https:// URL) or 1 (out of memory). */
int client_connect(Client *c);

/* Send a request. Any reply: 0 with *ret filled (status may be anything). No reply:
 * prints why (context first, when not NULL) and returns 1. */
int client_request(Client *c, const char *context, const char *method, const char *path,
                   const char *content_type, const char *body, size_t len, HttpReply *ret);
/* Print what a failed reply says (its {"error": ...}, else its status and first
 * line) and return its exit code: 2 for 400, 413 and 422 (the server refused what the
 * user gave), 1 for anything else. */
int client_reply_error(const Client *c, const char *context, const HttpReply *r);
/* client_request, then client_reply_error unless the status is 2xx. */
int client_call(Client *c, const char *context, const char *method, const char *path,
                const char *content_type, const char *body, size_t len, HttpReply *ret);
/* The reply body as JSON (*ret owned by the caller): 0 or 1 (not JSON: said so). */
int client_parse(const Client *c, const HttpReply *r, json_t **ret);
/* Print a reply body to stdout as the server sent it (one_line: with its line breaks
 * removed, so several replies make JSON Lines; a JSON string holds no raw line break,
 * so this keeps the content), ending in a newline. */
void client_print_body(const HttpReply *r, bool one_line);

/* Print what a view (view.h) made of a reply, given its return value r; when it
 * could not read the reply, say why. 0 or 1. */
int client_show(const Client *c, int r, const Buf *text, const Buf *err);

void client_error(const Client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void client_oom(const Client *c);

/* Append "?key=value" (or "&key=value" after the first) percent-encoded. */
void client_query(Buf *path, const char *key, const char *value);
/* Append s percent-encoded for a path segment or a query value. */
void client_escape(Buf *b, const char *s);

/* Is every comma-separated word of list one of the n words known ("a,b": yes when both
 * are; an empty word never is)? */
bool client_words_known(const char *list, const char *const *known, size_t n);
/* A job id: a whole number above 0. 0 or -EINVAL. */
int client_parse_id(const char *s, int64_t *ret_id);
/* "2026-11-30" (midnight UTC), "2026-11-30T14:05" (UTC, ":SS" allowed) or ms since
 * the epoch. 0 or -EINVAL. */
int client_parse_time_ms(const char *s, int64_t *ret_ms);
/* A number >= 0 written in full ("8", "2.5"). 0 or -EINVAL. */
int client_parse_amount(const char *s, double *ret);
int64_t client_now_ms(void);
/* Sleep for ms milliseconds (signals may cut it short). */
void client_sleep_ms(long ms);
