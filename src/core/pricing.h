/* pricing.h: list prices of cloud GPU instances and the facts of owning a GPU server,
 * compiled in from data/pricing-catalog.json (which tools/pricing_from_shared.py
 * derives from ../shared/data/pricing_catalog.json, keeping each value's source). Money
 * in micro-dollars; a price the catalogue does not know is PRICE_UNKNOWN. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PRICE_UNKNOWN (-1)

typedef struct InstancePrice {
    const char *id;            /* "aws/p5.48xlarge" */
    const char *provider;      /* "aws", "gcp", "azure", "lambda", "coreweave" */
    const char *instance_type; /* "p5.48xlarge" */
    const char *gpu_model;     /* as the provider names it ("H100-SXM5-80GB") */
    uint8_t gpus;
    /* per instance-hour */
    int64_t on_demand_micro_usd;
    int64_t reserved_1y_micro_usd;
    int64_t reserved_3y_micro_usd;
    int64_t spot_micro_usd; /* a typical spot price */
    int32_t notice_s;       /* spot interruption notice; -1 unknown */
    const char *as_of;
} InstancePrice;

size_t pricing_count(void);
const InstancePrice *pricing_at(size_t i);
/* By id ("aws/p5.48xlarge") or instance type ("p5.48xlarge", the first provider's when
 * two share it); NULL when unknown. */
const InstancePrice *pricing_find(const char *name);

/* Owning an 8-GPU server (the defaults of `gpuorch tco`). */
typedef struct OwnedServer {
    const char *key;       /* "hgx_h100_8gpu" */
    const char *gpu_model; /* our catalogue name */
    uint8_t gpus;
    int64_t capex_micro_usd;      /* all-in per node, fabric included; PRICE_UNKNOWN */
    int64_t capex_list_micro_usd; /* the vendor's list price of the box alone */
    double power_kw_max;
    double power_kw_typical; /* an assumption the catalogue marks unverified */
} OwnedServer;

const OwnedServer *pricing_owned(const char *key);
size_t pricing_owned_count(void);
const OwnedServer *pricing_owned_at(size_t i);
/* Colocation per kW-month (low and high of the quoted range) and the depreciation
 * periods commonly used (years). */
void pricing_colocation_usd_per_kw_month(double *ret_low, double *ret_high);
void pricing_depreciation_years(int *ret_low, int *ret_high);
