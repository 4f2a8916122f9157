# mk/gen.mk -- gen/kern_gen.py, the ahead-of-time generator (docs/gen.md).
#
# make test   generates a header for every tests/gen/NAME.kg (binding in
#             GEN_BIND_NAME), compiles it with tests/gen_model_check.c
#             against kern's implementation built once (build/gen/
#             kern_impl.o) and runs it: outputs equal kern_graph_run's bit
#             for bit. tests/gen_check.sh checks the command line (bad
#             input: message, exit 2, no file left; standalone kernels).
# make gen-compile-check   generated samples (plain; with GEMM and norm
#             instances and safetensors; standalone gemm, norm, sdpa,
#             decode_attention, f32
#             and bf16) as C99, C11 (gcc, clang)
#             and C++17 (g++, clang++), -Wall -Wextra -Werror -pedantic,
#             declarations only and with its implementation; part of
#             make compile-check.

GEN_MODELS := bert1 bert2 synth decomposed_ln qsynth bert2_bf16 synth_bf16 dsynth wide wide_bf16 llama_tiny llama_wide dattn relsynth relsynth_bf16 sam_tiny sam_tiny_bf16
GEN_BIND_bert1 := B=2,L=7
GEN_BIND_bert2 := B=2,L=9
GEN_BIND_synth := B=2,L=5
GEN_BIND_decomposed_ln := B=3,L=4
GEN_BIND_qsynth := B=2,L=5
GEN_BIND_dsynth := B=2,L=5
# SAM's pieces: attention with the decomposed relative-position bias
# (sdpa_relpos; a 3 x 4 grid, with and without a scale) and 2:4 sparse
# linears pruned at prepare (every epilogue sparse24_linear takes; one
# weight shared by two nodes); the bf16 twin runs dense tiles on AMX, as
# the executor does
GEN_BIND_relsynth := B=2
GEN_BIND_relsynth_bf16 := B=2
# SAM's image encoder as models/sam.py exports it (the command in each
# file's second line; no symbolic dims): window partition with padding,
# sdpa_relpos, the neck's convolutions as im2col + linear; f32 and as
# torch.autocast(bfloat16) runs it
# a decoder through the caller's KV caches (f32, i8, bf16): 3 new rows per
# sequence after k_lens in [0, 12) cached ones (GEN_IDMAX: ids and lengths),
# and llama_tiny_dec, one row (decode)
GEN_BIND_llama_tiny := B=2,L=3
GEN_FLAGS_llama_tiny := -DGEN_IDMAX=12
# the same with D = Dv = 24 (16-lane steps and an 8-lane tail), four query
# heads on one KV head, all four cache dtypes and up to 280 cached rows (3
# splits of the decode-attention instances, several softmax chunks each)
GEN_BIND_llama_wide := B=2,L=3
GEN_FLAGS_llama_wide := -DGEN_IDMAX=280
# decode_attention alone (tests/gen/dattn.kg: every cache dtype, GQA, D
# with and without an 8-lane tail, i8 row scales), the instances against
# kern_decode_attention output by output: 3 new rows, and one (dattn_dec)
GEN_BIND_dattn := B=3,L=3
GEN_FLAGS_dattn := -DGEN_IDMAX=298
# (measured: within 1e-6 of each output's largest magnitude)
GEN_TOL_dattn := 2e-6
# bf16 graphs: bert2 as torch.autocast(bfloat16) runs it (gen/bert_ir.py
# --dtype bf16: linears and attention bf16, LayerNorms f32), and a synthetic
# graph with bf16 linears (every epilogue) and bf16 norms
GEN_BIND_bert2_bf16 := B=2,L=9
GEN_BIND_synth_bf16 := B=2,L=5
# linears whose x (58 x 1234) is past 256 KiB: through --specialize-max-m,
# GEMM instances with K in blocks (624 and 610; f32), one with its bias in
# the kernel, one with an act (the epilogue); f32 and bf16
GEN_BIND_wide := B=2,L=29
GEN_BIND_wide_bf16 := B=2,L=29
# Each model twice: NAME.h with the generator's passes (the executor's
# epilogue, residual+norm, norm+act and DCE) against the executor with
# the passes the generator does not repeat switched off (decomposed
# patterns, Q/K/V merge), and NAME_unfused.h (--no-fuse all) against the
# executor with every pass but prepacking, in-place and DCE off.
GEN_FUSED := (KERN_GRAPH_PASS_DECOMPOSED)
GEN_UNFUSED := (KERN_GRAPH_PASS_ALL & ~(KERN_GRAPH_PASS_PREPACK | KERN_GRAPH_PASS_INPLACE | KERN_GRAPH_PASS_DCE))
# NAME_spec.h (--specialize-max-m 64: small-M linears through generated
# GEMM instances) is another summation order: within 1e-4 of each output's
# largest magnitude (GEN_TOL_NAME for the bf16 graphs, below).
GEN_SPEC_MODELS := bert1 bert2 synth bert2_bf16 synth_bf16 wide wide_bf16 llama_tiny llama_wide dattn sam_tiny
# In a bf16 graph a linear's f32 sum that differs from kern_gemm's in its
# last bits can round to the neighbouring bf16 value (one ulp, 2^-7 of
# it), and a norm instance's statistics differ from kern_norm's shifted
# sums likewise: two bf16 ulps of the largest magnitude (kt_tol's bf16
# rtol) let one such step pass through the ops after it. Measured: 1.8e-7
# (bert2_bf16, outputs f32 after a LayerNorm), 0 (synth_bf16).
GEN_TOL_bert2_bf16 := 1.6e-2
GEN_TOL_synth_bf16 := 1.6e-2
GEN_TOL_wide_bf16 := 1.6e-2
# NAME_q8.h (--quantize '*': linears -> int8 dynamic qlinear, as the
# executor's params.quantize) against the executor quantizing the same
# linears: the same kern_qlinear calls on the same packed weights, bit for
# bit.
GEN_Q8_MODELS := bert1 bert2 qsynth llama_tiny sam_tiny
# NAME_q8spec.h (--quantize '*' --specialize-max-m 64): the qlinears through
# qlinear instances (kern_qlinear's bits) and the rest as NAME_spec.h:
# within 1e-4 of each output's largest magnitude.
GEN_Q8SPEC_MODELS := bert1 qsynth
# NAME_s24.h (--quantize '*attn*' --sparsify '*mlp*': SAM's last step,
# attention linears int8 and MLP linears 2:4, pruned at prepare; the bf16
# graph's on AMX as dense tiles) against the executor with the same
# params.quantize and params.sparsify: bit for bit.
GEN_S24_MODELS := sam_tiny sam_tiny_bf16
# NAME_q24.h (--quantize '*' --sparsify '*mlp*': every linear int8 and the
# MLP's int8 + 2:4, qlinear prune=1: pruned then quantized at prepare)
# against the executor with the same params: bit for bit.
GEN_Q24_MODELS := sam_tiny
# BERT-base itself (gen/bert_ir.py's defaults: 12 layers, hidden 768, vocab
# 30522) at B=1, L=9, default passes, bit for bit (GEN_BIG: uniform
# weights, the scalar level once); and bert2 at B=1, L=6, where every
# linear has at most 8 rows and the executor (and the generated code)
# stream the unpacked weights through kern_linear_gemv.
GEN_CHECKS_EXTRA := build/gen/check_bert_base build/gen/check_bert2_gemv build/gen/check_llama_tiny_dec \
                    build/gen/check_llama_tiny_dec_spec build/gen/check_llama_wide_dec_spec \
                    build/gen/check_dattn_dec_spec
