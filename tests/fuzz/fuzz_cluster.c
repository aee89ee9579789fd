/* fuzz_cluster.c: cluster specs as `gpuorch server`, plan and sim load them
 * (spec_parse_cluster): a YAML spec (spec_cluster.c), with and without the Kubernetes
 * engine's SPEC_POOLS_ELSEWHERE, or an Alibaba node list CSV (spec_alibaba.c), chosen by
 * the content. */
#include "fuzz.h"

#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    static const unsigned flags[] = {0, SPEC_POOLS_ELSEWHERE};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        Cluster *c = NULL;
        Buf err = {0};
        int r = spec_parse_cluster(text, size, "fuzz", flags[i], &c, &err);
        FUZZ_CHECK(r == 0 || err.len || r == -ENOMEM, "rejected without a message (%d)", r);
        cluster_free(c);
        buf_free(&err);
    }
    free(text);
    return 0;
}
