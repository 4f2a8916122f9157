/* kern_scatter.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_SCATTER_H
#define KERN_SCATTER_H
#include "kern_base.h"
#endif /* KERN_SCATTER_H */