GEN_CHECKS := $(patsubst %,build/gen/check_%,$(GEN_MODELS)) $(GEN_CHECKS_EXTRA) \
              $(patsubst %,build/gen/check_%_unfused,$(GEN_MODELS)) \
              $(patsubst %,build/gen/check_%_spec,$(GEN_SPEC_MODELS)) \
              $(patsubst %,build/gen/check_%_q8,$(GEN_Q8_MODELS)) \
              $(patsubst %,build/gen/check_%_q8spec,$(GEN_Q8SPEC_MODELS)) \
              $(patsubst %,build/gen/check_%_s24,$(GEN_S24_MODELS)) \
              $(patsubst %,build/gen/check_%_q24,$(GEN_Q24_MODELS))

build/gen/kern_impl.o: tests/gen_impl.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -c $< -o $@

.PRECIOUS: build/gen/%.h
build/gen/%_unfused.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --no-fuse all --name $*_unfused -o $@
build/gen/%_spec.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --specialize-max-m 64 --name $*_spec -o $@
build/gen/bert_base.kg: gen/bert_ir.py
	@mkdir -p $(@D)
	$(PYTHON) gen/bert_ir.py -o $@
build/gen/bert_base.h: build/gen/bert_base.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind B=1,L=9 --name bert_base -o $@
build/gen/bert2_gemv.h: tests/gen/bert2.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< --bind B=1,L=6 --name bert2_gemv -o $@
build/gen/llama_tiny_dec.h: tests/gen/llama_tiny.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< --bind B=2,L=1 --name llama_tiny_dec -o $@
# one decode step through the decode-attention instances (with the GEMM
# and norm instances: within GEN_TOL)
build/gen/llama_%_dec_spec.h: tests/gen/llama_%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< --bind B=2,L=1 --specialize-max-m 64 --name llama_$*_dec_spec -o $@
build/gen/%_q8spec.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --quantize '*' --specialize-max-m 64 --name $*_q8spec -o $@
build/gen/%_s24.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --quantize '*attn*' --sparsify '*mlp*' --name $*_s24 -o $@
build/gen/%_q24.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --quantize '*' --sparsify '*mlp*' --name $*_q24 -o $@
build/gen/%_q8.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --quantize '*' --name $*_q8 -o $@
build/gen/%.h: tests/gen/%.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< $(if $(GEN_BIND_$*),--bind $(GEN_BIND_$*)) --name $* -o $@

