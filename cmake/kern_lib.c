/* kern_lib.c — the one translation unit of libkern.a / libkern.so
 * (`make lib`, or the kern_lib target of CMakeLists.txt).
 *
 * The whole implementation, compiled once with the runtime ISA dispatch
 * inside: build it with plain -O2 (no -march) and -fPIC, and it picks the
 * best path of the CPU it runs on. Only the public API keeps default
 * visibility (the build adds -fvisibility=hidden); cmake/kern.map then
 * exports kern_* (not the private kern__*) under the version node KERN_0.
 * Programs that link the library include the headers without
 * KERN_IMPLEMENTATION. */
#if !defined(KERN_API) && (defined(__GNUC__) || defined(__clang__))
#  define KERN_API extern __attribute__((visibility("default")))
#endif
#define KERN_IMPLEMENTATION
#include <kern/kern.h>
