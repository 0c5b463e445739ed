/* Reason phrases and error pages: see response.h. */
#include "response.h"

#include <string.h>

const char *resp_grpc_code(int code)
{
    static const char *const names[17] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"};
    return code >= 0 && code <= 16 ? names[code] : "?";
}

const char *resp_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 415: return "Unsupported Media Type";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 425: return "Too Early";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

void resp_page(hbuf_t *b, int status)
{
    for (int i = 0; i < 2; i++) {
        hb_puts(b, i ? "</title></head>\n<body><h1>" : "<!DOCTYPE html>\n<html><head><title>");
        hb_num(b, (uint64_t)status);
        hb_puts(b, " ");
        hb_puts(b, resp_reason(status));
    }
    hb_puts(b, "</h1></body></html>\n");
}

int resp_conn_specific(const char *n, size_t len)
{
    switch (len) { /* every response field is asked: the length first */
    case 7: return !memcmp(n, "upgrade", 7);
    case 10: return !memcmp(n, "connection", 10) || !memcmp(n, "keep-alive", 10);
    case 16: return !memcmp(n, "proxy-connection", 16);
    case 17: return !memcmp(n, "transfer-encoding", 17);
    default: return 0;
    }
}
