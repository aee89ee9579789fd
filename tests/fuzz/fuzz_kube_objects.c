/* fuzz_kube_objects.c: the Kubernetes engine's readers of API objects
 * (src/kube/objects.c): any JSON document, as the API server or a watch event would
 * send it, read both as a Node (kube_node_parse, with the default labels and with
 * renamed ones) and as a Pod (kube_pod_parse, MPS replicas under the default resource
 * and under another). */
#include "fuzz.h"

#include "kube/objects.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *o = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!o)
        return 0;
    KubeLabels labels[2];
    kube_labels_defaults(&labels[0]);
    labels[1] = (KubeLabels){.leaf = "example.com/leaf",
                             .spine = "example.com/spine",
                             .fabric = "example.com/fabric",
                             .tier = "example.com/tier",
                             .price = "example.com/price",
                             .interconnect = "example.com/interconnect"};
    for (size_t i = 0; i < 2; i++) {
        KubeNode n;
        Buf why = {0};
        if (kube_node_parse(o, &labels[i], &n, &why) == 0)
            kube_node_free(&n);
        buf_free(&why);
    }
    static const char *const shared[] = {NULL, "example.com/gpu-mps"};
    for (size_t i = 0; i < 2; i++) {
        KubePod p;
        Buf why = {0};
        if (kube_pod_parse(o, shared[i], &p, &why) == 0)
            kube_pod_free(&p);
        buf_free(&why);
    }
    json_decref(o);
    return 0;
}
