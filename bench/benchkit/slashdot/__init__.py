"""bench/slashdot's parts (the driver, bench/slashdot, is the command line, the scenarios'
rounds and the tables):

    base       the log, the scenarios' constants, Place and PLACE (where each role runs),
               formatting, ports per source address, Basic auth, one GET
    peers      the document root and its passwords, Srv (gatling, nginx and nginx's config),
               the probes that a server does what a scenario needs
    clients    the normal clients: bench runs (BenchRun, bench_once) and the verdict (judge)
    attackers  the rate and flood attackers, processes of their own (standard library only:
               `python3 bench/benchkit/slashdot/attackers.py rate|flood JSON`)
    attacks    the attacks as the driver starts, measures and stops them (slowhttptest,
               attackers.py), the newcomers' probe, the attacker's line in the table
    soak       the soak: idle connections held by httpbench, bench windows on top, RSS
               sampled; its plan, verdict, plot and TSV

Each module imports only modules above it in this list (attacks: attackers too), and
nothing of bench/ outside benchkit.
"""
