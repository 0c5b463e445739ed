"""benchkit: the code bench/'s Python drivers share (README: each module and who uses it).
A driver (a script without a suffix in bench/, where users type it) puts bench/ on sys.path and
imports from here; no driver imports another (`make layers` checks it).  Python 3 standard
library only.

    benchlib   processes, the CPU split, gatling's start, free ports, rounds, statistics,
               metadata, gnuplot, bench -J merges, /proc/stat CPU times, compressible text
    runreport  bench/run's report: the terminal summary and report.html
    rounds     the compare drivers' alternating rounds on fresh servers, the medians over them
    servers    the static-file peers (gatling, nginx, lighttpd, h2o): Server, versions, docroot
    idle       idle connections held for the memory rows: Holders, the helpers (-m benchkit.idle)
    wrk        wrk runs (measure) and the table of medians with gatling's "vs X" advantage
    tls        TlsServer: the peers over HTTPS
    h2         H2Server (h2 over TLS 1.3, and Caddy), OPENSSL_CONF, h2load runs and counts
    dynamic    php-fpm's binary, one GET to a local server
    ftp        the FTP peers (vsftpd, pure-ftpd, gatling -f): FtpServer, the download tree
    netlab     the lab of network namespaces (Lab) and hosts files; bench/netlab's library
    haproxy    haproxy in front of gatling hosts, from dist/haproxy.cfg; its stats socket
    slashdot   bench/slashdot's parts: servers, normal clients, attacks and attackers, soak
    grpcpeers  compare-grpc's backends (grpcio, hypercorn): processes of their own under
               Debian's python3 (-m benchkit.grpcpeers), imported by no driver

Each module imports only modules above it in this list.
"""
