/* fuzz_web_path.c: the portal's paths (src/server/web.c), the one part of routing that
 * takes a request path to the file system: any path the client sends (after
 * libmicrohttpd's unescaping, so as raw bytes up to a NUL) either maps under the root
 * or is refused. The root is a temporary directory with index.html and web/app.js,
 * beside a secret.txt the portal must never serve; web_reply runs for real there. */
#include "fuzz.h"

#include "server/web.h"

#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET "not for the portal"
#define INDEX  "<html></html>"
#define APP    "export {};"

static char top[] = "/tmp/gpuorch-fuzz-web-XXXXXX";
static char root[sizeof(top) + 8];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    FUZZ_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

static void cleanup(void)
{
    char p[sizeof(root) + 32];
    snprintf(p, sizeof(p), "%s/app.js", root);
    unlink(p);
    snprintf(p, sizeof(p), "%s/index.html", root);
    unlink(p);
    rmdir(root);
    snprintf(p, sizeof(p), "%s/secret.txt", top);
    unlink(p);
    rmdir(top);
}

static void setup(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    FUZZ_CHECK(mkdtemp(top), "cannot make a temporary directory");
    snprintf(root, sizeof(root), "%s/root", top);
    FUZZ_CHECK(mkdir(root, 0700) == 0, "cannot make %s", root);
    atexit(cleanup);
    char p[sizeof(root) + 32];
    snprintf(p, sizeof(p), "%s/index.html", root);
    put(p, INDEX);
    snprintf(p, sizeof(p), "%s/app.js", root);
    put(p, APP);
    snprintf(p, sizeof(p), "%s/secret.txt", top);
    put(p, SECRET);
}

/* Below root, by segments that are neither empty nor start with a dot. */
static void check_path(const char *url, const char *path)
{
    size_t n = strlen(root);
    FUZZ_CHECK(!strncmp(path, root, n) && path[n] == '/', "'%s' maps outside the root: %s", url,
               path);
    const char *seg = path + n + 1;
    for (;;) {
        size_t len = strcspn(seg, "/");
        FUZZ_CHECK(len && seg[0] != '.', "'%s' maps to a bad segment: %s", url, path);
        if (!seg[len])
            break;
        seg += len + 1;
    }
    FUZZ_CHECK(!strchr(path, '\\'), "'%s' maps to a backslash: %s", url, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    char *url = fuzz_text(data, size);
    char *path = web_file_path(root, url);
    if (path)
        check_path(url, path);
    (void)web_content_type(url);
    HttpResponse rp = {0};
    web_reply(root, url, &rp);
    FUZZ_CHECK(rp.status == 200 || rp.status == 404 || rp.status == 500, "status %d for '%s'",
               rp.status, url);
    FUZZ_CHECK(rp.status != 200 || path, "200 for '%s', which maps nowhere", url);
    FUZZ_CHECK(rp.status != 200 || !strcmp(buf_str(&rp.body), INDEX) ||
                   !strcmp(buf_str(&rp.body), APP),
               "'%s' served something else than the root's files: %s", url, buf_str(&rp.body));
    buf_free(&rp.body);
    free(path);
    free(url);
    return 0;
}
