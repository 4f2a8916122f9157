/* kern_qgemm.h — placeholder: this kernel family is not implemented yet. */
#ifndef KERN_QGEMM_H
#define KERN_QGEMM_H
#include "kern_base.h"
#endif /* KERN_QGEMM_H */
