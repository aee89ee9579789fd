/* catalog.c: lookups over the compiled-in catalogue (catalog_data.c is generated). */
#include "core/catalog.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

extern const GpuModel catalog_models[];
extern const size_t catalog_models_count;

size_t catalog_count(void)
{
    return catalog_models_count;
}

const GpuModel *catalog_model(size_t i)
{
    return i < catalog_models_count ? &catalog_models[i] : NULL;
}

void catalog_normalize_name(const char *in, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *in && n + 1 < outlen; in++)
        if (isalnum((unsigned char)*in))
            out[n++] = (char)toupper((unsigned char)*in);
    out[n] = '\0';
    /* "NVIDIA Tesla T4": strip vendor and family prefixes, in any order */
    static const char *const prefixes[] = {"NVIDIA", "TESLA"};
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
            size_t pl = strlen(prefixes[i]);
            if (strncmp(out, prefixes[i], pl) == 0 && out[pl]) {
                memmove(out, out + pl, strlen(out + pl) + 1);
                again = true;
            }
        }
    }
}

const GpuModel *catalog_find(const char *name)
{
    if (!name)
        return NULL;
    char want[64], have[64];
    catalog_normalize_name(name, want, sizeof(want));
    if (!want[0])
        return NULL;
    for (size_t i = 0; i < catalog_models_count; i++) {
        const GpuModel *m = &catalog_models[i];
        catalog_normalize_name(m->name, have, sizeof(have));
        if (strcmp(want, have) == 0)
            return m;
        for (const char *const *a = m->aliases; a && *a; a++) {
            catalog_normalize_name(*a, have, sizeof(have));
            if (strcmp(want, have) == 0)
                return m;
        }
    }
    return NULL;
}

int catalog_profile_index(const GpuModel *m, const char *profile)
{
    if (!profile)
        return -1;
    for (int i = 0; i < m->n_profiles; i++)
        if (strcasecmp(m->profiles[i].name, profile) == 0)
            return i;
    return -1;
}
