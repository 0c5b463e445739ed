# written by bench/slashdot; run: gnuplot slashdot-soak.gp
$s0rss << EOD
0.0000 7.43
0.0867 7.44
0.1733 3.50
0.2567 3.50
0.3417 3.50
0.4250 3.50
0.5083 3.50
0.5917 3.50
0.6750 3.50
0.7600 3.50
0.8433 3.50
0.9267 3.50
EOD
$s0win << EOD
0.0417 8.159 37024.7
0.1258 7.295 42948.2
0.2100 5.439 49671.7
0.2942 5.503 50439.6
0.3783 5.183 53015.0
0.4617 5.471 50979.0
0.5458 8.511 43053.0
0.6300 8.767 34355.1
0.7142 8.639 35675.1
0.7983 8.703 33870.8
0.8817 8.639 37638.7
0.9617 5.695 40290.8
EOD
$s1rss << EOD
0.0000 14.52
0.0883 14.53
0.1767 8.37
0.2600 8.37
0.3433 8.37
0.4267 8.37
0.5117 8.37
0.5950 8.37
0.6783 8.37
0.7617 8.37
0.8450 8.37
0.9300 8.37
EOD
$s1win << EOD
0.0425 8.447 58488.4
0.1267 8.319 62601.5
0.2100 5.119 69744.8
0.2942 4.479 73438.3
0.3783 4.479 74933.7
0.4617 4.799 82535.1
0.5450 8.383 65897.1
0.6292 4.991 84975.9
0.7133 8.191 52898.0
0.7967 6.495 67771.4
0.8808 4.575 88586.8
0.9617 4.575 74124.1
EOD
$s2rss << EOD
0.0000 28.41
0.0867 28.45
0.1733 28.45
0.2600 28.45
0.3467 28.45
0.4333 28.45
0.5200 28.45
0.6067 28.45
0.6933 28.45
0.7800 28.45
0.8667 28.45
0.9533 28.45
EOD
$s2win << EOD
0.0417 7.935 21441.1
0.1258 7.967 24553.5
0.2100 8.447 25223.6
0.2933 8.831 24666.7
0.3775 8.575 25033.6
0.4617 8.703 23343.7
0.5458 8.831 22446.7
0.6300 8.895 21887.6
0.7133 8.831 21736.7
0.7975 8.959 21712.8
0.8817 8.703 23155.8
0.9617 8.767 21760.7
EOD
set terminal pngcairo size 1400,1100 font ',10'
set output 'slashdot-soak.png'
set multiplot layout 3,1 title 'bench/slashdot soak: 50 keep-alive clients (bench, 5 s windows) on top of the idle connections; servers on CPU 0, clients on CPU 1'
set grid
set key outside right
set xlabel 'minutes into the load'
set xrange [0:1]
set ylabel 'server RSS, MiB'
set yrange [0:*]
plot $s0rss using 1:2 with linespoints pt 7 ps 0.5 lc rgb '#1f77b4' title 'gatling, 19,000 idle', \
     $s1rss using 1:2 with linespoints pt 7 ps 0.5 lc rgb '#2ca02c' title 'gatling -W 2, 30,000 idle', \
     $s2rss using 1:2 with linespoints pt 7 ps 0.5 lc rgb '#d62728' title 'nginx, 19,000 idle'
set ylabel 'p99 latency per window, ms'
set logscale y
set yrange [*:*]
plot $s0win using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#1f77b4' title 'gatling, 19,000 idle', \
     13.182 with lines dt 2 lc rgb '#1f77b4' title '2 x quiet p99, gatling', \
     $s1win using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#2ca02c' title 'gatling -W 2, 30,000 idle', \
     18.814 with lines dt 2 lc rgb '#2ca02c' title '2 x quiet p99, gatling -W 2', \
     $s2win using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#d62728' title 'nginx, 19,000 idle', \
     15.870 with lines dt 2 lc rgb '#d62728' title '2 x quiet p99, nginx'
unset logscale y
set yrange [0:*]
set ylabel 'requests/s per window'
plot $s0win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#1f77b4' title 'gatling, 19,000 idle', \
     $s1win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#2ca02c' title 'gatling -W 2, 30,000 idle', \
     $s2win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#d62728' title 'nginx, 19,000 idle'
unset multiplot
