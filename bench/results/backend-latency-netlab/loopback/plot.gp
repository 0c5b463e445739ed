set terminal pngcairo size 1800,620 font ',11'
set output 'latency.png'
set multiplot layout 1,3 title 'gatling latency while N idle connections are held (one fresh connection + one keep-alive GET per sample; server on CPU 0, client on CPU 1)'
set logscale y
set grid
set key top left
set xrange [-399.0:19950.0]
set xlabel 'idle connections held (N)'
set ylabel 'microseconds (log scale)'
set title 'request latency, median'
plot 94.5 with lines dt 2 lc rgb '#888888' title '1.5 x epoll at N=0', 'plot.dat' index 0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'epoll', 'plot.dat' index 1 using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'poll'

set title 'request latency, p99'
plot 'plot.dat' index 0 using 1:3 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'epoll', 'plot.dat' index 1 using 1:3 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'poll'

set title 'connect latency, median'
plot 'plot.dat' index 0 using 1:4 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'epoll', 'plot.dat' index 1 using 1:4 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'poll'

unset multiplot
