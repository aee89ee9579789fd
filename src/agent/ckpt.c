/* ckpt.c: a rank's checkpoint marker read, and the short history of the steps it
 * marked (ckpt.h). */
#include "agent/ckpt.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ckpt_marker_parse(const char *text, int64_t *ret_step, char **ret_path, Buf *err)
{
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *digits = p;
    int64_t step = 0;
    while (isdigit((unsigned char)*p)) {
        if (p - digits >= 18) {
            buf_puts(err, "the step has more than 18 digits");
            return -EINVAL;
        }
        step = step * 10 + (*p++ - '0');
    }
    if (p == digits || (*p != ' ' && *p != '\t')) {
        buf_puts(err, "it must be one line 'STEP PATH': the step (a whole number), a "
                      "space, and the path this rank resumes the step from");
        return -EINVAL;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    size_t len = strcspn(p, "\r\n");
    while (len > 0 && isspace((unsigned char)p[len - 1]))
        len--;
    if (!len) {
        buf_puts(err, "the step has no path after it ('STEP PATH')");
        return -EINVAL;
    }
    char *path = strndup(p, len);
    if (!path)
        return -ENOMEM;
    *ret_step = step;
    *ret_path = path;
    return 0;
}

int64_t ckpt_marker_run(const char *text)
{
    for (const char *p = strchr(text, '\n'); p; p = strchr(p, '\n')) {
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "run", 3) || (p[3] && !strchr(" \t\r\n", p[3])))
            continue;
        p += 3;
        while (*p == ' ' || *p == '\t')
            p++;
        int64_t run = 0;
        const char *digits = p;
        while (isdigit((unsigned char)*p) && p - digits < 18)
            run = run * 10 + (*p++ - '0');
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        return p == digits || run < 1 || (*p && *p != '\n') ? -EINVAL : run;
    }
    return 0;
}

void ckpt_history_add(CkptHistory *h, int64_t step, int64_t ms, char *path)
{
    size_t at = h->n;
    for (size_t i = 0; i < h->n; i++)
        if (h->steps[i].step == step)
            at = i;
    if (at < h->n) {
        free(h->steps[at].path);
    } else if (h->n == CKPT_HISTORY) {
        at = 0;
        free(h->steps[0].path);
    } else {
        h->n++;
    }
    /* close the gap so the entries stay oldest first, then append */
    memmove(&h->steps[at], &h->steps[at + 1], (h->n - 1 - at) * sizeof(h->steps[0]));
    h->steps[h->n - 1] = (CkptStep){.step = step, .ms = ms, .path = path};
}

void ckpt_history_free(CkptHistory *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->steps[i].path);
    h->n = 0;
}

const CkptStep *ckpt_history_last(const CkptHistory *h)
{
    return h->n ? &h->steps[h->n - 1] : NULL;
}

json_t *ckpt_history_json(const CkptHistory *h)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < h->n; i++) {
        const CkptStep *s = &h->steps[i];
        if (json_array_append_new(a, json_pack("{sI ss sI}", "step", (json_int_t)s->step, "path",
                                               s->path, "ms", (json_int_t)s->ms)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

void ckpt_history_from_json(json_t *list, CkptHistory *ret)
{
    *ret = (CkptHistory){0};
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o)
    {
        json_t *step = json_object_get(o, "step");
        const char *path = json_string_value(json_object_get(o, "path"));
        if (!json_is_integer(step) || json_integer_value(step) < 0 || !path || !*path)
            continue;
        char *copy = strdup(path);
        if (copy)
            ckpt_history_add(ret, json_integer_value(step),
                             json_integer_value(json_object_get(o, "ms")), copy);
    }
}
