# mk/fuzz.mk — fuzzers, their corpus replay, and ThreadSanitizer
# (issue 19). Included at the end of the Makefile.
#
# make fuzz [FUZZ_SECONDS=N] [FUZZERS="csr sdpa"]
#     builds every tests/fuzz/fuzz_*.c as a libFuzzer target (clang,
#     -fsanitize=fuzzer,address,undefined) and runs each for N seconds
#     (default 60) on its checked-in corpus tests/fuzz/corpus/<name>; new
#     inputs go to build/fuzz/corpus/<name>, crashes to build/fuzz/crash/.
#     Fails with a clear message when clang or libFuzzer is missing.
# make test / asan / ubsan / tsan
#     also build build/<kind>/fuzz_replay_<name>: the same harness with a
#     plain main (-DKF_REPLAY) that runs every checked-in corpus input
#     once, so inputs that once crashed stay regression tests.
# make tsan
#     every test binary (and the replays) under ThreadSanitizer.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZERS      ?= $(FUZZ_NAMES)
FUZZ_BINS    := $(patsubst %,build/fuzz/fuzz_%,$(FUZZERS))
FUZZ_DEPS    := tests/fuzz/kf.h tests/fuzz/kf_adapt.h tests/fuzz/fz.h tests/fuzz/fz_replay.h tests/kt.h $(HEADERS)
FUZZ_FLAGS   = -O1 $(DEBUG_INFO) -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=undefined -std=c11 -D_GNU_SOURCE $(WARN) $(INC) -Itests/fuzz

.PHONY: fuzz fuzz-build tsan

# The implementation with coverage instrumentation but without libFuzzer's
# main (fuzzer-no-link), compiled once; every harness links it (-DKT_LINKED).
KT_COMMA := ,
FUZZ_IMPL_FLAGS := $(subst -fsanitize=fuzzer$(KT_COMMA),-fsanitize=fuzzer-no-link$(KT_COMMA),$(FUZZ_FLAGS))
build/fuzz/kern_impl.o: tests/gen_impl.c $(HEADERS)
	@tests/fuzz/check_libfuzzer.sh "$(FUZZ_CC)"
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_IMPL_FLAGS) -c $< -o $@
build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c build/fuzz/kern_impl.o $(FUZZ_DEPS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -DKT_LINKED $< build/fuzz/kern_impl.o -o $@ -lm -lpthread

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@tests/fuzz/run "$(FUZZ_SECONDS)" $(FUZZERS)

# --- corpus replay in the test suites
REPLAY_NAMES := $(FUZZ_NAMES)
REPLAY_DEF = -DKF_REPLAY -DKF_CORPUS='"tests/fuzz/corpus/$*"'

# Every replay is built by mk/linked.mk, against its flavour's implementation object.
REPLAY_TESTS       := $(patsubst %,build/tests/fuzz_replay_%,$(REPLAY_NAMES))
REPLAY_ASAN_TESTS  := $(patsubst %,build/asan/fuzz_replay_%,$(REPLAY_NAMES))
REPLAY_UBSAN_TESTS := $(patsubst %,build/ubsan/fuzz_replay_%,$(REPLAY_NAMES))
TESTS       += $(REPLAY_TESTS)
ASAN_TESTS  += $(REPLAY_ASAN_TESTS)
UBSAN_TESTS += $(REPLAY_UBSAN_TESTS)
SAN_TESTS   += $(patsubst %,build/san/fuzz_replay_%,$(REPLAY_NAMES))
test: $(REPLAY_TESTS)
asan: $(REPLAY_ASAN_TESTS)
ubsan: $(REPLAY_UBSAN_TESTS)
sanitize: $(patsubst %,build/san/fuzz_replay_%,$(REPLAY_NAMES))

# --- ThreadSanitizer: every test binary and the replays. TSAN_CC: clang
# (or gcc >= 12); -O1 keeps the run time bearable; KT_SANITIZER shrinks
# the largest cases as for ASan/UBSan; KT_TSAN runs the lowest and best ISA
# levels only (tests/kt.h: the races live in the task decompositions).
TSAN_CC    ?= clang
TSAN_FLAGS = -O1 $(DEBUG_INFO) -fno-omit-frame-pointer -fsanitize=thread $(WARN) -std=c11 -D_GNU_SOURCE \
              $(INC) -DKT_SANITIZER -DKT_TSAN
TSAN_TESTS := $(patsubst tests/%.c,build/tsan/%,$(TEST_SRC)) \
              $(patsubst %,build/tsan/fuzz_replay_%,$(REPLAY_NAMES))

TSAN_COMPILE = $(TSAN_CC) $(TSAN_FLAGS)

build/tsan/%: tests/%.c $(HEADERS) tests/kt.h
	@mkdir -p $(@D)
	$(TSAN_COMPILE) $< -o $@ $(LIBS)

tsan: $(TSAN_TESTS)
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)" tests/run $(TSAN_TESTS)