# check_NAME[_unfused|_spec]: $(1) the model, $(2) the header's name, $(3)
# the executor's disabled passes, $(4) extra flags
# (GEN_DEFS_NAME: the check's defines, also for the sanitizer flavours below)
define GEN_CHECK_RULE
GEN_DEFS_$(2) := -DGEN_HEADER='"$(2).h"' -DGEN_NAME=$(2) -DGEN_UNAME=$(shell echo $(2) | tr a-z A-Z) \
  -D$(shell echo $(2) | tr a-z A-Z)_IMPLEMENTATION -DGEN_IR='"$(if $(5),$(5),tests/gen/$(1).kg)"' \
  -DGEN_DISABLE='$(3)' $(4)
build/gen/check_$(2): tests/gen_model_check.c build/gen/$(2).h build/gen/kern_impl.o tests/kt.h
	$$(CC) $$(O) $$(CFLAGS) $$(WARN) -Werror -std=c11 -D_GNU_SOURCE $$(INC) -Ibuild/gen $$(GEN_DEFS_$(2)) \
	  $$< build/gen/kern_impl.o -o $$@ $$(LIBS)
endef
$(eval $(call GEN_CHECK_RULE,bert_base,bert_base,$(GEN_FUSED),-DGEN_BIG=1,build/gen/bert_base.kg))
build/gen/check_bert_base: build/gen/bert_base.kg
$(eval $(call GEN_CHECK_RULE,bert2,bert2_gemv,$(GEN_FUSED)))
$(eval $(call GEN_CHECK_RULE,llama_tiny,llama_tiny_dec,$(GEN_FUSED),-DGEN_IDMAX=12))
$(eval $(call GEN_CHECK_RULE,llama_tiny,llama_tiny_dec_spec,$(GEN_FUSED),-DGEN_TOL=1e-4 -DGEN_IDMAX=12))
$(eval $(call GEN_CHECK_RULE,llama_wide,llama_wide_dec_spec,$(GEN_FUSED),-DGEN_TOL=1e-4 -DGEN_IDMAX=280))
$(eval $(call GEN_CHECK_RULE,dattn,dattn_dec_spec,$(GEN_FUSED),-DGEN_TOL=2e-6 -DGEN_IDMAX=301))
build/gen/dattn_dec_spec.h: tests/gen/dattn.kg gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py model $< --bind B=2,L=1 --specialize-max-m 64 --name dattn_dec_spec -o $@
$(foreach m,$(GEN_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m),$(GEN_FUSED),$(GEN_FLAGS_$(m)))))
$(foreach m,$(GEN_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m)_unfused,$(GEN_UNFUSED),$(GEN_FLAGS_$(m)))))
$(foreach m,$(GEN_SPEC_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m)_spec,$(GEN_FUSED),-DGEN_TOL=$(or $(GEN_TOL_$(m)),1e-4) $(GEN_FLAGS_$(m)))))
$(foreach m,$(GEN_Q8_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m)_q8,$(GEN_FUSED),-DGEN_QUANTIZE='"*"' $(GEN_FLAGS_$(m)))))
$(foreach m,$(GEN_S24_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m)_s24,$(GEN_FUSED),-DGEN_QUANTIZE='"*attn*"' -DGEN_SPARSIFY='"*mlp*"')))
$(foreach m,$(GEN_Q24_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m)_q24,$(GEN_FUSED),-DGEN_QUANTIZE='"*"' -DGEN_SPARSIFY='"*mlp*"')))
$(foreach m,$(GEN_Q8SPEC_MODELS),$(eval $(call GEN_CHECK_RULE,$(m),$(m)_q8spec,$(GEN_FUSED),-DGEN_QUANTIZE='"*"' -DGEN_TOL=1e-4)))

