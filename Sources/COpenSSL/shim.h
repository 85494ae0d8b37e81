// The OpenSSL 3 API as plait's Swift code sees it.
//
// Swift imports C functions but not function-like macros or variadic functions. Each
// `plait_` function below is a static inline shim over one such macro, named after what it
// wraps, so the Swift side calls the documented OpenSSL API and nothing else.

#ifndef PLAIT_COPENSSL_SHIM_H
#define PLAIT_COPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

// MARK: - Memory and BIOs

/// Wraps the macro `OPENSSL_free(addr)` (CRYPTO_free with file and line).
static inline void plait_OPENSSL_free(void *addr) {
    OPENSSL_free(addr);
}

/// Wraps the macro `BIO_get_mem_data(b, pp)` (BIO_ctrl with BIO_CTRL_INFO): points `*data` at a
/// memory BIO's contents, which stay owned by the BIO, and returns their length.
static inline long plait_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

// MARK: - Certificate stacks

/// Wraps the macro `sk_X509_num(sk)`: the number of certificates in a stack (-1 for NULL).
static inline int plait_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

/// Wraps the macro `sk_X509_value(sk, i)`: the certificate at `index`, still owned by the stack.
static inline X509 *plait_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

// MARK: - TLS context settings (SSL_CTX_ctrl macros)

/// Wraps the macro `SSL_CTX_set_min_proto_version(ctx, version)` (SSL_CTX_ctrl with
/// SSL_CTRL_SET_MIN_PROTO_VERSION). Returns 1 on success.
static inline int plait_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

/// Wraps the macro `SSL_CTX_set_max_proto_version(ctx, version)` (SSL_CTX_ctrl with
/// SSL_CTRL_SET_MAX_PROTO_VERSION). Returns 1 on success.
static inline int plait_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

/// Wraps the macro `SSL_CTX_set_mode(ctx, mode)` (SSL_CTX_ctrl with SSL_CTRL_MODE), e.g.
/// SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER. Returns the new mode bitmask.
static inline long plait_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

/// Wraps the macro `SSL_CTX_set_session_cache_mode(ctx, mode)` (SSL_CTX_ctrl with
/// SSL_CTRL_SET_SESS_CACHE_MODE); SSL_SESS_CACHE_OFF turns resumption off. Returns the old mode.
static inline long plait_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

/// Wraps the macro `SSL_CTX_set1_groups_list(ctx, list)` (SSL_CTX_ctrl with
/// SSL_CTRL_SET_GROUPS_LIST), e.g. "X25519:P-256". Returns 1 on success.
static inline int plait_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}

// MARK: - TLS options (SSL_OP_BIT macros)

/// Wraps the macro `SSL_OP_NO_TICKET` (SSL_OP_BIT(14), a shift Swift cannot import): no session
/// tickets. In TLS 1.3 it must go with SSL_CTX_set_num_tickets(ctx, 0), or the server still sends
/// stateful tickets.
static inline uint64_t plait_SSL_OP_NO_TICKET(void) {
    return SSL_OP_NO_TICKET;
}

// MARK: - Application data on SSL and SSL_CTX (ex_data macros)

/// Wraps the macro `SSL_set_app_data(ssl, arg)` (SSL_set_ex_data with index 0). Returns 1 on success.
static inline int plait_SSL_set_app_data(SSL *ssl, void *arg) {
    return SSL_set_app_data(ssl, arg);
}

/// Wraps the macro `SSL_get_app_data(ssl)` (SSL_get_ex_data with index 0).
static inline void *plait_SSL_get_app_data(const SSL *ssl) {
    return SSL_get_app_data(ssl);
}

/// Wraps the macro `SSL_CTX_set_app_data(ctx, arg)` (SSL_CTX_set_ex_data with index 0).
static inline int plait_SSL_CTX_set_app_data(SSL_CTX *ctx, void *arg) {
    return SSL_CTX_set_app_data(ctx, arg);
}

/// Wraps the macro `SSL_CTX_get_app_data(ctx)` (SSL_CTX_get_ex_data with index 0).
static inline void *plait_SSL_CTX_get_app_data(const SSL_CTX *ctx) {
    return SSL_CTX_get_app_data(ctx);
}

/// Wraps the macro `SSL_get_ex_new_index(argl, argp, new, dup, free)`
/// (CRYPTO_get_ex_new_index with CRYPTO_EX_INDEX_SSL), without callbacks. Returns -1 on failure.
static inline int plait_SSL_get_ex_new_index(long argl, void *argp) {
    return SSL_get_ex_new_index(argl, argp, NULL, NULL, NULL);
}

#endif
