/* test_cli_tables.c: what the client commands print for the server's replies
 * (src/cli/view.c over src/cli/table.c), on hand-written replies in the shapes of
 * docs/api.md: every line within 80 columns, long names and reasons cut with '~',
 * the wide form not cut, durations and ETAs, the MIG map, the usage total; and the
 * arguments the client parses (dates, ids, query strings). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/client.h"
#include "cli/table.h"
#include "cli/view.h"
#include "util/macro.h"

#include <errno.h>

#include <string.h>

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *doc = json_loads(text, 0, &e);
    if (!doc)
        fail_msg("bad test JSON: %s at line %d", e.text, e.line);
    return doc;
}

/* Every line of s is at most `width` columns; returns the number of lines. */
static size_t check_width(const char *s, size_t width)
{
    size_t lines = 0;
    while (*s) {
        size_t n = strcspn(s, "\n");
        char *line = strndup(s, n);
        assert_non_null(line);
        if (text_width(line) > width)
            fail_msg("line of %zu columns (limit %zu): '%s'", text_width(line), width, line);
        assert_false(n > 0 && line[n - 1] == ' '); /* no trailing blanks */
        free(line);
        lines++;
        s += n + (s[n] == '\n');
    }
    return lines;
}

/* The line of s that contains `needle` (a static copy), failing when none does. */
static const char *line_with(const char *s, const char *needle)
{
    static char line[1024];
    const char *hit = strstr(s, needle);
    if (!hit)
        fail_msg("no line has '%s' in:\n%s", needle, s);
    const char *start = hit;
    while (start > s && start[-1] != '\n')
        start--;
    size_t n = strcspn(start, "\n");
    assert_true(n < sizeof(line));
    memcpy(line, start, n);
    line[n] = '\0';
    return line;
}

static void test_text_cut(void **state)
{
    (void)state;
    Buf b = {0};
    assert_int_equal(text_width("héllo"), 5);
    text_cut(&b, "héllo wörld", 6);
    assert_string_equal(buf_str(&b), "héllo~");
    buf_reset(&b);
    text_cut(&b, "short", 5);
    assert_string_equal(buf_str(&b), "short");
    buf_reset(&b);
    /* the cut never splits a multi-byte character */
    text_cut(&b, "ééééé", 3);
    assert_string_equal(buf_str(&b), "éé~");
    assert_int_equal(text_width(buf_str(&b)), 3);
    buf_free(&b);
}

static void test_table_fit(void **state)
{
    (void)state;
    static const TableCol cols[] = {
        {"ID", COL_RIGHT, 0, 0, 0},
        {"NAME", COL_LEFT, 0, 6, 1},
        {"NOTE", COL_LEFT, 0, 8, 2},
    };
    Table t;
    table_init(&t, cols, 3);
    table_cell(&t, "7");
    table_cell(&t, "a-name-of-thirty-characters-xx");
    table_cell(&t, "%s", "a note long enough that the line must be cut somewhere past eighty");
    table_cell(&t, "1234");
    table_cell(&t, "b");
    table_cell(&t, "tab\there"); /* control characters become spaces */
    assert_int_equal(table_rows(&t), 2);
    Buf out = {0};
    assert_int_equal(table_render(&t, 46, &out), 0);
    const char *s = buf_str(&out);
    assert_int_equal(check_width(s, 46), 3);
    /* the note (shrink order 2) went down to 8 columns before the name gave any */
    assert_string_equal(line_with(s, "ID"), "  ID  NAME                            NOTE");
    assert_non_null(strstr(s, "   7  a-name-of-thirty-characters-xx  a note ~\n"));
    assert_non_null(strstr(s, "1234  b                               tab here\n"));
    /* six columns fewer: the note is at its least, the name gives them */
    buf_reset(&out);
    assert_int_equal(table_render(&t, 40, &out), 0);
    assert_int_equal(check_width(buf_str(&out), 40), 3);
    assert_non_null(strstr(buf_str(&out), "   7  a-name-of-thirty-charac~  a note ~\n"));
    /* no limit: nothing cut */
    buf_reset(&out);
    assert_int_equal(table_render(&t, 0, &out), 0);
    assert_non_null(strstr(buf_str(&out), "past eighty\n"));
    /* too narrow for the minimums: the shrinkable columns stop at them */
    buf_reset(&out);
    assert_int_equal(table_render(&t, 10, &out), 0);
    assert_non_null(strstr(buf_str(&out), "   7  a-nam~  a note ~\n"));
    table_free(&t);
    buf_free(&out);
}

