/* config — everything the command line and the options file set, in one struct,
   and nothing else: what the process makes of it at start (descriptors, ids,
   pids, shared mappings, the TLS store) is proc_t's (proc.h). */
#ifndef GATLING_CONFIG_H
#define GATLING_CONFIG_H

#define GATLING_VERSION "0.1"

/* --h3-retry: when a QUIC Initial without a token gets a Retry (quic/quic_retry.h) */
enum { CONFIG_RETRY_BUSY = 0, CONFIG_RETRY_NEVER, CONFIG_RETRY_ALWAYS };

#define CONFIG_PROXY_PORTS 8 /* -y: ports named */
#define CONFIG_TRUST_MAX 32  /* -Y: proxies (addresses or networks) trusted */
#define CONFIG_HEALTH_MAX 255 /* -k: the health check path's length */
#define CONFIG_CGI_MAX 8      /* -w: CGI patterns */
#define CONFIG_PROXY_RULES 16 /* -P: proxy rules */
#define CONFIG_POOLS 16       /* --pool: pools of backends */
#define CONFIG_BACKENDS 64    /* backends of every rule and pool together */
#define CONFIG_PATTERN_MAX 1024 /* -w, -P: a pattern's or rule's length */
/* --cgi-limits: the rlimits of each CGI process (0: not set, as inherited) */
enum { CONFIG_CGI_CPU, CONFIG_CGI_MEM, CONFIG_CGI_PROCS, CONFIG_CGI_FILES, CONFIG_CGI_LIMITS };

#define CONFIG_ACME_NAMES 100 /* --acme-names: names at most */
#define CONFIG_ACME_OD_NAMES 100 /* --acme-on-demand-names: names got on demand at most */
enum { CONFIG_ACME_EC256 = 0, CONFIG_ACME_RSA2048, CONFIG_ACME_RSA3072 }; /* --acme-key */
enum { CONFIG_ACME_ANY = 0, CONFIG_ACME_HTTP01, CONFIG_ACME_TLSALPN01, CONFIG_ACME_DNS01 };
/* (--acme-challenge; wildcard names go by DNS-01 whatever it says) */

#define CONFIG_ACME_CAS 4 /* --acme-ca given more than once: the CAs tried in turn */
typedef struct config_acme_ca {
    const char *url;        /* --acme-ca URL: a CA's directory */
    const char *eab_kid;    /* --acme-eab KID:HMACKEY after it: its External Account Binding */
    const char *eab_hmac;   /* ... the key, base64url as the CA gives it */
} config_acme_ca_t;

/* --acme and its company: the ACME client (gatling/acme/acme.h) */
typedef struct config_acme {
    const char *email;      /* --acme EMAIL: on; NULL = off */
    const char *ca;         /* --acme-ca URL: the first CA's directory (default Let's Encrypt's) */
    config_acme_ca_t cas[CONFIG_ACME_CAS]; /* every --acme-ca (cas[0].url is ca), with its EAB */
    int ncas;               /* ... how many (1 after acme_options_done) */
    const char *ca_root;    /* --acme-ca-root FILE: PEM roots to trust for the CA (else the system's) */
    const char *profile;    /* --acme-profile NAME (classic, tlsserver, shortlived); NULL = CA's */
    int key_type;           /* --acme-key: CONFIG_ACME_EC256 (default), RSA2048, RSA3072 */
    int challenge;          /* --acme-challenge: CONFIG_ACME_ANY (default), HTTP01, TLSALPN01 */
    const char *state_dir;  /* --acme-dir DIR: account, challenges, schedule, status */
    const char *issuer;     /* --acme-issuer CN: the preferred chain's root or intermediate */
    const char *names[CONFIG_ACME_NAMES]; /* --acme-names a,b: else the vhost directories' */
    int nnames;
    /* DNS-01 (acme/acme_dns.h): RFC 2136 updates signed with TSIG */
    const char *dns_server;  /* --acme-dns-server ADDR[:PORT]: the zone's primary */
    const char *dns_key_file; /* --acme-dns-key FILE: the TSIG key (read at start) */
    const struct acme_dns_key *dns_key; /* ... as read; NULL without */
    /* names not known at start (acme/acme_ondemand.h) */
    const char *ask_url;     /* --acme-on-demand URL: GET URL?domain=NAME, 200 = yes; NULL off */
    int od_per_hour;         /* --acme-on-demand-rate H,A: names allowed an hour (default 60) */
    int od_per_addr;         /* ... and asks an hour from one client address (default 10) */
    int od_max;              /* --acme-on-demand-names N: names got on demand kept (100) */
    int od_forget;           /* --acme-on-demand-forget S: one with no certificate in S forgotten */
} config_acme_t;

