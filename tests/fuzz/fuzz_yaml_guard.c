/* fuzz_yaml_guard.c: the YAML guard (src/spec/yaml_guard.c) and what it guards: any
 * text it lets through is built into documents by libfyaml (field_yaml_open and
 * field_yaml_next, as every reader of outside YAML does), so a hang, a blow-up or a
 * crash that the guard lets pass shows here, whatever reader would have met it. */
#include "fuzz.h"

#include "spec/field.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    Buf err = {0};
    FieldCtx x;
    field_ctx_init(&x, "fuzz", "field", &err);
    int r = yaml_guard(&x, text, size);
    FUZZ_CHECK(r == 0 || r == -ENOMEM || (r == -EINVAL && err.len), "guard said %d", r);
    if (r == 0) {
        FieldYaml y;
        if (field_yaml_open(&y, &x, text, size) == 0) {
            for (unsigned docs = 0; field_yaml_next(&y) > 0 && docs < 1000; docs++)
                (void)fy_document_root(y.doc);
            field_yaml_close(&y);
        }
    }
    buf_free(&err);
    free(text);
    return 0;
}
