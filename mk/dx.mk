# mk/dx.mk — using kern from outside the tree: the prebuilt library, install
# and uninstall (pkg-config and CMake packages), the examples, the doc check.
#
# make lib         build/libkern.a and build/libkern.so(.0): the whole
#                  implementation compiled once (cmake/kern_lib.c), -fPIC,
#                  runtime ISA dispatch inside, only kern_* exported (KERN_0).
# make examples    examples/*.c (C11) and examples/*.cpp (C++17), each
#                  including <kern/kern.h> and linked against build/libkern.a;
#                  `make test` runs them (one summary line each).
# make doc-check   compile every ```c block of README.md and docs/*.md
#                  (tests/doc_check.py); `make test` runs it too.
# make install PREFIX=... [DESTDIR=...] [LIBDIR=...]
#                  headers in $(PREFIX)/include/kern/, the libraries, kern.pc
#                  (header-only) and kern-lib.pc, the CMake package in
#                  $(LIBDIR)/cmake/kern; every path written is recorded in
#                  $(PREFIX)/share/kern/install_manifest.txt.
# make uninstall PREFIX=...   removes exactly what that manifest lists.
# make install-check   install into a temporary prefix, build and run an
#                  example with pkg-config and with CMake (header-only and
#                  linked), uninstall, check the prefix is empty (.ci/run).

LIBDIR     ?= $(PREFIX)/lib
KERN_SOVER := 0

# The public headers as an installed tree sees them: build/include/kern/X.h
# links to include/X.h or kernels/X.h, so in-tree programs include
# <kern/kern.h> exactly like installed ones (-Ibuild/include).
PUB_HEADERS    := $(wildcard include/*.h) $(wildcard kernels/*.h)
STAGED_HEADERS := $(addprefix build/include/kern/,$(notdir $(PUB_HEADERS)))
build/include/kern/%.h: include/%.h
	@mkdir -p $(@D)
	@ln -sf ../../../$< $@
build/include/kern/%.h: kernels/%.h
	@mkdir -p $(@D)
	@ln -sf ../../../$< $@
stage-headers: $(STAGED_HEADERS)

LIB_CFLAGS = $(O) $(CFLAGS) $(WARN) -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Ibuild/include

build/lib/kern_lib.o: cmake/kern_lib.c $(HEADERS) | $(STAGED_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

# The archive's copy keeps kern__* local too (one object: nothing outside
# it refers to them).
build/libkern.a: build/lib/kern_lib.o
	objcopy -w --localize-symbol='kern__*' $< build/lib/kern_lib_a.o
	rm -f $@ && ar rcs $@ build/lib/kern_lib_a.o

build/libkern.so.$(KERN_SOVER): build/lib/kern_lib.o cmake/kern.map
	$(CC) -shared -Wl,-soname,libkern.so.$(KERN_SOVER) -Wl,--version-script=cmake/kern.map \
	    -Wl,--no-undefined $< -o $@ -lpthread -lm
build/libkern.so: build/libkern.so.$(KERN_SOVER)
	ln -sf libkern.so.$(KERN_SOVER) $@

lib: build/libkern.a build/libkern.so

# Examples: what a user would copy. Each prints "[name] N ok, M failed".
EX_C_SRC   := $(filter-out examples/basic.c,$(wildcard examples/*.c))
EX_CXX_SRC := $(wildcard examples/*.cpp)
EXAMPLES   := $(patsubst examples/%.c,build/examples/%,$(EX_C_SRC)) \
              $(patsubst examples/%.cpp,build/examples/%,$(EX_CXX_SRC))
build/examples/%: examples/%.c build/libkern.a | $(STAGED_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(O) $(CFLAGS) $(WARN) -Werror -std=c11 -Ibuild/include $< -o $@ build/libkern.a -lpthread -lm
build/examples/%: examples/%.cpp build/libkern.a | $(STAGED_HEADERS)
	@mkdir -p $(@D)
	$(CXX) $(O) $(CFLAGS) $(WARN) -Werror -std=c++17 -Ibuild/include $< -o $@ build/libkern.a -lpthread -lm
examples: $(EXAMPLES)

doc-check: $(STAGED_HEADERS)
	@tests/doc_check.py

all: examples
test: $(EXAMPLES) $(STAGED_HEADERS)
TESTS += $(EXAMPLES) tests/doc_check.py

install: lib dist/kern.h
	@PREFIX="$(PREFIX)" LIBDIR="$(LIBDIR)" DESTDIR="$(DESTDIR)" SOVER=$(KERN_SOVER) mk/install.sh install
uninstall:
	@PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" mk/install.sh uninstall
install-check: lib dist/kern.h
	@tests/install_check.sh

.PHONY: lib examples doc-check uninstall install-check stage-headers
