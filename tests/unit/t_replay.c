/* replay: early data's ClientHellos, remembered for the window, across processes. */
#include "replay.h"
#include "tap.h"

#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define W REPLAY_WINDOW_MS

static void test_once(void)
{
    replay_t *t = replay_new(64, 0);
    ok(t != NULL, "a table of 64");
    is_int(replay_size(t), 64, "64 entries: 8 buckets of 8");
    unsigned char a[32] = {1}, b[32] = {2};
    is_int(replay_record(t, a, sizeof a, W - 1), REPLAY_YOUNG, "younger than the window: refused");
    is_int(replay_record(t, a, sizeof a, W), REPLAY_NEW, "first seen once the window passed");
    is_int(replay_record(t, a, sizeof a, W + 5000), REPLAY_SEEN, "the same within the window: replay");
    is_int(replay_record(t, b, sizeof b, W + 5000), REPLAY_NEW, "another value: new");
    is_int(replay_record(t, a, sizeof a, 2 * W - 1), REPLAY_SEEN, "the window's last ms: replay");
    is_int(replay_record(t, a, sizeof a, 2 * W), REPLAY_NEW,
           "after the window: new (the TLS library refuses its ticket age by then)");
    replay_free(t);
}

/* Every way of every bucket live: the next value is refused, not accepted. */
static void test_full(void)
{
    replay_t *t = replay_new(8, 0); /* one bucket */
    int64_t now = W;
    int n_new = 0, n_full = 0;
    for (unsigned i = 0; i < 20; i++) {
        int r = replay_record(t, &i, sizeof i, now);
        n_new += r == REPLAY_NEW;
        n_full += r == REPLAY_FULL;
    }
    is_int(n_new, 8, "a bucket of 8 takes 8 values");
    is_int(n_full, 12, "the other 12 are refused (fail closed)");
    unsigned i = 3;
    is_int(replay_record(t, &i, sizeof i, now), REPLAY_SEEN, "a full table still knows its values");
    unsigned j = 100;
    is_int(replay_record(t, &j, sizeof j, now + W), REPLAY_NEW, "room again once they expire");
    replay_free(t);
}

/* Recorded in a child (another -W worker): seen in the parent. */
static void test_shared(void)
{
    replay_t *t = replay_new(1024, 0);
    unsigned char hello[32] = "a ClientHello's random, 32 bytes";
    pid_t pid = fork();
    if (pid == 0)
        _exit(replay_record(t, hello, sizeof hello, W) == REPLAY_NEW ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "another process records it as new");
    is_int(replay_record(t, hello, sizeof hello, W + 1), REPLAY_SEEN,
           "and this one sees the replay");
    replay_free(t);
}

int main(void)
{
    test_once();
    test_full();
    test_shared();
    return tap_done();
}
