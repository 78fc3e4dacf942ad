// CHECK macros for broken invariants: print file:line and the condition, then abort.
// Recoverable errors are Status values (base/status.h), never CHECKs. Every macro carries the
// DDPSCOPE_ prefix so that none collides with another library's CHECK (glog, Abseil, Qt tests).
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

#define DDPSCOPE_CHECK_EQ(a, b) DDPSCOPE_CHECK((a) == (b))
#define DDPSCOPE_CHECK_NE(a, b) DDPSCOPE_CHECK((a) != (b))
#define DDPSCOPE_CHECK_LT(a, b) DDPSCOPE_CHECK((a) < (b))
#define DDPSCOPE_CHECK_LE(a, b) DDPSCOPE_CHECK((a) <= (b))
#define DDPSCOPE_CHECK_GE(a, b) DDPSCOPE_CHECK((a) >= (b))
#define DDPSCOPE_CHECK_GT(a, b) DDPSCOPE_CHECK((a) > (b))
