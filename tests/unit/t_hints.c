/*
 * .early-hints files: which lines become the 103's Link value, and the
 * bound on it (a value that would not fit is left out, never cut).
 */
#include "hints.h"
#include "tap.h"

static const char *parse(const char *text, size_t cap)
{
    static char out[HINTS_MAX];
    hints_parse(text, strlen(text), out, cap);
    return out;
}

int main(void)
{
    is_str(parse("</a.css>; rel=preload; as=style\n", HINTS_MAX),
           "</a.css>; rel=preload; as=style", "one line");
    is_str(parse("</a.css>; rel=preload\r\nLink: </b.js>; rel=preload\n", HINTS_MAX),
           "</a.css>; rel=preload, </b.js>; rel=preload", "two lines, CRLF, a Link: prefix");
    is_str(parse("  lInK:\t</a>; rel=preload  \n", HINTS_MAX), "</a>; rel=preload",
           "the prefix in any case, blanks trimmed");
    is_str(parse("# a comment\n\n   \n</a>; rel=preload", HINTS_MAX), "</a>; rel=preload",
           "comments and blank lines skipped, a last line without newline");
    is_str(parse("</a>\x01; rel=preload\n</b>; rel=preload\n", HINTS_MAX), "</b>; rel=preload",
           "a line with a control byte skipped");
    is_str(parse("</\xc3\xa4>; rel=preload\n</b>\n", HINTS_MAX), "</b>",
           "a line with a byte over 0x7e skipped");
    is_str(parse("Link:\n", HINTS_MAX), "", "an empty Link: is nothing");
    is_int(hints_parse("", 0, (char[4]){0}, 4), 0, "an empty file is nothing");
    is_str(parse("</abc>\n</def>\n", 15), "</abc>, </def>", "a value that just fits (14 + NUL)");
    is_str(parse("</abc>\n</def>\n", 14), "</abc>", "one that does not is left out, not cut");
    is_str(parse("</abcdefghijklmnop>\n</b>\n", 8), "", "nor are the ones after it");
    /* --check's line by line (hints_line): what parse leaves out, said */
    size_t len = 0;
    const char *why = NULL;
    is_int(hints_line("# c", 3, &len, &why), 0, "check: a comment is fine");
    is_int(hints_line("Link: </a>; rel=preload", 23, &len, &why), 0, "check: a link-value");
    is_int((int)len, 17, "check: ... counted");
    is_int(hints_line("</a>\x01", 5, &len, &why), -1, "check: a control byte is said");
    is_int(hints_line("text", 4, &len, &why), -1, "check: not a link-value is said");
    char big[HINTS_MAX + 8];
    memset(big, 'a', sizeof big), big[0] = '<', big[1] = '>';
    is_int(hints_line(big, sizeof big, &len, &why), -1, "check: past HINTS_MAX is said");
    is_int(hints_line("</b>", 4, &len, &why), 0, "check: ... once, not for the ones after");
    return tap_done();
}
