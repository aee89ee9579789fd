/* fault_malloc.h: FAULT_PROCESS for a test binary (fault_fixture.h): its malloc, calloc,
 * realloc, strdup and strndup are interposed here and fail as the plan says, on the
 * arming thread, once main has set in_main; every other call goes on to the next
 * definition (ASan's, or libc's). Include it in one file of the binary, after
 * fault_fixture.h. */
#pragma once

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void (*next_free)(void *);
/* dlsym may allocate while it resolves: from here, never freed */
static char boot[4096];
static size_t boot_used;
/* not thread-local: the dynamic linker allocates before this binary's thread-local
 * storage is there (the plan is looked at only once main has begun) */
static bool resolving, in_main;

/* Called while ASan itself starts, before its shadow memory is there: not instrumented. */
#define EARLY __attribute__((no_sanitize_address))

EARLY static void *boot_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof(boot))
        return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

EARLY static bool resolve(void)
{
    if (next_free)
        return true;
    if (resolving)
        return false;
    resolving = true;
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    resolving = false;
    return next_free != NULL;
}

EARLY void *malloc(size_t n)
{
    if (!resolve())
        return boot_alloc(n);
    return in_main && fault_now(FAULT_PROCESS) ? NULL : next_malloc(n);
}

EARLY void *calloc(size_t n, size_t size)
{
    if (!resolve()) {
        void *p = n && size > SIZE_MAX / n ? NULL : boot_alloc(n * size);
        return p ? memset(p, 0, n * size) : NULL;
    }
    return in_main && fault_now(FAULT_PROCESS) ? NULL : next_calloc(n, size);
}

EARLY void *realloc(void *p, size_t n)
{
    if (!resolve())
        return NULL;
    return in_main && fault_now(FAULT_PROCESS) ? NULL : next_realloc(p, n);
}

EARLY void free(void *p)
{
    if ((char *)p >= boot && (char *)p < boot + sizeof(boot))
        return;
    if (p && resolve())
        next_free(p);
}

char *strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

char *strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}
