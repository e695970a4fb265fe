/*
 * sha256.h - SHA-256 (FIPS 180-4), used to content-hash DAG versions and
 * task templates.
 *
 * Role: dag.c hashes the canonical JSON form of a DAG or template with it;
 * the hex digest is the identity of an immutable version in PostgreSQL.
 * Invariants: pure computation, no allocation, thread-safe per context.
 * Workload: a few kilobytes per DAG submission; speed is not critical.
 */
#ifndef AX_SHA256_H
#define AX_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define AX_SHA256_LEN     32 /* digest bytes */
#define AX_SHA256_HEX_LEN 65 /* hex digest + NUL */

typedef struct ax_sha256 {
	uint32_t h[8];
	uint64_t nbytes;  /* message bytes consumed so far */
	uint8_t  buf[64]; /* partial block */
	size_t   nbuf;    /* bytes used in buf */
} ax_sha256;

void ax_sha256_init(ax_sha256 *c);
void ax_sha256_update(ax_sha256 *c, const void *data, size_t len);
/* Writes the 32-byte digest; the context must be re-initialised after. */
void ax_sha256_final(ax_sha256 *c, uint8_t out[AX_SHA256_LEN]);

/* One-shot: lowercase hex digest of data into hex (65 bytes with NUL). */
void ax_sha256_hex(const void *data, size_t len, char hex[AX_SHA256_HEX_LEN]);

#endif /* AX_SHA256_H */