/* An address or network: IPv4 as ::ffff:a.b.c.d, the prefix over 128 bits. */
typedef struct config_net {
    unsigned char addr[16];
    int bits;
} config_net_t;

typedef struct config {
    const char *addr;      /* -i: NULL = all addresses, IPv6 and IPv4 */
    int port;              /* -p: default 80 as root, 8000 otherwise; 0 = any */
    int timeout;           /* -T: keep-alive idle timeout in seconds; 0 = none */
    int head_timeout;      /* -s: seconds for a whole request head */
    int min_rate;          /* -B: bytes/s a body or response must move; 0 = any progress */
    int max_conns;         /* -N: open connections; more get 503 (0: from RLIMIT_NOFILE) */
    int max_conns_addr;    /* -K: open connections per client address (/64); 0 = no cap */
    int rpm;               /* -A: requests per minute per client address; 0 = no limit */
    int max_requests;      /* -R: requests per keep-alive connection; 0 = no cap */
    int free_fails;        /* -b: failed logins per client address before checks wait */
    int offence_s;         /* --flood-memory: seconds one flood offence is remembered; 0 = off */
    int threads;           /* -j: worker threads for work that must leave the loop */
    const char *error_log; /* -q: NULL = stderr; reopened on SIGUSR1 */
    int access_log;        /* 0 with -n */
    int log_vhost;         /* -G: vhost_combined: each line starts with the vhost */
    int log_json;          /* --log-format json: one JSON object a line (site/alog.h) */
    int check;             /* --check: start up as far as the listeners, then exit 0 or 2 */
    const char *log_file;  /* -l: NULL = stdout; reopened on SIGUSR1 */
    const char *root;      /* -c: chroot (root) or chdir here; NULL = cwd */
    const char *pid_file;  /* --pid-file: the serving process's pid (gatling/process/pidfile.h) */
    int no_chroot;         /* --no-chroot: -c only changes into it, as root too */
    const char *user;      /* -u: drop privileges to this user after binding */
    const char *mime_file; /* -m: NULL = /etc/mime.types */
    int workers;           /* -W: worker processes; 1 = no supervisor */
    int no_sandbox;        /* --sandbox off: no seccomp filter, no Landlock (process/sandbox.h) */
    int early_data;        /* --early-data: the replay table's entries; 0: early data refused */
    int vhosts;            /* 0 with -H: no virtual hosting */
    int vhost_only;        /* -v: never serve from the document root itself */
    int keep_host_port;    /* -t: keep the port of the Host header */
    int listings;          /* -d on, -D off (default) */
    const char *index2;    /* -I: an extra index file name */
    const char *redirect;  /* -r: 404s become redirects to this URL prefix */
    int max_age;           /* -M: Cache-Control max-age in seconds, -1 = none */
    int status_page;       /* -S: /server-status and /metrics for loopback clients */
    config_net_t status_from[CONFIG_TRUST_MAX]; /* --status-from: and for these */
    int nstatus_from;
    int symlinks_out;      /* -L: follow symlinks out of the document root */
    int gzip;              /* 0 with -Z: no compression */
    /* --compress (route/compress.h): on-the-fly coding of dynamic answers */
    int compress_off;           /* off: none (-Z: none either) */
    const char *compress_types; /* types=: compressible types, comma-separated; NULL: default */
    const char *compress_skip;  /* skip=: path prefixes never compressed (BREACH) */
    int compress_secrets;       /* secrets: code answers that may carry one (BREACH) */
    long compress_min;          /* min=: a known length below this goes identity; 0: 256 */
    long compress_streams;      /* streams=: coders at once per process; 0: 1024 */
    long compress_memory;       /* memory=: their bytes per process; 0: 128 MiB */
    int defer_accept;      /* -a: TCP_DEFER_ACCEPT seconds, 0 = off (default 1 on Linux) */
    int defer_accept_given; /* -a given: it also overrides a passed socket's */
    long mem_file_max;     /* -F: files up to this size are held in memory (fcache.h) */
    const char *tls_dir;     /* -C as given (NULL: ./server.pem); proc_t.tls_dir is what is used */
    int tls_port;            /* -e: HTTPS port; default 443 as root, 4433 otherwise */
    int tls_port_given;      /* -e was given: failing to bind it is fatal */
    const char *tls_addr;    /* -e addr:port: HTTPS on this address; NULL = -i's */
    int tls_off;             /* -E: no HTTPS */
    const char *tls_ciphers; /* -o: TLS 1.2 cipher list (OpenSSL syntax) */
    const char *tls_suites;  /* -O: TLS 1.3 cipher suites */
    const char *tls_client_ca;  /* --tls-client-ca: client certificates' CAs (tls_client.h) */
    const char *tls_client_crl; /* --tls-client-crl: their CRLs */
    int tls_client_optional;    /* --tls-client-verify optional */
    int tls_client_depth;       /* --tls-client-depth (0: the default, 1) */
    int hsts;                /* -x: Strict-Transport-Security max-age on HTTPS; -1 = none */
    int https_redirect;      /* -X: plain HTTP requests get 301 to https:// */
    int h2_off;              /* -2: no HTTP/2 (neither ALPN h2 nor h2c prior knowledge) */
    int h3_off;              /* -3: no HTTP/3 (no UDP socket, no Alt-Svc) */
    int h3_retry;            /* --h3-retry: CONFIG_RETRY_* (0: busy, the default) */
    /* behind a load balancer */
    int proxy_http, proxy_https;         /* -y http, https: those listeners expect PROXY */
    int proxy_ports[CONFIG_PROXY_PORTS]; /* -y port: so does the listener on port */
    int nproxy_ports;
    config_net_t trust[CONFIG_TRUST_MAX]; /* -Y: whose PROXY headers are believed */
    int ntrust;
    const char *health; /* -k: the health check's path; NULL = none */
    int drain_grace;    /* -g: seconds the health check fails before a drain closes
                           the listeners; 0 = close at once */
    /* dynamic content: handlers/cgi.c, handlers/proxy.c */
    const char *cgi_regex[CONFIG_CGI_MAX]; /* -w: paths matching (POSIX ERE) run as CGI */
    int ncgi_regex;
    int cgi_exec;    /* -z: world-executable files starting with #! or ELF run as CGI */
    int cgi_max;     /* -J: CGI processes at once (per loop); more get 503 */
    int dyn_timeout; /* -Q: seconds a CGI may run, and a backend may stay silent */
    const char *cgi_user; /* --cgi-user: the CGI spawner and its programs run as this user */
    long long cgi_limit[CONFIG_CGI_LIMITS]; /* --cgi-limits: CONFIG_CGI_* rlimits */
    int tunnel_timeout; /* -Q's second value: seconds a WebSocket tunnel may stay idle */
    const char *proxy_rule[CONFIG_PROXY_RULES]; /* -P: [F/|S/]backends/regex, @pool/regex */
    int nproxy_rules;
    const char *pool_def[CONFIG_POOLS]; /* --pool NAME=[F/|S/]backends|file:/path;options */
    int npools;
    const char *proxy_ca; /* --proxy-ca: the CAs h2/ backends' certificates chain to (PEM) */
    long long cache_mem;    /* --cache: the response cache's bytes (0: the default) */
    long long cache_object; /* ... and the largest response it stores */
    config_acme_t acme; /* --acme...: automatic HTTPS (gatling/acme/) */
    const char *cluster_etcd; /* --cluster etcd=URL,...: share through etcd; NULL = one node */
    const char *cluster_name; /* --cluster-name NAME: the keys' prefix /gatling/NAME/ */
    /* FTP: ftp/ftp.c */
    int ftp_port;          /* -f port: FTP on this port (0: any); -1 = off (default) */
    int ftp_upload;        /* -f port,upload: STOR/APPE/MKD into world-writable directories */
    long long ftp_upload_max; /* -f port,upload=bytes: the largest file an upload makes */
    int ftp_no_upload;     /* -U: no uploads (the original gatling's -U) */
} config_t;

#endif
