/* pricing.c: lookups in the compiled pricing catalogue (pricing_data.c, generated from
 * data/pricing-catalog.json by tools/pricing_gen.c). */
#include "core/pricing.h"

#include <string.h>

extern const InstancePrice pricing_instances[];
extern const size_t pricing_n_instances;
extern const OwnedServer pricing_owned_servers[];
extern const size_t pricing_n_owned;
extern const double pricing_data_colo_usd_per_kw_month[2];
extern const int pricing_data_depreciation_years[2];

size_t pricing_count(void)
{
    return pricing_n_instances;
}

const InstancePrice *pricing_at(size_t i)
{
    return i < pricing_n_instances ? &pricing_instances[i] : NULL;
}

const InstancePrice *pricing_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < pricing_n_instances; i++)
        if (!strcmp(pricing_instances[i].id, name))
            return &pricing_instances[i];
    for (size_t i = 0; i < pricing_n_instances; i++)
        if (!strcmp(pricing_instances[i].instance_type, name))
            return &pricing_instances[i];
    return NULL;
}

const OwnedServer *pricing_owned(const char *key)
{
    for (size_t i = 0; key && i < pricing_n_owned; i++)
        if (!strcmp(pricing_owned_servers[i].key, key))
            return &pricing_owned_servers[i];
    return NULL;
}

size_t pricing_owned_count(void)
{
    return pricing_n_owned;
}

const OwnedServer *pricing_owned_at(size_t i)
{
    return i < pricing_n_owned ? &pricing_owned_servers[i] : NULL;
}

void pricing_colocation_usd_per_kw_month(double *ret_low, double *ret_high)
{
    *ret_low = pricing_data_colo_usd_per_kw_month[0];
    *ret_high = pricing_data_colo_usd_per_kw_month[1];
}

void pricing_depreciation_years(int *ret_low, int *ret_high)
{
    *ret_low = pricing_data_depreciation_years[0];
    *ret_high = pricing_data_depreciation_years[1];
}
