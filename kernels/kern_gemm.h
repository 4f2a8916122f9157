/* kern_gemm.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_GEMM_H
#define KERN_GEMM_H
#include "kern_base.h"
#endif /* KERN_GEMM_H */
