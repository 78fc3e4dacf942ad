// CHECK macros for broken invariants: print file:line and the condition, then abort.
// Recoverable errors are Status values (base/status.h), never CHECKs.
#pragma once

#include <cstdio>
#include <cstdlib>

#define DDPSCOPE_CHECK(cond)                                                        \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#define DDPSCOPE_CHECK_MSG(cond, msg)                                                           \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #cond, (msg)); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

#define CHECK(cond) DDPSCOPE_CHECK(cond)
#define CHECK_EQ(a, b) DDPSCOPE_CHECK((a) == (b))
#define CHECK_NE(a, b) DDPSCOPE_CHECK((a) != (b))
#define CHECK_LT(a, b) DDPSCOPE_CHECK((a) < (b))
#define CHECK_LE(a, b) DDPSCOPE_CHECK((a) <= (b))
#define CHECK_GE(a, b) DDPSCOPE_CHECK((a) >= (b))
#define CHECK_GT(a, b) DDPSCOPE_CHECK((a) > (b))
