/*
 * peerboard — the flood offences of site/peerlimits, shared by -W's workers.
 *
 * Under -W every worker has its own peerlimits table, and SO_REUSEPORT hands
 * each new connection to any of them: a client whose connection one worker's
 * defence ended (peer_offence) would find the other workers' memory clean and
 * get a fresh burst there.  The board is one small table in a shared anonymous
 * mapping, made by the supervisor before it forks: a worker posts an address's
 * new level there, and the others adopt it when that address connects.
 *
 * Best effort by design, so that no worker ever waits for another: a fixed
 * table (PEER_BOARD_BUCKETS x 4 addresses, the oldest post in a bucket
 * replaced), each bucket behind a try-lock that a worker gives up on after a
 * few spins (a worker killed while holding one costs that bucket's sharing,
 * never a hang).  Addresses are kept as SipHash tags under a key made once for
 * the board.  What a worker misses it still has in its own table.
 */
#ifndef GATLING_PEERBOARD_H
#define GATLING_PEERBOARD_H

#include <stdint.h>

#define PEER_BOARD_BUCKETS 1024

typedef struct peer_board peer_board_t;

/* A board shared with the children forked after this; NULL (errno) on failure. */
peer_board_t *peer_board_new(void);
void peer_board_free(peer_board_t *b);

/*
 * The level posted for key (peerlimits' 16-byte address key) and when it was
 * posted, through *level and *at_ms; 0 when there is one, -1 when the board
 * holds none (or its bucket was busy).
 */
int peer_board_get(peer_board_t *b, const uint8_t key[16], unsigned *level, int64_t *at_ms);

/* Post key's level as of at_ms (replacing what the board held for it). */
void peer_board_post(peer_board_t *b, const uint8_t key[16], unsigned level, int64_t at_ms);

#endif
