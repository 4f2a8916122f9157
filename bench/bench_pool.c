/* bench_pool.c — family "pool": the cost of one kern_parallel_for over N
 * empty tasks (the fixed overhead every multi-threaded kernel pays per
 * phase), against
 *   naive           a plain loop calling the task N times on the caller
 *                   (no threads at all: the floor for N tiny tasks)
 *   pthread_create  `threads` fresh pthreads per call, sharing the tasks
 *                   through an atomic counter, joined before returning
 *                   (what a pool saves)
 * Cases: tasks2, tasks1000; 1 and 2 threads. A latency family: the table
 * shows time per call (peak=latency, no fraction of peak).
 */
#include "kern_base.h"
#include "kbench.h"

#include <pthread.h>
#include <stdio.h>

typedef struct pool_case {
    int64_t n_tasks;
} pool_case;

static void empty_task(void *arg, int64_t task, int thread) {
    (void)arg; (void)task; (void)thread;
    __asm__ volatile("" ::: "memory");
}
/* Called through a volatile pointer so the naive loop is not folded away. */
static void (*volatile task_ptr)(void *, int64_t, int) = empty_task;

static void run_kern(kbench_state *st, void *user) {
    pool_case *c = (pool_case *)user;
    kern_ctx *ctx = kbench_ctx(kbench_threads(st));
    if (!ctx) {
        kbench_skip(st, "no context");
        return;
    }
    kern_parallel_for(ctx, c->n_tasks, empty_task, NULL); /* warm up */
    while (kbench_next(st)) kern_parallel_for(ctx, c->n_tasks, empty_task, NULL);
}

static void run_naive(kbench_state *st, void *user) {
    pool_case *c = (pool_case *)user;
    while (kbench_next(st)) {
        void (*fn)(void *, int64_t, int) = task_ptr;
        for (int64_t i = 0; i < c->n_tasks; i++) fn(NULL, i, 0);
    }
}

typedef struct fresh_job {
    int64_t n, next;
} fresh_job;
static void *fresh_main(void *p) {
    fresh_job *j = (fresh_job *)p;
    for (;;) {
        int64_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n) break;
        task_ptr(NULL, i, 0);
    }
    return NULL;
}
static void run_pthread(kbench_state *st, void *user) {
    pool_case *c = (pool_case *)user;
    int t = kbench_threads(st);
    pthread_t th[64];
    while (kbench_next(st)) {
        fresh_job j;
        j.n = c->n_tasks;
        j.next = 0;
        for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, fresh_main, &j);
        for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    }
}

static pool_case cases[2] = {{2}, {1000}};

KBENCH_INIT(pool) {
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "tasks%lld", (long long)cases[k].n_tasks);
        for (int t = 1; t <= 2; t++) {
            kbench_add("pool", name, "kern", t, KBENCH_PEAK_LATENCY, run_kern, &cases[k]);
            kbench_add("pool", name, "naive", t, KBENCH_PEAK_LATENCY, run_naive, &cases[k]);
            kbench_add("pool", name, "pthread_create", t, KBENCH_PEAK_LATENCY, run_pthread,
                       &cases[k]);
        }
    }
    /* headline cases: the default `make bench` set (docs/bench.md) */
    kbench_headline("pool", "tasks2");
    kbench_headline("pool", "tasks1000");
}
