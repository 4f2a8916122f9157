/* kern_sdpa.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_SDPA_H
#define KERN_SDPA_H
#include "kern_base.h"
#endif /* KERN_SDPA_H */
