/*
 * status_assets — /server-status's script and style sheet (status.js,
 * status.css beside this file), in the binary byte for byte: the
 * assembler's .incbin reads them at build time (paths from the top of the
 * tree, where make runs; gatling.mk makes this object depend on them), so
 * they stay files a reader and a linter can open, and the page needs
 * nothing from disk or another origin.  Each ends with a NUL.
 */
#include "status_int.h"

/* ELF's sections (Linux, the BSDs); a Mach-O build would name __TEXT,__const */
#define STATUS_ASSET(sym, file)                  \
    __asm__(".pushsection .rodata\n"              \
            ".globl " sym "\n"                    \
            ".type " sym ", @object\n"            \
            ".balign 16\n" sym ":\n"              \
            ".incbin \"" file "\"\n"              \
            ".byte 0\n"                           \
            ".size " sym ", . - " sym "\n"        \
            ".popsection\n")

STATUS_ASSET("status_js", "gatling/route/status.js");
STATUS_ASSET("status_css", "gatling/route/status.css");
