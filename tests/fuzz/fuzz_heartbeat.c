/* fuzz_heartbeat.c: the server's heartbeat reply as the agent reads it
 * (src/agent/proto.c: proto_reply_parse), then what the agent does with each part: every
 * GPU's wanted MIG layout against a MIG-capable model of the catalogue, and every
 * worker's assignment (src/agent/assign.c: assign_parse). */
#include "fuzz.h"

#include "agent/assign.h"
#include "agent/proto.h"
#include "core/catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *body = fuzz_text(data, size);
    HeartbeatReply rep = {0};
    Buf err = {0};
    if (proto_reply_parse(body, size, &rep, &err) == 0) {
        const GpuModel *m = catalog_find("A100-80GB");
        FUZZ_CHECK(m, "the catalogue has no A100-80GB");
        for (size_t i = 0; i < rep.n_mig; i++) {
            MigLayout l;
            buf_reset(&err);
            (void)proto_mig_layout(&rep.mig[i], m, &l, &err);
            FUZZ_CHECK(proto_mig_want(&rep, rep.mig[i].index), "MIG want %zu not found", i);
        }
        for (size_t i = 0; i < rep.n_workers; i++) {
            Assignment a;
            buf_reset(&err);
            if (assign_parse(rep.workers[i].spec, &a, &err) == 0)
                assign_free(&a);
        }
    }
    proto_reply_free(&rep);
    buf_free(&err);
    free(body);
    return 0;
}
