# written by bench/slashdot; run: gnuplot slashdot-soak.gp
$s0rss << EOD
0.0000 7.45
0.0867 7.45
0.1733 7.45
0.2600 7.45
0.3467 7.45
0.4333 7.45
0.5200 7.45
0.6067 7.45
0.6933 7.45
0.7800 7.45
0.8667 7.45
0.9533 7.45
EOD
$s0win << EOD
0.0417 5.599 47033.8
0.1258 5.663 39292.9
0.2100 5.535 43803.5
0.2933 5.567 46431.3
0.3775 5.695 39698.5
0.4617 5.695 38797.6
0.5458 5.599 39669.9
0.6300 5.695 40378.6
0.7133 5.471 46776.7
0.7975 5.663 45353.7
0.8817 5.663 48908.7
0.9617 5.631 41667.1
EOD
$s1rss << EOD
0.0000 14.96
0.0883 14.98
0.1767 14.98
0.2650 14.98
0.3533 14.98
0.4417 14.98
0.5300 14.98
0.6167 14.98
0.7050 14.98
0.7933 14.98
0.8817 14.98
0.9700 14.98
EOD
$s1win << EOD
0.0417 9.535 40786.1
0.1258 9.919 44173.7
0.2100 8.831 48615.6
0.2942 9.663 47441.5
0.3783 8.895 48120.0
0.4617 9.215 47847.5
0.5458 8.575 48794.6
0.6300 8.767 49109.0
0.7142 8.959 48775.5
0.7983 8.703 48661.3
0.8817 9.151 47900.0
0.9617 8.831 47672.0
EOD
$s2rss << EOD
0.0000 28.58
0.0867 28.61
0.1733 28.61
0.2600 28.61
0.3450 28.61
0.4317 28.61
0.5167 28.61
0.6033 28.61
0.6900 28.61
0.7750 28.61
0.8617 28.61
0.9483 28.61
EOD
$s2win << EOD
0.0425 8.639 24242.4
0.1267 8.831 21808.6
0.2100 7.967 22432.1
0.2942 7.903 22732.4
0.3783 7.903 22927.6
0.4617 7.903 23298.0
0.5458 7.903 24139.0
0.6300 7.903 25377.9
0.7133 7.871 26592.3
0.7967 7.871 26229.6
0.8808 7.903 24276.4
0.9617 7.935 21081.7
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
     11.070 with lines dt 2 lc rgb '#1f77b4' title '2 x quiet p99, gatling', \
     $s1win using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#2ca02c' title 'gatling -W 2, 30,000 idle', \
     17.534 with lines dt 2 lc rgb '#2ca02c' title '2 x quiet p99, gatling -W 2', \
     $s2win using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#d62728' title 'nginx, 19,000 idle', \
     17.022 with lines dt 2 lc rgb '#d62728' title '2 x quiet p99, nginx'
unset logscale y
set yrange [0:*]
set ylabel 'requests/s per window'
plot $s0win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#1f77b4' title 'gatling, 19,000 idle', \
     $s1win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#2ca02c' title 'gatling -W 2, 30,000 idle', \
     $s2win using 1:3 with linespoints pt 7 ps 0.6 lc rgb '#d62728' title 'nginx, 19,000 idle'
unset multiplot
