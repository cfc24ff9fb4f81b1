/* Mbed TLS configuration for the board firmware (MBEDTLS_CONFIG_FILE, set
 * by firmware/Makefile), replacing the library's full default config.h.
 *
 * The firmware takes only SHA-256 from Mbed TLS (library/sha256.c, plus
 * platform_util.c for mbedtls_platform_zeroize); src/core/sha256.cpp builds
 * the deploy cache's digest and the frame tags (HMAC, RFC 2104) on it. No
 * entropy, no time, no file system, no platform layer: nothing that would
 * allocate or call the OS. The host build uses Debian's libmbedcrypto and its
 * own configuration instead; both compute the same function (FIPS 180-4),
 * which tests/sha256_test.cpp and the firmware tests check.
 */
#ifndef TS_MBEDTLS_CONFIG_H
#define TS_MBEDTLS_CONFIG_H

/* SHA-256 and SHA-224, the fully unrolled compression (MBEDTLS_SHA256_SMALLER
 * would trade about 1 kB of code for speed). */
#define MBEDTLS_SHA256_C

/* Nothing deprecated: only the *_ret functions exist. */
#define MBEDTLS_DEPRECATED_REMOVED

#include "mbedtls/check_config.h"

#endif /* TS_MBEDTLS_CONFIG_H */
