#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <string.h>
#include <stdint.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  int fd=open("f.bin",O_RDONLY); size_t big=(size_t)atoi(argv[3])<<10; char *buf=aligned_alloc(4096,big+65536);
  memset(buf,1,big+65536);
  int mode=atoi(argv[1]); size_t piece=atoi(argv[2]); int iters=1000; size_t slot=0;
  double t0=now();
  for(int it=0;it<iters;it++){
    for(size_t off=0;off+piece<=(1<<20);off+=piece){
      char *b=buf+slot; slot=(slot+40960)%big;
      char *dst = mode==0? b+188 : mode==1? b+(off&4095) : mode==2? b+((off+2048)&4095) : b+64;
      if(pread(fd,dst,piece,off)!=(ssize_t)piece) return 1;
    }
  }
  double t=now()-t0; printf("mode %d piece %zu region %s KB: %.1f us/MB\n",mode,piece,argv[3],t*1e6/iters);
}
