// Whether this test binary is built with AddressSanitizer (the instrumented build, PODSCOPE_SANITIZE): the few tests
// that cannot run instrumented skip there, saying why. GCC defines __SANITIZE_ADDRESS__; clang 14 (Debian 12's)
// only answers __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PODSCOPE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PODSCOPE_SANITIZED 1
#endif
#endif
