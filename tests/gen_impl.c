/* kern's implementation in its own translation unit, compiled once per
 * build flavour: build/gen/kern_impl.o (plain -O2) for the generated-model
 * checks (mk/gen.mk), the test programs and fuzz replays that use only the
 * public API and build/kern-run; build/san, build/tsan, build/fuzz, ...
 * for the sanitizer flavours (mk/linked.mk). Those programs include the
 * headers without KERN_IMPLEMENTATION (-DKT_LINKED) and compile in a
 * second or two instead of minutes. */
#define KERN_IMPLEMENTATION
#include "kern.h"
