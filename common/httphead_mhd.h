/* httphead_mhd — httphead's rules on a libmicrohttpd request: the parsed head gathered, at most
   HTTPHEAD_MHD_FIELDS fields, and checked (docs/design.md, One message, one reading). */
#ifndef CDNCA_HTTPHEAD_MHD_H
#define CDNCA_HTTPHEAD_MHD_H

#include <microhttpd.h>

#include "httphead.h"

/* The most header fields a request may have. */
#define HTTPHEAD_MHD_FIELDS 100

/* Check the head of the request on c, of HTTP version version (as libmicrohttpd gives it): 0, or
   -1 with *v filled (also for more than HTTPHEAD_MHD_FIELDS fields, and when out of memory: 500).
   A refused request is answered at once and its connection closed: its body, if any, cannot be
   told apart from a next request. */
int httphead_mhd_check(struct MHD_Connection *c, const char *version, struct httphead_verdict *v);

#endif
