/* fz_replay.h — the plain main of the graph and safetensors harnesses
 * (fuzz_ir.c, fuzz_safetensors.c) when built without libFuzzer:
 * -DKF_REPLAY (mk/fuzz.mk's corpus replay in make test / asan / ubsan) or
 * -DKERN_FUZZ_MAIN. Runs every file, or every file of every directory,
 * named on the command line once, each from an exactly sized heap copy so
 * the sanitizers see reads past its end; with no arguments, the corpus
 * directory KF_CORPUS. Prints the tests/run summary line; a broken
 * contract aborts before it. Include after LLVMFuzzerTestOneInput. */
#ifndef KERN_FZ_REPLAY_H
#define KERN_FZ_REPLAY_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FZ_REPLAY_NAME /* hook: where a harness keeps the input's name */
#define FZ_REPLAY_NAME(path) ((void)(path))
#endif

static int fz__replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    uint8_t *buf;
    if (!f) return 0;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return 0;
    }
    buf = (uint8_t *)malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fclose(f);
        free(buf);
        return 0;
    }
    fclose(f);
    FZ_REPLAY_NAME(path);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 1;
}

int main(int argc, char **argv) {
    int i, count = 0;
    const char *base = strrchr(argv[0], '/');
#ifdef KF_CORPUS
    static char *dflt[2] = {NULL, (char *)KF_CORPUS};
    if (argc < 2) {
        dflt[0] = argv[0];
        argc = 2;
        argv = dflt;
    }
#endif
    for (i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "kf: cannot read %s\n", argv[i]);
            return 2;
        }
        if (S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char path[4096];
            while (d && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.') continue;
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                count += fz__replay_file(path);
            }
            if (d) closedir(d);
        } else {
            count += fz__replay_file(argv[i]);
        }
    }
    printf("[%s] %d ok, 0 failed\n", base ? base + 1 : argv[0], count);
    return 0;
}
#endif