# standalone GEMM instances (kern_gen.py gemm): tails in M, N and K, the
# two-accumulator-set small-M tiles, a BERT-sized one, a blocking other
# than the default (what --autotune may choose: 4-row tiles with two
# accumulator sets, K unrolled by 8 with a tail), and two whose x is past
# 256 KiB (gen/kern_gen.py gemm_kblock: K blocks, f32):
# gemm_e three K blocks (1240, 1240, 1222: the last with an unroll tail),
# 37 rows in tiles of 6 and 5, 50 columns; gemm_f two (504, 497) with 3-
# and 2-row tiles of two accumulator sets, K unrolled by 8; gemm_c (M 1)
# and gemm_g (M 2, K unrolled by 8 with a tail) walk 4 and 2 panels at once
# (gemm_pwalk) beside single panels (a task's last ones, the partial one)
build/gen/gemm_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 5 --n 37 --k 70 -o $@
build/gen/gemm_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 16 --n 96 --k 768 -o $@
build/gen/gemm_c.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 1 --n 100 --k 33 -o $@
build/gen/gemm_d.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 7 --n 50 --k 37 --blocking 4,4,8,1 --threads 2 -o $@
build/gen/gemm_e.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 37 --n 50 --k 3702 -o $@
build/gen/gemm_f.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 70 --n 33 --k 1001 --blocking 3,3,8 -o $@
build/gen/gemm_g.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m 2 --n 70 --k 45 --blocking 6,3,8 -o $@
# bf16 twins of the seven (kern_gen.py gemm --dtype bf16)
build/gen/gemm_bf_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 5 --n 37 --k 70 -o $@
build/gen/gemm_bf_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 16 --n 96 --k 768 -o $@
build/gen/gemm_bf_c.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 1 --n 100 --k 33 -o $@
build/gen/gemm_bf_d.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 7 --n 50 --k 37 --blocking 4,4,8 -o $@
build/gen/gemm_bf_e.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 37 --n 50 --k 3702 -o $@
build/gen/gemm_bf_f.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 70 --n 33 --k 1001 --blocking 3,3,8 -o $@
build/gen/gemm_bf_g.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m 2 --n 70 --k 45 --blocking 6,3,8 -o $@
GEN_GEMM_HEADERS := $(patsubst %,build/gen/gemm_%.h,a b c d e f g bf_a bf_b bf_c bf_d bf_e bf_f bf_g)
build/gen/check_gemm: tests/gen_gemm_check.c $(GEN_GEMM_HEADERS) build/gen/kern_impl.o tests/kt.h
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -D_GNU_SOURCE $(INC) -Ibuild/gen $< build/gen/kern_impl.o -o $@ $(LIBS)
GEN_CHECKS += build/gen/check_gemm

# standalone int8 dynamic linear instances (kern_gen.py qlinear): tails in
# M, N and K, a BERT-sized one, one row, and a blocking other than the
# default (3-row tiles, K unrolled by 2 four-byte steps with a tail)
build/gen/qlinear_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py qlinear --m 5 --n 37 --k 70 -o $@
build/gen/qlinear_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py qlinear --m 16 --n 96 --k 768 -o $@
build/gen/qlinear_c.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py qlinear --m 1 --n 40 --k 33 -o $@
build/gen/qlinear_d.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py qlinear --m 7 --n 50 --k 37 --blocking 3,2 -o $@
build/gen/check_qlinear: tests/gen_qlinear_check.c build/gen/qlinear_a.h build/gen/qlinear_b.h build/gen/qlinear_c.h build/gen/qlinear_d.h build/gen/kern_impl.o tests/kt.h
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -D_GNU_SOURCE $(INC) -Ibuild/gen $< build/gen/kern_impl.o -o $@ $(LIBS)
GEN_CHECKS += build/gen/check_qlinear

