/* kern's implementation in its own translation unit, compiled once for the
 * generated-model checks (mk/gen.mk): each generated header then compiles
 * alone in about a second. */
#define KERN_IMPLEMENTATION
#include "kern.h"
