/* kern.h — umbrella header: every kern kernel family.
 *
 *     #define KERN_IMPLEMENTATION   (in exactly one .c file)
 *     #include "kern.h"
 *
 * Build with -Iinclude -Ikernels, or vendor dist/kern.h (make amalgamate),
 * which holds all of this in one file. See README.md.
 */
#ifndef KERN_H
#define KERN_H
#include "kern_base.h"
#include "kern_gemm.h"
#include "kern_norm.h"
#include "kern_qgemm.h"
#include "kern_sparse24.h"
#include "kern_sdpa.h"
#include "kern_scatter.h"
#include "kern_spmm.h"
#include "kern_llm.h"
#include "kern_safetensors.h"
#include "kern_graph.h"
#endif /* KERN_H */