# standalone norm instances (kern_gen.py norm): layer with a small H, rms
# with BERT's; bf16 the same (layer with bf16 weight and bias, rms with
# f32 ones)
build/gen/norm_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py norm --rows 5 --h 40 --kind layer -o $@
build/gen/norm_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py norm --rows 3 --h 768 --kind rms --eps 1e-6 -o $@
build/gen/norm_bf_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py norm --dtype bf16 --rows 5 --h 40 --kind layer -o $@
build/gen/norm_bf_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py norm --dtype bf16 --weight-dtype f32 --rows 3 --h 768 --kind rms --eps 1e-6 -o $@
build/gen/check_norm: tests/gen_norm_check.c $(patsubst %,build/gen/norm_%.h,a b bf_a bf_b) build/gen/kern_impl.o tests/kt.h
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -D_GNU_SOURCE $(INC) -Ibuild/gen $< build/gen/kern_impl.o -o $@ $(LIBS)
GEN_CHECKS += build/gen/check_norm

# standalone attention instances (kern_gen.py sdpa): decode with grouped
# heads, and causal with 3 queries; the same in bf16
build/gen/sdpa_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py sdpa --hq 4 --hkv 2 --lq 1 --lk 37 --d 24 -o $@
build/gen/sdpa_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py sdpa --hq 6 --hkv 2 --lq 3 --lk 50 --d 64 --causal -o $@
build/gen/sdpa_bf_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py sdpa --dtype bf16 --hq 4 --hkv 2 --lq 1 --lk 37 --d 24 -o $@
build/gen/sdpa_bf_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py sdpa --dtype bf16 --hq 6 --hkv 2 --lq 3 --lk 50 --d 64 --causal -o $@
build/gen/check_sdpa: tests/gen_sdpa_check.c $(patsubst %,build/gen/sdpa_%.h,a b bf_a bf_b) build/gen/kern_impl.o tests/kt.h
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -D_GNU_SOURCE $(INC) -Ibuild/gen $< build/gen/kern_impl.o -o $@ $(LIBS)
GEN_CHECKS += build/gen/check_sdpa

# standalone decode-attention instances (kern_gen.py decode_attention):
# f32 with GQA, 3 new rows, 64-row splits; bf16 q over an i8 cache (row
# scales), Dv != D, the [B, Hkv, Lmax, D] layout, i64 lengths; f32 q over
# an f16 cache in that layout, 256-row splits; bf16 q and cache, 512-row
# splits
build/gen/da_a.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py decode_attention --batch 2 --lq 3 --h 8 --hkv 2 --d 24 --lmax 300 --split 64 -o $@
build/gen/da_b.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py decode_attention --dtype bf16 --cache i8 --h 4 --d 32 --dv 16 --lmax 200 \
	  --layout bhsd --lens i64 --scale 0.3 -o $@
build/gen/da_c.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py decode_attention --cache f16 --batch 3 --lq 2 --h 6 --hkv 3 --d 40 --lmax 150 \
	  --layout bhsd --split 256 -o $@
build/gen/da_d.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py decode_attention --dtype bf16 --batch 2 --h 16 --hkv 2 --d 64 --lmax 520 \
	  --split 512 -o $@
build/gen/check_da: tests/gen_da_check.c $(patsubst %,build/gen/da_%.h,a b c d) build/gen/kern_impl.o tests/kt.h
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -D_GNU_SOURCE $(INC) -Ibuild/gen $< build/gen/kern_impl.o -o $@ $(LIBS)
GEN_CHECKS += build/gen/check_da

# kern_gen.py model --safetensors: bert1's weights in a safetensors file
# (tests/gen/write_st.py), NAME_prepare_safetensors against NAME_prepare
build/gen/bert1.safetensors: tests/gen/bert1.kg tests/gen/write_st.py gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) tests/gen/write_st.py $< $(GEN_BIND_bert1) $@
build/gen/bert1_st.h: tests/gen/bert1.kg build/gen/bert1.safetensors gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind $(GEN_BIND_bert1) --specialize-max-m 64 \
	  --safetensors build/gen/bert1.safetensors --name bert1_st -o $@
