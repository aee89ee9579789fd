/* test_catalog.c: the compiled-in GPU catalogue (core/catalog.c and the table that
 * tools/catalog_gen.c makes of data/gpu-catalog.json). Every model the scheduler must
 * know is present and found under the names real tools print (nvidia-smi, NVML,
 * cloud instance docs); no alias is ambiguous between two models; the facts the MIG
 * code relies on hold for every model (profiles ascending by memory, starts inside
 * the GPU, sane limits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"

#include <stdio.h>
#include <string.h>

static const GpuModel *must_find(const char *name)
{
    const GpuModel *m = catalog_find(name);
    if (!m)
        fail_msg("catalog_find(\"%s\") = NULL", name);
    return m;
}

static void expect_alias(const char *alias, const char *canonical)
{
    const GpuModel *m = must_find(alias);
    if (strcmp(m->name, canonical) != 0)
        fail_msg("catalog_find(\"%s\") = %s, expected %s", alias, m->name, canonical);
}

static void test_required_models(void **state)
{
    static const struct {
        const char *name;
        uint32_t memory_mib;
        bool mig;
    } want[] = {
        {"A30", 24576, true},
        {"A100-40GB", 40960, true},
        {"A100-80GB", 81920, true},
        {"H100-80GB-SXM5", 81920, true},
        {"H100-80GB-PCIe", 81920, true},
        {"H100-94GB-NVL", 96256, true},
        {"H200-141GB", 144384, true},
        {"B200-180GB", 184320, true},
        {"L4", 24576, false},
        {"L40S", 49152, false},
        {"T4", 16384, false},
        {"V100-16GB", 16384, false},
        {"V100-32GB", 32768, false},
        {"A10", 24576, false},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const GpuModel *m = must_find(want[i].name);
        assert_string_equal(m->name, want[i].name);
        assert_int_equal(m->memory_mib, want[i].memory_mib);
        assert_int_equal(gpu_model_has_mig(m), want[i].mig);
        assert_true(m->sms > 0);
    }
    /* MIG geometry of the two families */
    assert_int_equal(must_find("A30")->mig_slots, 4);
    assert_int_equal(must_find("A30")->mig_compute_slices, 4);
    assert_int_equal(must_find("H100-80GB-SXM5")->mig_slots, 8);
    assert_int_equal(must_find("H100-80GB-SXM5")->mig_compute_slices, 7);
    assert_int_equal(must_find("H100-80GB-SXM5")->nvlink_generation, 4);
    assert_int_equal(must_find("L4")->nvlink_generation, 0);
}

static void test_aliases(void **state)
{
    expect_alias("A100-SXM4-80GB", "A100-80GB");
    expect_alias("NVIDIA A100-SXM4-80GB", "A100-80GB");
    expect_alias("A100 80GB PCIe", "A100-80GB");
    expect_alias("A100-SXM4-40GB", "A100-40GB");
    expect_alias("H100", "H100-80GB-SXM5");
    expect_alias("H100-SXM5-80GB", "H100-80GB-SXM5");
    expect_alias("NVIDIA H100 80GB HBM3", "H100-80GB-SXM5");
    expect_alias("H100 PCIe", "H100-80GB-PCIe");
    expect_alias("NVIDIA H100 PCIe", "H100-80GB-PCIe");
    expect_alias("H100 NVL", "H100-94GB-NVL");
    expect_alias("NVIDIA H100 NVL", "H100-94GB-NVL");
    expect_alias("H200", "H200-141GB");
    expect_alias("B200", "B200-180GB");
    expect_alias("Tesla T4", "T4");
    expect_alias("tesla t4", "T4");
    expect_alias("V100M32", "V100-32GB");
    expect_alias("Tesla V100-SXM2-16GB", "V100-16GB");
    expect_alias("V100", "V100-16GB");
    expect_alias("NVIDIA L4", "L4");
    expect_alias("L40S", "L40S");
    expect_alias("NVIDIA A10", "A10");
    expect_alias("A30-PCIE-24GB", "A30");
    /* case, spaces and dashes do not matter */
    expect_alias("h100-80gb-sxm5", "H100-80GB-SXM5");
    expect_alias("a100 80 gb", "A100-80GB");
}

