/* kern_spmm.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_SPMM_H
#define KERN_SPMM_H
#include "kern_base.h"
#endif /* KERN_SPMM_H */