build/gen/check_st: tests/gen_st_check.c build/gen/bert1_st.h build/gen/kern_impl.o tests/kt.h
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -D_GNU_SOURCE $(INC) -Ibuild/gen $< build/gen/kern_impl.o -o $@ $(LIBS)
GEN_CHECKS += build/gen/check_st

test: $(GEN_CHECKS)
TESTS += $(GEN_CHECKS) tests/gen_check.sh

# make sanitize (ASan + UBSan) and make tsan run generated code too: the
# standalone instances (gemm, qlinear, norm, sdpa, decode_attention, the
# safetensors entry) and models that use every kind of instance (GEMM f32
# and bf16, qlinear, norm, decode attention) or none, each against the
# flavour's implementation (build/FLAVOUR/kern_impl.o); ThreadSanitizer
# the ones whose instances split work over the pool
GEN_SAN_NAMES := gemm qlinear norm sdpa da st bert1 bert1_spec synth_bf16_spec qsynth_q8spec llama_wide_dec_spec \
                 dattn_dec_spec sam_tiny_s24
GEN_TSAN_NAMES := gemm qlinear da bert1_spec llama_wide_dec_spec
# $(call GEN_FLAVOUR_RULES,DIR,COMPILE): a model's check (GEN_DEFS_NAME,
# from GEN_CHECK_RULE) and a standalone one (tests/gen_NAME_check.c)
define GEN_FLAVOUR_RULES
$(1)/gen/check_%: tests/gen_model_check.c build/gen/%.h $(1)/kern_impl.o tests/kt.h
	@mkdir -p $$(@D)
	$(2) -Ibuild/gen $$(GEN_DEFS_$$*) $$< $(1)/kern_impl.o -o $$@ $$(LIBS)
$(1)/gen/check_%: tests/gen_%_check.c build/gen/check_% $(1)/kern_impl.o tests/kt.h
	@mkdir -p $$(@D)
	$(2) -Ibuild/gen $$< $(1)/kern_impl.o -o $$@ $$(LIBS)
endef
$(eval $(call GEN_FLAVOUR_RULES,build/san,$$(SAN_COMPILE)))
$(eval $(call GEN_FLAVOUR_RULES,build/tsan,$$(TSAN_COMPILE)))
GEN_SAN_CHECKS := $(patsubst %,build/san/gen/check_%,$(GEN_SAN_NAMES))
GEN_TSAN_CHECKS := $(patsubst %,build/tsan/gen/check_%,$(GEN_TSAN_NAMES))
SAN_TESTS += $(GEN_SAN_CHECKS)
TSAN_TESTS += $(GEN_TSAN_CHECKS)
sanitize: $(GEN_SAN_CHECKS)
tsan: $(GEN_TSAN_CHECKS)

# make fuzz also runs tests/gen/fuzz_gen.py for FUZZ_SECONDS: the generator
# on mutated IR and safetensors inputs, every run a header or a message
.PHONY: fuzz-gen
fuzz-gen:
	$(PYTHON) tests/gen/fuzz_gen.py --seconds $(FUZZ_SECONDS)
fuzz: fuzz-gen

.PHONY: gen-compile-check
GEN_CC_CHECK := llama_tiny_dec dattn_dec_spec bert1 bert1_spec synth_bf16_spec bert1_st qsynth_q8 qsynth_q8spec dsynth gemm_a gemm_bf_a gemm_c gemm_bf_c \
                gemm_e gemm_bf_e qlinear_a norm_a norm_bf_a sdpa_b sdpa_bf_a da_b relsynth_bf16
gen-compile-check: $(patsubst %,build/gen/%.h,$(GEN_CC_CHECK))
	@tests/gen_compile_check.sh $(GEN_CC_CHECK)
compile-check: gen-compile-check

# bench/bench_gen.c (family `gen`): BERT-base (gen/bert_ir.py) at B=1,
# L=16 and 32, plain and specialized, and at B=8, L=128 plain (its M is
# past --specialize-max-m), and GEMM instances (f32 and bf16) M in 1, 4,
# 16, 64, N = K = 4096; under build/gen/bench so make test never builds
# them.
build/gen/bench/bert_base.kg: gen/bert_ir.py
	@mkdir -p $(@D)
	$(PYTHON) gen/bert_ir.py -o $@
