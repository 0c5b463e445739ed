#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <pthread.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <arpa/inet.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec/1e9;}
static int port;
static void *rx(void *a){ cpu_set_t c; CPU_ZERO(&c); CPU_SET(1,&c); sched_setaffinity(0,sizeof c,&c);
  int l=*(int*)a; int s=accept(l,0,0); static char b[1<<20]; while(read(s,b,sizeof b)>0); return 0;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); cpu_set_t c; CPU_ZERO(&c); CPU_SET(0,&c); sched_setaffinity(0,sizeof c,&c);
  int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)};
  bind(l,(void*)&a,sizeof a); socklen_t al=sizeof a; getsockname(l,(void*)&a,&al); listen(l,1);
  pthread_t t; pthread_create(&t,0,rx,&l);
  int s=socket(AF_INET,SOCK_STREAM,0); connect(s,(void*)&a,sizeof a);
  char *src=aligned_alloc(4096,1<<16), *sink=aligned_alloc(4096,1<<16); memset(src,1,1<<16);
  size_t total=0, R=16406; double t0=now();
  for(int it=0; it<100000; it++){
    if(mode==0){ memcpy(sink,src,R); memcpy(sink+R,src+R,R); size_t o=0; while(o<2*R){ssize_t w=send(s,sink+o,2*R-o,MSG_NOSIGNAL); if(w<0) return 1; o+=w;} }
    else { for(int k=0;k<2;k++){ size_t o=0; while(o<R){ssize_t w=send(s,src+k*R+o,R-o,MSG_NOSIGNAL|(k==0?MSG_MORE:0)); if(w<0) return 1; o+=w;} } }
    total+=2*R;
  }
  double t1=now()-t0; printf("mode %d: %.1f us per MB sender CPU\n",mode,t1*1e6/(total/1e6));
  return 0;
}
