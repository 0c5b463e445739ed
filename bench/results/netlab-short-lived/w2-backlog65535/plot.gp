set terminal pngcairo size 1400,520 font ',11'
set output 'multihost.png'
set multiplot layout 1,2 title 'gatling -W 2 on srv, 4 client hosts, one request per connection, 1024-byte object'
set grid
set key outside right top
set xlabel 'concurrent connections, all clients'
set ylabel 'req/s'
set yrange [0:*]
plot "plot.dat" index 0 using 1:2 with linespoints lw 1 title "c1", "plot.dat" index 1 using 1:2 with linespoints lw 1 title "c2", "plot.dat" index 2 using 1:2 with linespoints lw 1 title "c3", "plot.dat" index 3 using 1:2 with linespoints lw 1 title "c4", "plot.dat" index 4 using 1:2 with linespoints lw 3 lc rgb 'black' title "merged"
set ylabel 'p99 latency, ms'
set logscale y
plot "plot.dat" index 0 using 1:3 with linespoints lw 1 title "c1", "plot.dat" index 1 using 1:3 with linespoints lw 1 title "c2", "plot.dat" index 2 using 1:3 with linespoints lw 1 title "c3", "plot.dat" index 3 using 1:3 with linespoints lw 1 title "c4", "plot.dat" index 4 using 1:3 with linespoints lw 3 lc rgb 'black' title "merged"
unset multiplot