build/gen/bench/bert_l%_spec.h: build/gen/bench/bert_base.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind B=1,L=$* --specialize-max-m 64 --name bert_l$*_spec -o $@
build/gen/bench/bert_l%.h: build/gen/bench/bert_base.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind B=1,L=$* --name bert_l$* -o $@
build/gen/bench/bert_b8_l128.h: build/gen/bench/bert_base.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind B=8,L=128 --name bert_b8_l128 -o $@
build/gen/bench/gemm_m%.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --m $* --n 4096 --k 4096 -o $@
# a chain of 1000 tiny LayerNorms: the per-node cost of a generated model
build/gen/bench/chain.kg:
	@mkdir -p $(@D)
	$(PYTHON) -c "import sys; n = 1000; print('kern-graph 1'); print('input x f32 [1,16]'); print('weight g f32 [16]'); [print('n%d = layer_norm(%s, g)' % (i, 'x' if i == 0 else 'n%d' % (i - 1))) for i in range(n)]; print('output n%d' % (n - 1))" > $@
build/gen/bench/chain.h: build/gen/bench/chain.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --name chain -o $@
build/gen/bench/qlinear_m%.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py qlinear --m $* --n 4096 --k 4096 -o $@
build/gen/bench/gemm_bf16_m%.h: gen/kern_gen.py
	@mkdir -p $(@D)
	$(PYTHON) gen/kern_gen.py gemm --dtype bf16 --m $* --n 4096 --k 4096 -o $@
# one decode step of the issue-size Llama (gen/llama_ir.py's defaults)
build/gen/bench/llama.kg: gen/llama_ir.py
	@mkdir -p $(@D)
	$(PYTHON) gen/llama_ir.py -o $@
build/gen/bench/llama_dec.h: build/gen/bench/llama.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind B=1,L=1 --name llama_dec -o $@
build/gen/bench/llama_dec_spec.h: build/gen/bench/llama.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --bind B=1,L=1 --specialize-max-m 8 --name llama_dec_spec -o $@
# decode attention alone at the issue size (16 query heads of 128 on 4 KV
# heads, 4160 cache rows), one IR per cache dtype: the library call (plain
# header) and the generated instance (--specialize-max-m)
build/gen/bench/dattn_%.kg:
	@mkdir -p $(@D)
	{ echo 'kern-graph 1'; echo 'input k_lens i64 [1]'; echo 'input q f32 [1,1,16,128]'; \
	  echo 'input k $* [1,4160,4,128]'; echo 'input v $* [1,4160,4,128]'; \
	  if [ $* = i8 ]; then echo 'input ks f32 [1,4160,4]'; echo 'input vs f32 [1,4160,4]'; \
	    echo 'y = decode_attention(q, k, v, k_lens, ks, vs)'; \
	  else echo 'y = decode_attention(q, k, v, k_lens)'; fi; echo 'output y'; } > $@
build/gen/bench/dattn_%_lib.h: build/gen/bench/dattn_%.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --name dattn_$*_lib -o $@
build/gen/bench/dattn_%_inst.h: build/gen/bench/dattn_%.kg gen/kern_gen.py
	$(PYTHON) gen/kern_gen.py model $< --specialize-max-m 64 --name dattn_$*_inst -o $@
GEN_BENCH_HEADERS := build/gen/bench/llama_dec.h build/gen/bench/llama_dec_spec.h \
                     $(foreach d,f32 bf16 i8,build/gen/bench/dattn_$(d)_lib.h build/gen/bench/dattn_$(d)_inst.h) \
                     $(patsubst %,build/gen/bench/bert_l%.h,16 32 16_spec 32_spec) \
                     build/gen/bench/bert_b8_l128.h \
                     $(patsubst %,build/gen/bench/gemm_m%.h,1 4 16 64) \
                     $(patsubst %,build/gen/bench/gemm_bf16_m%.h,1 4 16 64) \
                     $(patsubst %,build/gen/bench/qlinear_m%.h,1 4 16 64) \
                     build/gen/bench/chain.h
.PRECIOUS: $(GEN_BENCH_HEADERS) build/gen/bench/bert_base.kg build/gen/bench/chain.kg build/gen/bench/llama.kg \
           build/gen/bench/dattn_%.kg
build/bench/bench_gen.o: $(GEN_BENCH_HEADERS)
