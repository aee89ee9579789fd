/* failmemo.c: the cycle's memory of failed placements (failmemo.h). Entries live for
 * one cycle; the by-shape heads are valid only where their cycle is the current one,
 * so a new cycle costs nothing per shape. */
#include "core/failmemo.h"

#include "util/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

int failmemo_init(FailMemo *m, size_t n_shapes, size_t why_len)
{
    *m = (FailMemo){.n_shapes = n_shapes, .why_len = why_len};
    size_t ns = n_shapes ? n_shapes : 1;
    m->head_cycle = calloc(ns, sizeof(*m->head_cycle));
    m->head = calloc(ns, sizeof(*m->head));
    if (!m->head_cycle || !m->head) {
        failmemo_free(m);
        return -ENOMEM;
    }
    m->cycle = 1;
    return 0;
}

void failmemo_free(FailMemo *m)
{
    free(m->head_cycle);
    free(m->head);
    free(m->e);
    free(m->text);
    free(m->p);
    free(m->bits);
    *m = (FailMemo){0};
}

void failmemo_cycle(FailMemo *m)
{
    m->cycle++;
    m->n_e = 0;
    m->n_p = 0;
    m->n_bits = 0;
}

uint64_t failmemo_fresh(FailMemo *m)
{
    return ++m->stamp;
}

static uint64_t hash_bytes(const uint8_t *b, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ n; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t failmemo_pattern(FailMemo *m, const uint8_t *bits, size_t n)
{
    uint64_t h = hash_bytes(bits, n);
    for (size_t i = 0; i < m->n_p; i++) {
        const FailPattern *p = &m->p[i];
        if (p->hash == h && p->n == n && memcmp(m->bits + p->at, bits, n) == 0)
            return p->stamp;
    }
    uint64_t stamp = failmemo_fresh(m);
    if (GROW(m->p, m->p_cap, m->n_p + 1) < 0 || GROW(m->bits, m->bits_cap, m->n_bits + n + 1) < 0)
        return stamp; /* not kept: later jobs of this pattern get stamps of their own */
    memcpy(m->bits + m->n_bits, bits, n);
    m->p[m->n_p++] = (FailPattern){.hash = h, .stamp = stamp, .n = n, .at = m->n_bits};
    m->n_bits += n;
    return stamp;
}

/* The index of shape's entry under stamp, or NONE. */
static uint32_t entry(const FailMemo *m, int32_t shape, uint64_t stamp)
{
    if (shape < 0 || (size_t)shape >= m->n_shapes || m->head_cycle[shape] != m->cycle)
        return NONE;
    for (uint32_t i = m->head[shape]; i != NONE; i = m->e[i].next)
        if (m->e[i].stamp == stamp)
            return i;
    return NONE;
}

static char *why_of(const FailMemo *m, uint32_t i)
{
    return m->text + (size_t)i * m->why_len;
}

const char *failmemo_find(const FailMemo *m, int32_t shape, uint64_t stamp, uint32_t workers)
{
    uint32_t i = entry(m, shape, stamp);
    return i != NONE && workers >= m->e[i].workers ? why_of(m, i) : NULL;
}

static void set_why(const FailMemo *m, uint32_t i, const char *why)
{
    char *to = why_of(m, i);
    size_t n = strlen(why);
    if (n >= m->why_len)
        n = m->why_len - 1;
    memcpy(to, why, n);
    to[n] = '\0';
}

void failmemo_note(FailMemo *m, int32_t shape, uint64_t stamp, uint32_t workers, const char *why)
{
    if (shape < 0 || (size_t)shape >= m->n_shapes || !m->why_len)
        return;
    uint32_t i = entry(m, shape, stamp);
    if (i != NONE) {
        if (workers < m->e[i].workers) {
            m->e[i].workers = workers;
            set_why(m, i, why);
        }
        return;
    }
    if (GROW(m->e, m->e_cap, m->n_e + 1) < 0)
        return;
    if (m->text_cap < m->e_cap * m->why_len) {
        char *t = realloc(m->text, m->e_cap * m->why_len);
        if (!t)
            return;
        m->text = t;
        m->text_cap = m->e_cap * m->why_len;
    }
    i = (uint32_t)m->n_e++;
    bool fresh_head = m->head_cycle[shape] != m->cycle;
    m->e[i] =
        (FailEntry){.stamp = stamp, .workers = workers, .next = fresh_head ? NONE : m->head[shape]};
    set_why(m, i, why);
    m->head[shape] = i;
    m->head_cycle[shape] = m->cycle;
}
