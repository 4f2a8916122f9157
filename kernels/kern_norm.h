/* kern_norm.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_NORM_H
#define KERN_NORM_H
#include "kern_base.h"
#endif /* KERN_NORM_H */
