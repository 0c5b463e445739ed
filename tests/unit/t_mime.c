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
