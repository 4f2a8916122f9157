/* kern_sparse24.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_SPARSE24_H
#define KERN_SPARSE24_H
#include "kern_base.h"
#endif /* KERN_SPARSE24_H */
