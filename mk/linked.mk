# mk/linked.mk — test programs and fuzz harnesses that use only kern's
# public API link the implementation compiled once per build flavour
# (tests/gen_impl.c) instead of compiling all of it themselves: with
# -DKT_LINKED they include the headers without KERN_IMPLEMENTATION. On 2
# cores this takes minutes off every flavour of make test / sanitize /
# tsan / fuzz. The internals test_api and test_base use are KERN_API
# declarations (kern__op_begin, kern__workspace, ...), as are the few that
# test_graph (the memory planner, the checker's fault hook), test_norm
# (its table's name) and test_sdpa (its ISA tables) reach. The tests of
# static internals (generated vector bodies and their tables: test_gemm,
# test_math, test_qgemm, test_sparse24) still compile the implementation
# themselves.
# The libFuzzer targets link build/fuzz/kern_impl.o the same way (mk/fuzz.mk).
# Included after mk/fuzz.mk (REPLAY_NAMES, FUZZ_DEPS, TSAN_COMPILE).

LINKED_NAMES := test_api test_base test_fault test_graph test_llm test_norm test_sam test_safetensors test_scatter \
                test_sdpa test_spmm test_threads

# $(call KT_LINKED_RULES,DIR,IMPL_OBJECT,COMPILE): every linked test and
# fuzz replay of the flavour built in DIR with COMPILE, linking IMPL_OBJECT.
define KT_LINKED_RULES
$(patsubst %,$(1)/%,$(LINKED_NAMES)): $(1)/%: tests/%.c $(2) tests/kt.h $(HEADERS)
	@mkdir -p $$(@D)
	$(3) -DKT_LINKED $$< $(2) -o $$@ $(LIBS)
$(patsubst %,$(1)/fuzz_replay_%,$(REPLAY_NAMES)): $(1)/fuzz_replay_%: tests/fuzz/fuzz_%.c $(2) $(FUZZ_DEPS)
	@mkdir -p $$(@D)
	$(3) -DKT_LINKED -Itests/fuzz $$(REPLAY_DEF) $$< $(2) -o $$@ $(LIBS)
endef

# Each flavour's implementation object: $(call KT_IMPL_RULE,DIR,COMPILE).
# build/gen/kern_impl.o (mk/gen.mk) is the plain flavour's.
define KT_IMPL_RULE
$(1)/kern_impl.o: tests/gen_impl.c $(HEADERS)
	@mkdir -p $$(@D)
	$(2) -c $$< -o $$@
endef
$(eval $(call KT_IMPL_RULE,build/san,$$(SAN_COMPILE)))
$(eval $(call KT_IMPL_RULE,build/asan,$$(ASAN_COMPILE)))
$(eval $(call KT_IMPL_RULE,build/ubsan,$$(UBSAN_COMPILE)))
$(eval $(call KT_IMPL_RULE,build/tsan,$$(TSAN_COMPILE)))

$(eval $(call KT_LINKED_RULES,build/tests,build/gen/kern_impl.o,$$(CC) $$(BASEFLAGS)))
$(eval $(call KT_LINKED_RULES,build/san,build/san/kern_impl.o,$$(SAN_COMPILE)))
$(eval $(call KT_LINKED_RULES,build/asan,build/asan/kern_impl.o,$$(ASAN_COMPILE)))
$(eval $(call KT_LINKED_RULES,build/ubsan,build/ubsan/kern_impl.o,$$(UBSAN_COMPILE)))
$(eval $(call KT_LINKED_RULES,build/tsan,build/tsan/kern_impl.o,$$(TSAN_COMPILE)))