static void test_duration(void **state)
{
    (void)state;
    static const struct {
        int64_t ms;
        const char *text;
    } cases[] = {
        {-5000, "0s"},
        {0, "0s"},
        {45999, "45s"},
        {60000, "1m"},
        {3599000, "59m"},
        {3600000, "1h00m"},
        {3900000, "1h05m"},
        {36000000, "10h"},
        {47 * 3600000LL, "47h"},
        {48 * 3600000LL, "2d"},
        {400 * 86400000LL, "400d"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        Buf b = {0};
        view_duration(&b, cases[i].ms);
        assert_string_equal(buf_str(&b), cases[i].text);
        buf_free(&b);
    }
    Buf b = {0};
    view_time_utc(&b, 1764500000000);
    assert_string_equal(buf_str(&b), "2025-11-30 10:53");
    buf_free(&b);
}

#define NOW 1764500000000LL

static const char queue_reply[] =
    "{\"jobs\": ["
    "{\"id\": 17, \"name\": \"bert-finetune-with-a-really-long-name\", \"team\": \"research\","
    " \"project\": \"vision\", \"kind\": \"training\", \"priority\": \"normal\","
    " \"state\": \"pending\", \"run\": 1, \"workers\": 2, \"gpu_equivalents\": 2.0,"
    " \"submit_ms\": 1764499000000, \"start_ms\": null, \"end_ms\": null, \"position\": 1,"
    " \"reason\": \"waiting for 2 free H100-80GB GPUs on one node; the reservation holds "
    "h100-3 from 10:40\", \"eta_ms\": 1764500300000},"
    "{\"id\": 18, \"name\": \"llama-serve\", \"team\": \"search\", \"priority\": \"production\","
    " \"state\": \"running\", \"gpu_equivalents\": 0.142857, \"submit_ms\": 1764490000000,"
    " \"start_ms\": 1764490100000, \"position\": null, \"reason\": null, \"eta_ms\": null},"
    "{\"id\": 1003, \"name\": \"sweep-4\", \"team\": \"a-team-name-that-goes-on\","
    " \"priority\": \"low\", \"state\": \"pending\", \"gpu_equivalents\": 0.5,"
    " \"submit_ms\": 1764496400000, \"position\": 2, \"reason\": \"over the team's burst\"}"
    "]}";

static void test_queue(void **state)
{
    (void)state;
    json_t *doc = parse(queue_reply);
    Buf out = {0}, err = {0};
    assert_int_equal(view_queue(doc, NOW, 80, &out, &err), 0);
    const char *s = buf_str(&out);
    assert_int_equal(check_width(s, 80), 4);
    const char *head = line_with(s, "ID");
    assert_non_null(strstr(head, "NAME"));
    assert_non_null(strstr(head, "AGE/ETA"));
    assert_non_null(strstr(head, "REASON"));
    /* the fixed columns, then the reason at its least (16), then the name and team */
    const char *l17 = line_with(s, "  17  ");
    assert_string_equal(l17, "  17  bert-fine~  resear~  normal  pending    1     2   eta 5m  "
                             "waiting for 2 f~");
    const char *l18 = line_with(s, "llama-ser~");
    assert_non_null(strstr(l18, "  search   prod    running"));
    assert_non_null(strstr(l18, "0.14"));
    assert_non_null(strstr(l18, "2h46m")); /* age since submit */
    const char *l1003 = line_with(s, "1003");
    assert_non_null(strstr(l1003, "a-team~"));
    assert_non_null(strstr(l1003, "1h00m")); /* no eta: waited so far */
    assert_non_null(strstr(l1003, "over the team's~"));

    /* wide: nothing cut */
    buf_reset(&out);
    assert_int_equal(view_queue(doc, NOW, 0, &out, &err), 0);
    assert_non_null(strstr(buf_str(&out), "bert-finetune-with-a-really-long-name  research  "));
    assert_non_null(strstr(buf_str(&out), "holds h100-3 from 10:40\n"));
    json_decref(doc);

    /* no pending reason: no REASON column; an eta already past reads "now" */
    doc = parse("{\"jobs\": [{\"id\": 5, \"name\": \"x\", \"state\": \"pending\","
                " \"eta_ms\": 1764499999000, \"gpu_equivalents\": 1}]}");
    buf_reset(&out);
    assert_int_equal(view_queue(doc, NOW, 80, &out, &err), 0);
    assert_null(strstr(buf_str(&out), "REASON"));
    assert_null(strstr(buf_str(&out), "USER")); /* no job names a user */
    assert_non_null(strstr(buf_str(&out), "eta now"));
    assert_non_null(strstr(buf_str(&out), " 5  x     -     -     pending")); /* no team, class */
    json_decref(doc);

    /* a job that names its user: a USER column after TEAM, "-" for one that names none */
    doc = parse("{\"jobs\": [{\"id\": 5, \"name\": \"x\", \"team\": \"search\", \"user\": "
                "\"alice\", \"state\": \"running\", \"gpu_equivalents\": 1}, {\"id\": 6, "
                "\"name\": \"y\", \"state\": \"running\", \"gpu_equivalents\": 1}]}");
    buf_reset(&out);
    assert_int_equal(view_queue(doc, NOW, 80, &out, &err), 0);
    assert_non_null(strstr(buf_str(&out), "ID  NAME  TEAM    USER   PRIO"));
    assert_non_null(strstr(buf_str(&out), " 5  x     search  alice  -     running"));
    assert_non_null(strstr(buf_str(&out), " 6  y     -       -      -     running"));
    json_decref(doc);

    /* not the documented shape */
    doc = parse("{\"jobs\": 3}");
    buf_reset(&out);
    assert_int_equal(view_queue(doc, NOW, 80, &out, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "'jobs'"));
    json_decref(doc);
    buf_free(&out);
    buf_free(&err);
}

static const char nodes_reply[] =
    "{\"nodes\": ["
    "{\"name\": \"a100-0\", \"pool\": \"a100\", \"tier\": \"owned\", \"model\": \"A100-80GB\","
    " \"state\": \"ready\", \"last_seen_ms\": 1764500000000,"
    " \"cpu_milli\": 128000, \"cpu_used_milli\": 8000,"
    " \"memory_mib\": 1048576, \"memory_used_mib\": 65536, \"gpus\": ["
    "  {\"index\": 0, \"mode\": \"mig\", \"draining\": false, \"used\": 0.43, \"mig\": ["
    "    {\"profile\": \"3g.40gb\", \"start\": 4, \"job\": 18, \"rank\": 0},"
    "    {\"profile\": \"1g.10gb\", \"start\": 0, \"job\": 17, \"rank\": 0},"
    "    {\"profile\": \"1g.10gb\", \"start\": 1, \"job\": null}], \"jobs\": []},"
    "  {\"index\": 1, \"mode\": \"whole\", \"draining\": false, \"used\": 1,"
    "   \"mig\": [], \"jobs\": [{\"job\": 21, \"rank\": 0}]},"
    "  {\"index\": 2, \"mode\": \"whole\", \"draining\": false, \"used\": 0, \"jobs\": []},"
    "  {\"index\": 3, \"mode\": \"shared\", \"draining\": true, \"used\": 0.75, \"jobs\": ["
    "    {\"job\": 18, \"rank\": 1, \"fraction\": 0.25}, {\"job\": 19, \"rank\": 0,"
    "     \"fraction\": 0.5}]}]},"
    "{\"name\": \"h100-spot-7\", \"tier\": \"spot\", \"model\": \"H100-80GB\","
    " \"state\": \"lost\", \"last_seen_ms\": 1764499700000, \"cpu_milli\": 96000,"
    " \"cpu_used_milli\": 0, \"memory_mib\": 2097152, \"memory_used_mib\": 0, \"gpus\": []}"
    "]}";

static void test_nodes(void **state)
{
    (void)state;
    json_t *doc = parse(nodes_reply);
    Buf out = {0}, err = {0};
    assert_int_equal(view_nodes(doc, NOW, 80, &out, &err), 0);
    const char *s = buf_str(&out);
    check_width(s, 80);
    const char *head = line_with(s, "a100-0");
    assert_true(!strncmp(head, "a100-0 ", 7));
    assert_non_null(strstr(head, "A100-80GB x4"));
    assert_non_null(strstr(head, "owned"));
    assert_non_null(strstr(head, "ready"));
    assert_non_null(strstr(head, "cpu 8/128"));
    assert_non_null(strstr(head, "mem 64/1024 GiB"));
    assert_string_equal(head,
                        "a100-0       A100-80GB x4  owned  ready  cpu 8/128  mem 64/1024 GiB");
    /* slices by start slot; the shared GPU's item would pass 80 columns: next line */
    assert_string_equal(line_with(s, "0 mig"),
                        "  0 mig [1g.10gb:17,- 3g.40gb:18]   1 whole 21   2 free");
    assert_string_equal(line_with(s, "3 shared"), "  3 shared [18:0.25 19:0.5] drain");
    assert_string_equal(line_with(s, "h100-spot-7"), "h100-spot-7  no GPUs       spot   lost   "
                                                     "cpu 0/96  mem 0/2048 GiB  seen 5m ago");
    assert_non_null(strstr(s, "2 nodes: 1 ready, 1 lost; 2.18 of 4 GPUs in use\n"));
    json_decref(doc);

    /* eight GPUs of seven slices each, job ids of six digits: still 80 columns, every
     * GPU's item (64 columns) whole on its line */
    json_t *gpus = json_array();
    for (int g = 0; g < 8; g++) {
        json_t *mig = json_array();
        for (int k = 0; k < 7; k++)
            json_array_append_new(mig, json_pack("{s:s, s:i, s:i}", "profile", "1g.10gb", "start",
                                                 k, "job", 100000 + g * 7 + k));
        json_array_append_new(gpus, json_pack("{s:i, s:s, s:o, s:[]}", "index", g, "mode", "mig",
                                              "mig", mig, "jobs"));
    }
    doc = json_pack("{s:[{s:s, s:s, s:s, s:s, s:o}]}", "nodes", "name", "a100-1", "tier",
                    "on-demand", "model", "A100-80GB", "state", "unknown", "gpus", gpus);
    assert_non_null(doc);
    buf_reset(&out);
    assert_int_equal(view_nodes(doc, NOW, 80, &out, &err), 0);
    s = buf_str(&out);
    /* header, 8 GPU lines, summary */
    assert_int_equal(check_width(s, 80), 10);
    assert_non_null(strstr(s, "  7 mig [1g.10gb:100049,100050,100051,100052,100053,100054,"
                              "100055]\n"));
    assert_string_equal(line_with(s, "a100-1"), "a100-1  A100-80GB x8  on-demand  unknown");
    json_decref(doc);

    /* GPUs in a row of indexes holding the same make one item; a gap or a drain
     * breaks the row */
    doc = parse("{\"nodes\": [{\"name\": \"h100-0\", \"state\": \"ready\", \"gpus\": ["
                "{\"index\": 0, \"mode\": \"whole\", \"jobs\": [{\"job\": 2}]},"
                "{\"index\": 1, \"mode\": \"whole\", \"jobs\": [{\"job\": 2}]},"
                "{\"index\": 2, \"mode\": \"whole\", \"jobs\": [{\"job\": 2}]},"
                "{\"index\": 3, \"mode\": \"whole\", \"jobs\": [{\"job\": 3}]},"
                "{\"index\": 4, \"mode\": \"whole\", \"jobs\": []},"
                "{\"index\": 5, \"mode\": \"whole\", \"jobs\": []},"
                "{\"index\": 6, \"mode\": \"whole\", \"jobs\": [], \"draining\": true},"
                "{\"index\": 8, \"mode\": \"whole\", \"jobs\": []}]}]}");
    buf_reset(&out);
    assert_int_equal(view_nodes(doc, NOW, 80, &out, &err), 0);
    assert_non_null(
        strstr(buf_str(&out), "\n  0-2 whole 2   3 whole 3   4-5 free   6 free drain   8 free\n"));
    json_decref(doc);
    buf_free(&out);
    buf_free(&err);
}

/* A mismatched node says so on its line and shows what differs under it, wrapped to
 * the width at word boundaries; the summary counts it. */
static void test_nodes_mismatched(void **state)
{
    (void)state;
    json_t *doc = parse(
        "{\"nodes\": [{\"name\": \"l4-0\", \"tier\": \"on-demand\", \"model\": \"L4\","
        " \"state\": \"mismatched\", \"last_seen_ms\": 1764499999000,"
        " \"mismatch\": \"the agent reports 8 x H100-80GB-SXM5 where the cluster file declares 4 x"
        " L4 (pool l4): 8 GPUs, not 4; GPUs 0-7 are H100-80GB-SXM5, not L4\","
        " \"gpus\": [{\"index\": 0, \"mode\": \"whole\", \"jobs\": []},"
        " {\"index\": 1, \"mode\": \"whole\", \"jobs\": []}]}]}");
    Buf out = {0}, err = {0};
    assert_int_equal(view_nodes(doc, NOW, 60, &out, &err), 0);
    const char *s = buf_str(&out);
    check_width(s, 60);
    assert_string_equal(line_with(s, "l4-0"), "l4-0  L4 x2  on-demand  mismatched  seen 1s ago");
    assert_string_equal(line_with(s, "mismatch:"),
                        "  mismatch: the agent reports 8 x H100-80GB-SXM5 where the");
    assert_string_equal(line_with(s, "cluster file"),
                        "    cluster file declares 4 x L4 (pool l4): 8 GPUs, not 4;");
    assert_string_equal(line_with(s, "GPUs 0-7"), "    GPUs 0-7 are H100-80GB-SXM5, not L4");
    assert_non_null(strstr(s, "1 node: 1 mismatched; 0 of 2 GPUs in use\n"));
    json_decref(doc);
    buf_free(&out);
    buf_free(&err);
}

static void test_teams(void **state)
{
    (void)state;
    json_t *doc = parse("{\"teams\": [{\"name\": \"search\", \"guaranteed_gpus\": 8,"
                        " \"burst_gpus\": 16, \"weight\": 2, \"projects\": [\"ranking\"],"
                        " \"held_gpus\": 3.5, \"guaranteed_held_gpus\": 3.5,"
                        " \"borrowed_gpus\": 0, \"pending_jobs\": 2, \"running_jobs\": 4,"
                        " \"fair_share_usage\": 0.31},"
                        " {\"name\": \"a-team-with-a-name-too-long-to-show\"}]}");
    Buf out = {0}, err = {0};
    assert_int_equal(view_teams(doc, 80, &out, &err), 0);
    const char *s = buf_str(&out);
    assert_int_equal(check_width(s, 80), 3);
    assert_non_null(strstr(line_with(s, "TEAM"), "GUAR  BURST  WEIGHT  HELD  BORROWED"));
    const char *row = line_with(s, "search");
    assert_non_null(strstr(row, "  8     16       2   3.5         0        2        4   0.31"));
    assert_non_null(strstr(s, "a-team-with-a-n~  ")); /* TEAM capped at 16 */
    json_decref(doc);

    /* one team, as GET /teams/{name} and PUT reply */
    doc = parse("{\"name\": \"vision\", \"guaranteed_gpus\": 1.5, \"burst_gpus\": 4}");
    buf_reset(&out);
    assert_int_equal(view_teams(doc, 80, &out, &err), 0);
    assert_int_equal(check_width(buf_str(&out), 80), 2);
    assert_non_null(strstr(buf_str(&out), "vision   1.5      4"));
    json_decref(doc);

    doc = parse("{\"error\": \"no\"}");
    assert_int_equal(view_teams(doc, 80, &out, &err), -EINVAL);
    json_decref(doc);
    buf_free(&out);
    buf_free(&err);
}

static void test_usage(void **state)
{
    (void)state;
    json_t *doc = parse("{\"from_ms\": 1761955200000, \"to_ms\": 1764547200000,"
                        " \"group_by\": [\"team\", \"project\"], \"rows\": ["
                        " {\"team\": \"search\", \"project\": \"ranking\", \"gpu_hours\": 12.5,"
                        "  \"cost_usd\": 31.25, \"jobs\": 4},"
                        " {\"team\": \"vision\", \"project\": null, \"gpu_hours\": 0.1428,"
                        "  \"cost_usd\": 0, \"jobs\": 1}],"
                        " \"total\": {\"gpu_hours\": 12.6428, \"cost_usd\": 31.25, \"jobs\": 5}}");
    Buf out = {0}, err = {0};
    assert_int_equal(view_usage(doc, 80, &out, &err), 0);
    const char *s = buf_str(&out);
    assert_int_equal(check_width(s, 80), 5);
    assert_true(!strncmp(s, "usage from 2025-11-01 00:00 to 2025-12-01 00:00 UTC\n", 52));
    assert_non_null(strstr(s, "TEAM    PROJECT  GPU-HOURS  COST USD  JOBS\n"));
    assert_non_null(strstr(s, "search  ranking      12.50     31.25     4\n"));
    assert_non_null(strstr(s, "vision  -             0.14      0.00     1\n"));
    assert_non_null(strstr(s, "TOTAL                12.64     31.25     5\n"));
    json_decref(doc);

    doc = parse("{\"group_by\": [\"team\"]}");
    assert_int_equal(view_usage(doc, 80, &out, &err), -EINVAL);
    json_decref(doc);
    buf_free(&out);
    buf_free(&err);
}

static void test_submitted_cancelled(void **state)
{
    (void)state;
    Buf out = {0}, err = {0};
    json_t *doc =
        parse("{\"id\": 17, \"name\": \"bert-finetune\", \"state\": \"pending\", \"position\": 3}");
    assert_int_equal(view_submitted(doc, &out, &err), 0);
    assert_string_equal(buf_str(&out), "submitted 17 bert-finetune: pending, position 3\n");
    json_decref(doc);

    doc = parse("{\"jobs\": [{\"id\": 1, \"name\": \"a\", \"state\": \"pending\", \"position\": 1},"
                " {\"id\": 2, \"name\": \"b\", \"state\": \"starting\", \"position\": null}]}");
    buf_reset(&out);
    assert_int_equal(view_submitted(doc, &out, &err), 0);
    assert_string_equal(buf_str(&out),
                        "submitted 1 a: pending, position 1\nsubmitted 2 b: starting\n");
    json_decref(doc);

    doc = parse("{\"jobs\": [{\"name\": \"a\"}]}");
    assert_int_equal(view_submitted(doc, &out, &err), -EINVAL);
    assert_non_null(strstr(buf_str(&err), "'id'"));
    json_decref(doc);

    doc = parse("{\"id\": 17, \"state\": \"stopping\"}");
    buf_reset(&out);
    assert_int_equal(view_cancelled(doc, &out, &err), 0);
    assert_string_equal(buf_str(&out), "stopping 17\n");
    json_decref(doc);
    doc = parse("{\"id\": 9, \"state\": \"cancelled\"}");
    buf_reset(&out);
    assert_int_equal(view_cancelled(doc, &out, &err), 0);
    assert_string_equal(buf_str(&out), "cancelled 9\n");
    json_decref(doc);
    buf_free(&out);
    buf_free(&err);
}

static void test_arguments(void **state)
{
    (void)state;
    int64_t ms;
    assert_int_equal(client_parse_time_ms("2025-11-30", &ms), 0);
    assert_int_equal(ms, 1764460800000LL);
    assert_int_equal(client_parse_time_ms("2025-11-30T10:53", &ms), 0);
    assert_int_equal(ms, 1764499980000LL);
    assert_int_equal(client_parse_time_ms("2025-11-30T10:53:20", &ms), 0);
    assert_int_equal(ms, 1764500000000LL);
    assert_int_equal(client_parse_time_ms("1764500000000", &ms), 0);
    assert_int_equal(ms, 1764500000000LL);
    static const char *const bad[] = {
        "2026-02-30", "2026-13-01", "2026-1-5",         "2026-01-01T24:00", "yesterday",
        "",           "-5",         "2026-01-01 10:00", "2026-01-+1",       "2026-01-01T10:00Z"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        if (client_parse_time_ms(bad[i], &ms) != -EINVAL)
            fail_msg("'%s' was taken as a time", bad[i]);

    int64_t id;
    assert_int_equal(client_parse_id("17", &id), 0);
    assert_int_equal(id, 17);
    assert_int_equal(client_parse_id("0", &id), -EINVAL);
    assert_int_equal(client_parse_id("17x", &id), -EINVAL);

    double v;
    assert_int_equal(client_parse_amount("2.5", &v), 0);
    assert_true(v == 2.5);
    assert_int_equal(client_parse_amount("-1", &v), -EINVAL);
    assert_int_equal(client_parse_amount("8 GPUs", &v), -EINVAL);
    assert_int_equal(client_parse_amount("nan", &v), -EINVAL);

    Buf path = {0};
    buf_puts(&path, "/api/v1/jobs");
    client_query(&path, "state", "pending,running");
    client_query(&path, "team", "r&d team");
    assert_string_equal(buf_str(&path), "/api/v1/jobs?state=pending%2Crunning&team=r%26d%20team");
    buf_free(&path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_cut),
        cmocka_unit_test(test_table_fit),
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_nodes),
        cmocka_unit_test(test_nodes_mismatched),
        cmocka_unit_test(test_teams),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_submitted_cancelled),
        cmocka_unit_test(test_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
