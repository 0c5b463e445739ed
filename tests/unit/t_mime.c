/* MIME lookup: the system table, a given file, and the built-in fallback. */
#include "mime.h"
#include "tap.h"

#include <errno.h>
#include <unistd.h>

static const char *look(mime_table_t *t, const char *name)
{
    return mime_lookup(t, name, strlen(name));
}

int main(void)
{
    char tmp[] = "/tmp/t_mime_XXXXXX";
    int fd = mkstemp(tmp);
    const char *text = "# comment\napplication/x-foo\tfoo FOO2\ntext/x-bar bar\n"
                       "application/x-first dup\napplication/x-second dup\nlonely/type\n";
    ok(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "temp mime file");
    close(fd);

    mime_table_t *t = mime_load(tmp);
    ok(t != NULL, "load a given file");
    is_str(look(t, "/x/a.foo"), "application/x-foo", "extension from the file");
    is_str(look(t, "/x/a.FoO"), "application/x-foo", "case-insensitive extension");
    is_str(look(t, "a.foo2"), "application/x-foo", "upper case in the file too");
    is_str(look(t, "a.bar"), "text/x-bar; charset=utf-8", "text types get a charset");
    is_str(look(t, "a.dup"), "application/x-first", "first mention wins");
    is_str(look(t, "a.html"), "text/html; charset=utf-8", "built-in fills the gaps");
    is_str(look(t, "/dir.foo/README"), "application/octet-stream", "no extension");
    is_str(look(t, "/a."), "application/octet-stream", "empty extension");
    is_str(look(t, "/a.unknownext"), "application/octet-stream", "unknown extension");
    mime_free(t);
    unlink(tmp);

    /* lines of every shape: indented, blank, a comment after blanks, a type
       with trailing blanks only, an extension too long to keep, "text/" alone */
    char tmp2[] = "/tmp/t_mime_XXXXXX";
    fd = mkstemp(tmp2);
    text = "  \t# indented comment\n\n   \n\ttext/x-ind   ind\t\tind2  \n"
           "application/x-trail \t\n"
           "application/x-long abcdefghijklmnop short\n"
           "text/ five\n";
    ok(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "second mime file");
    close(fd);
    t = mime_load(tmp2);
    ok(t != NULL, "loaded");
    if (!t)
        return tap_done();
    is_str(look(t, "a.ind2"), "text/x-ind; charset=utf-8", "an indented line, blanks between");
    is_str(look(t, "a.short"), "application/x-long", "an extension after one too long");
    is_str(look(t, "a.abcdefghijklmnop"), "application/octet-stream",
           "an extension of 16 bytes: not kept, not matched");
    is_str(look(t, "a.five"), "text/", "\"text/\" alone gets no charset");
    is_str(look(t, ".ind"), "text/x-ind; charset=utf-8", "a name that is all extension");
    is_str(look(t, "ind"), "application/octet-stream", "no dot at all");
    is_str(look(t, "d.ind/x"), "application/octet-stream", "a dot in a directory only");
    mime_free(t);
    unlink(tmp2);

    errno = 0;
    ok(mime_load("/nonexistent/mime.types") == NULL && errno == ENOENT,
       "a named file that is missing is an error");
    t = mime_load(NULL);
    ok(t != NULL, "system table (or built-in without one)");
    is_str(look(t, "index.HTML"), "text/html; charset=utf-8", "html");
    is_str(look(t, "s.css"), "text/css; charset=utf-8", "css");
    is_str(look(t, "p.png"), "image/png", "png");
    is_str(look(t, "d.json"), "application/json", "json");
    mime_free(t);
    return tap_done();
}
