# Cross-compiling Ponder for 64-bit ARM Linux on a Debian/Ubuntu x86-64 host (scripts/cross_arm64.sh).
# Compilers: g++-aarch64-linux-gnu. Libraries: the multiarch :arm64 dev packages, which install into
# /usr/lib/aarch64-linux-gnu beside the host's; arch-independent ones (nlohmann-json, CLI11) are
# shared. Tests run through qemu-aarch64 (below), so gtest_discover_tests and ctest work unchanged.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(PONDER_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${PONDER_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${PONDER_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${PONDER_CROSS_TRIPLE})

# The cross toolchain's own root first, then the host root, where multiarch keeps the :arm64
# packages (CMAKE_LIBRARY_ARCHITECTURE steers library and package lookups to their
# lib/aarch64-linux-gnu directories). Programs are the host's.
set(CMAKE_FIND_ROOT_PATH /usr/${PONDER_CROSS_TRIPLE} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (PCRE2) must read the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR}
    "/usr/lib/${PONDER_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig:/usr/${PONDER_CROSS_TRIPLE}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Tests (gtest_discover_tests at build time, ctest) run through qemu-aarch64 with the ELF
# interpreter the binaries name, /lib/ld-linux-aarch64.so.1: the multiarch libc6:arm64, whose
# loader searches the multiarch directories of the :arm64 packages (libfmt, libstdc++) by itself.
# Not -L /usr/${PONDER_CROSS_TRIPLE}: that root's loader does not search there, and sent there
# (LD_LIBRARY_PATH) it loads libc6:arm64's libc, a build other than its own (2.36-8cross1 against
# 2.36-9+deb12u*): the first thread a test starts then hangs.
# -cpu max: every extension qemu knows, dotprod among them, without which the NEON x16 kernels are
# not chosen and their tests skip.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max)
