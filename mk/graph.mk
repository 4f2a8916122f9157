# mk/graph.mk — rules of the graph executor (include/kern_graph.h) and the
# safetensors reader/writer (include/kern_safetensors.h); docs/graph.md.
#
# make / make test   also build build/kern-run (tools/kern_run.c: IR +
#                    safetensors in, profile and outputs out) and run
#                    tests/kern_run_check.sh, which drives it end to end.
#                    tests/test_graph.c and tests/test_safetensors.c are
#                    picked up by the Makefile's tests/test_*.c rule; the
#                    harnesses tests/fuzz/fuzz_ir.c and fuzz_safetensors.c
#                    by mk/fuzz.mk (make fuzz, and the corpus replay in
#                    make test / asan / ubsan).
# make fuzz-graph    make fuzz for those two only (FUZZ_SECONDS each).
#
# Included at the end of the Makefile: the `test` recipe expands TESTS
# when it runs, so appending the script here adds it to that run.

build/kern-run: tools/kern_run.c build/gen/kern_impl.o $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DKT_LINKED $< build/gen/kern_impl.o -o $@ $(LIBS)

all: build/kern-run
test: build/kern-run
TESTS += tests/kern_run_check.sh

.PHONY: fuzz-graph
fuzz-graph:
	$(MAKE) fuzz FUZZERS="ir safetensors"