/* Both prefixes together, as cloud consoles write them ("NVIDIA Tesla T4"). */
static void test_both_prefixes(void **state)
{
    expect_alias("NVIDIA Tesla T4", "T4");
    expect_alias("NVIDIA Tesla V100-SXM2-16GB", "V100-16GB");
}

static void test_unknown(void **state)
{
    assert_null(catalog_find(NULL));
    assert_null(catalog_find(""));
    assert_null(catalog_find("---"));
    assert_null(catalog_find("NVIDIA"));
    assert_null(catalog_find("Tesla"));
    assert_null(catalog_find("RTX 4090"));
    assert_null(catalog_find("H1000"));
    assert_null(catalog_find("A100-160GB"));
    assert_null(catalog_model(catalog_count()));
}

/* Every name and alias leads back to its own model: none is shared by two. */
static void test_no_ambiguous_alias(void **state)
{
    assert_true(catalog_count() >= 14);
    for (size_t i = 0; i < catalog_count(); i++) {
        const GpuModel *m = catalog_model(i);
        assert_ptr_equal(catalog_find(m->name), m);
        for (const char *const *a = m->aliases; a && *a; a++)
            if (catalog_find(*a) != m)
                fail_msg("alias \"%s\" of %s finds %s", *a, m->name, catalog_find(*a)->name);
    }
}

static void test_profiles(void **state)
{
    char order[512] = "";
    for (size_t i = 0; i < catalog_count(); i++) {
        const GpuModel *m = catalog_model(i);
        if (!gpu_model_has_mig(m)) {
            assert_int_equal(m->n_profiles, 0);
            continue;
        }
        assert_true(m->mig_slots <= MIG_MAX_SLOTS);
        assert_true(m->n_profiles > 0 && m->n_profiles <= MIG_MAX_PROFILES);
        assert_true(m->mig_compute_slices > 0);
        bool whole = false;
        for (int p = 0; p < m->n_profiles; p++) {
            const MigProfile *pr = &m->profiles[p];
            if (p > 0 && pr->memory_mib < m->profiles[p - 1].memory_mib)
                snprintf(order + strlen(order), sizeof(order) - strlen(order),
                         " %s: %s (%u MiB) after %s (%u MiB);", m->name, pr->name, pr->memory_mib,
                         m->profiles[p - 1].name, m->profiles[p - 1].memory_mib);
            assert_true(pr->memory_mib > 0 && pr->memory_mib <= m->memory_mib);
            assert_true(pr->compute_slices >= 1 && pr->compute_slices <= m->mig_compute_slices);
            assert_true(pr->memory_slices >= 1 && pr->memory_slices <= m->mig_slots);
            assert_true(pr->max_count >= 1);
            assert_true(pr->start_mask != 0);
            for (int s = 0; s < 8; s++)
                if ((pr->start_mask >> s) & 1)
                    assert_true(s + pr->memory_slices <= m->mig_slots);
            assert_int_equal(pr->media_extension, strstr(pr->name, "+me") != NULL);
            assert_int_equal(catalog_profile_index(m, pr->name), p);
            whole |= pr->compute_slices == m->mig_compute_slices && pr->start_mask == 1;
        }
        assert_true(whole); /* a profile takes the whole GPU */
    }
    const GpuModel *h = must_find("H100");
    assert_true(catalog_profile_index(h, "1g.10gb") >= 0);
    assert_int_equal(catalog_profile_index(h, "1G.10GB"), catalog_profile_index(h, "1g.10gb"));
    assert_int_equal(catalog_profile_index(h, "1g.5gb"), -1);
    assert_int_equal(catalog_profile_index(h, NULL), -1);
    assert_int_equal(catalog_profile_index(must_find("L4"), "1g.10gb"), -1);
    if (order[0])
        fail_msg("profiles not ascending by memory:%s", order);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_required_models), cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_unknown),         cmocka_unit_test(test_no_ambiguous_alias),
        cmocka_unit_test(test_profiles),        cmocka_unit_test(test_both_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
