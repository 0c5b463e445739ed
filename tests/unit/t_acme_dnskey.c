/* t_acme_dnskey — DNS-01's TSIG key file (gatling/acme/acme_dnskey.c): BIND's
   key statement as tsig-keygen writes it, with comments and other
   statements around it, and dig -y's ALG:NAME:SECRET; and refusals of what
   is not a key, never naming the secret.  Every input is also fed from a
   buffer without a NUL (the parser takes a length). */
#include <stdlib.h>
#include <string.h>

#include "acme_dnskey.h"
#include "tap.h"

#define SECRET "jA5Hz8JSFMXNl7eHSFsmqmB8Gb0RPBEAH/pzmuJnCnU="

/* Parse text from a malloc'd copy of exactly its length. */
static int parse(const char *text, acme_dns_key_t *k, char *err, size_t cap)
{
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    int r = acme_dnskey_parse(copy, n, k, err, cap);
    free(copy);
    return r;
}

static void test_bind(void)
{
    acme_dns_key_t k;
    char err[256] = "";
    const char *keygen = "key \"acme-update\" {\n\talgorithm hmac-sha256;\n\tsecret \"" SECRET
                         "\";\n};\n";
    is_int(parse(keygen, &k, err, sizeof err), 0, "tsig-keygen's output");
    is_str(k.name, "acme-update.", "its name, with the dot");
    is_str(k.alg, "hmac-sha256.", "its algorithm as libldns names it");
    is_str(k.secret, SECRET, "its secret");
    const char *conf = "# rndc.key\n// another comment\noptions { directory \"/x\"; };\n"
                       "/* a block\n comment */ KEY Acme-Update.Example. { secret \"" SECRET
                       "\" ; algorithm HMAC-SHA512 ; } ;\nkey \"second\" { algorithm hmac-md5; "
                       "secret \"YQ==\"; };";
    is_int(parse(conf, &k, err, sizeof err), 0, "a named.conf with comments: the first key");
    is_str(k.name, "acme-update.example.", "a bare name, lower-cased");
    is_str(k.alg, "hmac-sha512.", "upper case algorithm");
    is_int(parse("key \"k\" { algorithm hmac-md5; secret \"YQ==\"; };", &k, err, sizeof err), 0,
           "hmac-md5");
    is_str(k.alg, "hmac-md5.sig-alg.reg.int.", "... under its long name");
}

static void test_line(void)
{
    acme_dns_key_t k;
    char err[256] = "";
    is_int(parse("hmac-sha1:upd.example.:" SECRET "\n", &k, err, sizeof err), 0,
           "ALG:NAME:SECRET");
    is_str(k.alg, "hmac-sha1.", "its algorithm");
    is_str(k.name, "upd.example.", "its name");
    is_int(parse("  upd:" SECRET "  \n", &k, err, sizeof err), 0, "NAME:SECRET");
    is_str(k.alg, "hmac-sha256.", "hmac-sha256 by default");
    is_str(k.name, "upd.", "the name");
    /* padding at the very end of the input, no newline (the fuzz smoke's
       crash: the '=' were counted by strspn past the input's end) */
    is_int(parse("hmac-sha512:upd.example.:YWJjZA==", &k, err, sizeof err), 0,
           "a secret whose padding ends the input");
    is_str(k.secret, "YWJjZA==", "its secret");
    is_int(parse("upd:YWJjZA=", &k, err, sizeof err), -1, "one '=' short of the padding");
}

static void test_refused(void)
{
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"", "no key statement"},
        {"options { };", "no key statement"},
        {"key \"k\" { algorithm hmac-sha256; };", "no secret"},
        {"key \"k\" { secret \"" SECRET "\"; };", "no algorithm"},
        {"key \"k\" { algorithm hmac-sha999; secret \"YQ==\"; };", "not an algorithm"},
        {"key \"k\" { algorithm hmac-sha256; secret \"not base64!\"; };", "not base64"},
        {"key \"k\" { algorithm hmac-sha256; secret \"YQ=\"; };", "not base64"},
        {"key \"k\" { algorithm hmac-sha256; secret \"" SECRET "\" };", "';' missing"},
        {"key \"k\" { algorithm hmac-sha256; secret \"" SECRET "\";", "no closing"},
        {"key \"k\" { algorithm hmac-sha256; secret \"" SECRET, "not base64"},
        {"key \"a..b\" { algorithm hmac-sha256; secret \"YQ==\"; };", "not a domain name"},
        {"key \"k\" algorithm hmac-sha256;", "no '{'"},
        {"key \"k\" { owner x; };", "not algorithm or secret"},
        {"hmac-sha999:k:YQ==", "not an algorithm"},
        {"k:bad/secret=", "not base64"},
        {":YQ==", "not a domain name"},
    };
    acme_dns_key_t k;
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        is_int(parse(bad[i].text, &k, err, sizeof err), -1, "refused: %s", bad[i].text);
        ok(strstr(err, bad[i].says) != NULL, "... saying %s (%s)", bad[i].says, err);
        ok(!strstr(err, SECRET) && !strstr(err, "YQ=="), "... without the secret");
        ok(!k.secret[0] && !k.name[0], "... and nothing kept");
    }
    char big[600];
    memset(big, 'A', sizeof big);
    memcpy(big, "k:", 2);
    big[sizeof big - 1] = 0;
    is_int(parse(big, &k, err, sizeof err), -1, "a secret of more than 128 bytes");
}

int main(void)
{
    test_bind();
    test_line();
    test_refused();
    return tap_done();
}
