/* test_web_static.c: the portal's static files (server/web.c): which request paths map
 * to which files (and that no path climbs out of the root or reaches a hidden file),
 * content types by extension, and the replies for a real file, a missing one, a
 * directory and no root at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/web.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void expect_path(const char *url, const char *want)
{
    char *p = web_file_path("/srv/web", url);
    if (!want) {
        if (p)
            fail_msg("%s mapped to %s, expected a refusal", url, p);
        return;
    }
    assert_non_null(p);
    assert_string_equal(p, want);
    free(p);
}

static void test_paths(void **state)
{
    expect_path("/", "/srv/web/index.html");
    expect_path("/web/app.js", "/srv/web/app.js");
    expect_path("/web/views/queue.js", "/srv/web/views/queue.js");
    /* only "/" and "/web/..." are the portal's */
    expect_path("/index.html", NULL);
    expect_path("/api/v1/jobs", NULL);
    expect_path("/web", NULL);
    expect_path("/web/", NULL);
    /* no climbing out, no hidden files, no empty segments, no backslashes */
    expect_path("/web/../admin.token", NULL);
    expect_path("/web/views/../../x", NULL);
    expect_path("/web/..", NULL);
    expect_path("/web/.git/config", NULL);
    expect_path("/web/.hidden", NULL);
    expect_path("/web/a//b.js", NULL);
    expect_path("/web/views/", NULL);
    expect_path("/web/..\\x", NULL);
    expect_path("/web/a\\..\\b", NULL);
}

static void test_types(void **state)
{
    assert_string_equal(web_content_type("/x/index.html"), "text/html; charset=utf-8");
    assert_string_equal(web_content_type("app.js"), "text/javascript; charset=utf-8");
    assert_string_equal(web_content_type("style.css"), "text/css; charset=utf-8");
    assert_string_equal(web_content_type("icon.svg"), "image/svg+xml");
    assert_string_equal(web_content_type("shot.png"), "image/png");
    assert_string_equal(web_content_type("notes"), "application/octet-stream");
    /* a dot in a directory name is not an extension */
    assert_string_equal(web_content_type("/a.js/README"), "application/octet-stream");
}

static void test_reply(void **state)
{
    char root[] = "/tmp/test_web_XXXXXX";
    assert_non_null(mkdtemp(root));
    char path[256];
    snprintf(path, sizeof(path), "%s/index.html", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("<h1>portal</h1>\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/views", root);
    assert_int_equal(mkdir(path, 0755), 0);

    HttpResponse rp = {0};
    web_reply(root, "/", &rp);
    assert_int_equal(rp.status, 200);
    assert_string_equal(rp.content_type, "text/html; charset=utf-8");
    assert_string_equal(buf_str(&rp.body), "<h1>portal</h1>\n");
    buf_free(&rp.body);

    rp = (HttpResponse){0};
    web_reply(root, "/web/missing.js", &rp);
    assert_int_equal(rp.status, 404);
    assert_non_null(strstr(buf_str(&rp.body), "no such page: /web/missing.js"));
    buf_free(&rp.body);

    rp = (HttpResponse){0};
    web_reply(root, "/web/views", &rp); /* a directory is not a page */
    assert_int_equal(rp.status, 404);
    buf_free(&rp.body);

    rp = (HttpResponse){0};
    web_reply(NULL, "/", &rp); /* a server without the portal */
    assert_int_equal(rp.status, 404);
    buf_free(&rp.body);

    rmdir(path);
    snprintf(path, sizeof(path), "%s/index.html", root);
    unlink(path);
    rmdir(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
