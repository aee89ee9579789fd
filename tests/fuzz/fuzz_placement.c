/* fuzz_placement.c: stored placements, as the server reads them back at a start
 * (src/server/placement_json.c: placement_from_json against the cluster), written again
 * (placement_to_json) and read once more: the second reading must give the same text.
 * The cluster has MIG-capable A100s and plain L4s, so whole GPUs, slices and shares
 * are all grants a stored placement can name (nodes a100-0, a100-1, l4-0). */
#include "fuzz.h"

#include "server/placement_json.h"
#include "spec/spec.h"

static const char cluster_yaml[] =
    "name: fuzz\n"
    "pools:\n"
    "  - name: a100\n"
    "    tier: owned\n"
    "    nodes: 2\n"
    "    node: {gpu_model: A100-80GB, gpus: 8, cpus: 64,\n"
    "           memory_gib: 512, mig: true}\n"
    "  - name: l4\n"
    "    tier: owned\n"
    "    nodes: 1\n"
    "    node: {gpu_model: L4, gpus: 4, cpus: 32, memory_gib: 128}\n";

static Cluster *cluster(void)
{
    static Cluster *c;
    if (!c) {
        Buf err = {0};
        int r = spec_parse_cluster_yaml(cluster_yaml, strlen(cluster_yaml), "fuzz", &c, &err);
        FUZZ_CHECK(r == 0, "the target's cluster does not parse: %s", buf_str(&err));
        buf_free(&err);
    }
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    Cluster *c = cluster();
    Placement p = {0}, q = {0};
    Buf err = {0}, a = {0}, b = {0};
    if (placement_from_json(c, text, &p, &err) == 0) {
        placement_to_json(c, &p, &a);
        buf_reset(&err);
        int r = placement_from_json(c, buf_str(&a), &q, &err);
        FUZZ_CHECK(r == 0, "a written placement does not read back: %s\n%s", buf_str(&err),
                   buf_str(&a));
        placement_to_json(c, &q, &b);
        FUZZ_CHECK(!strcmp(buf_str(&a), buf_str(&b)),
                   "the placement changes when read back:\n%s\n%s", buf_str(&a), buf_str(&b));
    }
    placement_free(&p);
    placement_free(&q);
    buf_free(&err);
    buf_free(&a);
    buf_free(&b);
    free(text);
    return 0;
}
