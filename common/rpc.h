/* rpc.h - what every side of sonde's rpc shares: status codes, errors,
 * TLS settings, a peer's credentials, and process-wide set-up.
 *
 * gRPC core and protobuf-c are wrapped by the common/rpc*.c files and by
 * nothing else; no other file includes <grpc/grpc.h>. The wrapper has one
 * file per role, each with its own header:
 *   rpc_message.h    packing and unpacking of protobuf-c messages
 *   rpc_client.h     channels, unary calls and streams (the sensor, the CLI)
 *   rpc_server.h     the server loop and its calls (the symbolizer)
 *   rpc_admission.h  who may call what, and how often (the server's policy)
 * The sensor links rpc.c, rpc_message.c and rpc_client.c only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Same numbers as gRPC status codes. */
enum rpc_status {
	RPC_OK = 0,
	RPC_CANCELLED = 1,
	RPC_UNKNOWN = 2,
	RPC_INVALID_ARGUMENT = 3,
	RPC_DEADLINE_EXCEEDED = 4,
	RPC_NOT_FOUND = 5,
	RPC_PERMISSION_DENIED = 7,
	RPC_RESOURCE_EXHAUSTED = 8,
	RPC_FAILED_PRECONDITION = 9,
	RPC_UNIMPLEMENTED = 12,
	RPC_INTERNAL = 13,
	RPC_UNAVAILABLE = 14,
};

/* Filled by client calls on failure. */
struct rpc_error {
	enum rpc_status status;
	char message[256];
};

/* TLS material (file paths, PEM). Server: cert+key of the server and
 * client_ca for client certificates (required and verified). Client: ca
 * to verify the server, cert+key for its own certificate, server_name to
 * override the name checked against the server's certificate. */
struct rpc_tls {
	const char *ca;
	const char *cert;
	const char *key;
	const char *server_name;
};

/* What the server knows about a connection's peer. */
enum rpc_transport {
	RPC_TRANSPORT_UNIX,     /* accepted by rpc_server.c: credentials from SO_PEERCRED */
	RPC_TRANSPORT_TLS,      /* TCP, client certificate verified by the CA */
	RPC_TRANSPORT_INSECURE, /* plaintext TCP (explicitly allowed) */
};

#define RPC_PEER_MAX_GROUPS 64
#define RPC_PEER_MAX_NAMES 16

struct rpc_peer {
	enum rpc_transport transport;
	/* RPC_TRANSPORT_UNIX: the peer process at connect() time. */
	uint32_t uid, gid;
	int32_t pid;
	uint32_t groups[RPC_PEER_MAX_GROUPS]; /* supplementary (SO_PEERGROUPS) */
	size_t n_groups;
	/* RPC_TRANSPORT_TLS: subject CN and SAN entries of the verified
	 * client certificate (borrowed, valid during authorize). */
	const char *names[RPC_PEER_MAX_NAMES];
	size_t n_names;
};

/* The peer of a connected Unix socket fd (borrowed) as the kernel
 * recorded it at connect() (SO_PEERCRED, SO_PEERGROUPS): 0 with *ret
 * filled (transport RPC_TRANSPORT_UNIX, no names), or a negative errno
 * from getsockopt() (-EINVAL for a short answer), *ret untouched. A
 * server reads its callers with it, a client the process that listens. */
int rpc_unix_peer(int fd, struct rpc_peer *ret);

/* Reads the PEM file at path (at most 1 MiB) into a NUL-terminated
 * string: returns 0 with *ret malloc'd (the caller frees it), -EBADMSG
 * for an empty file or one of 1 MiB or more, -ENOMEM, or the negative
 * errno of open()/read(); *ret untouched on failure. For TLS files, read
 * before any sandbox. */
int rpc_pem_read(const char *path, char **ret);

/* Once per process, before threads that use rpc are started; and at the
 * end. They cannot fail (gRPC aborts if it cannot initialise). */
void rpc_global_init(void);
void rpc_global_shutdown(void);
