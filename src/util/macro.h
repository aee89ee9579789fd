/* macro.h: small language helpers shared by every layer: cleanup attributes (the
 * systemd idiom), array sizes, min/max, the struct around a member. Header-only, no system headers
 * beyond libc. */
#pragma once

#include <stddef.h>
#include <stdlib.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b)     ((a) < (b) ? (a) : (b))
#define MAX(a, b)     ((a) > (b) ? (a) : (b))
#define UNUSED        __attribute__((unused))
/* A macro's value as a string literal. */
#define STRINGIFY(x)  STRINGIFY_(x)
#define STRINGIFY_(x) #x
/* The struct of type t whose member m p points to. */
#define CONTAINER_OF(p, t, m) ((t *)(void *)((char *)(p)-offsetof(t, m)))

static inline void freep(void *p)
{
    free(*(void **)p);
}

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)

/* Hand a cleanup-managed pointer to someone else: returns it and clears the variable. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) take_ptr_tmp_ = (p);                                                         \
        (p) = NULL;                                                                                \
        take_ptr_tmp_;                                                                             \
    })

/* Grow *arr (of *cap elements) so that it holds at least need elements. 0 or -ENOMEM. */
int grow_array(void **arr, size_t *cap, size_t need, size_t elem_size);
#define GROW(arr, cap, need) grow_array((void **)&(arr), &(cap), (need), sizeof(*(arr)))
