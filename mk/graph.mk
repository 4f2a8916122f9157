# mk/graph.mk — rules of the graph executor (include/kern_graph.h) and the
# safetensors reader/writer (include/kern_safetensors.h); docs/graph.md.
#
# make / make test   also build build/kern-run (tools/kern_run.c: IR +
#                    safetensors in, profile and outputs out) and run
#                    tests/kern_run_check.sh, which drives it end to end.
#                    tests/test_graph.c and tests/test_safetensors.c are
#                    picked up by the Makefile's tests/test_*.c rule.
# make fuzz-graph    libFuzzer harnesses of the IR reader and the
#                    safetensors reader (FUZZ_SECONDS each, default 20; the
#                    corpus in tests/fuzz/corpus/<name> grows in place).
#                    Needs clang with -fsanitize=fuzzer.
#
# Included at the end of the Makefile: the `test` recipe expands TESTS
# when it runs, so appending the script here adds it to that run.

build/kern-run: tools/kern_run.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $< -o $@ $(LIBS)

all: build/kern-run
test: build/kern-run
TESTS += tests/kern_run_check.sh

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_GRAPH   := build/fuzz/fuzz_ir build/fuzz/fuzz_safetensors
FUZZ_FLAGS   := -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11 -D_GNU_SOURCE
build/fuzz/fuzz_ir: tests/fuzz/fuzz_ir.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iinclude -Ikernels $< -o $@ -lm -lpthread
build/fuzz/fuzz_safetensors: tests/fuzz/fuzz_safetensors.c include/kern_base.h include/kern_safetensors.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iinclude $< -o $@ -lm -lpthread

.PHONY: fuzz-graph
fuzz-graph: $(FUZZ_GRAPH)
	@for f in $(FUZZ_GRAPH); do n=$$(basename $$f); echo "== $$n ($(FUZZ_SECONDS) s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 tests/fuzz/corpus/$$n 2>&1 | \
	  grep -E "stat::number_of_executed_units|ERROR|contract broken|SUMMARY" || exit 1; done
