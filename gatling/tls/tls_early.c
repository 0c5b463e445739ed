/* Early data (0-RTT): see tls_early.h. */
#include "tls_early.h"

const optdef_t tls_early_opts[] = {
    OPT_ROW_NUM(0, "early-data", OPT_NUMBER, 0, 1 << 24, early_data,
                "not a number of entries (0-16777216)",
        "  --early-data n  accept TLS 1.3 and QUIC early data (0-RTT) from returning\n"
        "            clients for requests safe to replay (GET, HEAD), remembering up to\n"
        "            n ClientHellos (shared by -W's workers) to refuse replays; a full\n"
        "            table refuses early data (default 0: off; 65536 takes 1 MB)\n"),
    OPT_LAST};
