/* rpc_admission.h - who may call which server method, and how often: the
 * credentials of Unix peers, the identities of TLS peers, method roles,
 * and the rate limits. rpc_server.c asks it about every call before any
 * handler sees a byte; rpc_admission.c says in prose how a call is
 * admitted.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "rpc.h"

struct grpc_call;
struct rpc_admission;

/* Who may call a method. The server asks the policy's authorize() before
 * the handler sees anything and answers PERMISSION_DENIED when it says
 * no. */
enum rpc_role {
	RPC_ROLE_ANY = 0, /* whoever can connect (tests, health) */
	RPC_ROLE_SENSOR,  /* streams data in (Ingest) */
	RPC_ROLE_CLIENT,  /* reads (the public Symbols API) */
	/* Not a method's role: asked once per call (like RPC_ROLE_SENSOR), it
	 * says whether the peer sees every user's data; handlers read the
	 * answer with rpc_call_peer_is_admin(). */
	RPC_ROLE_ADMIN,
};

/* The server's policy (from rpc_server_opts). */
struct rpc_admission_policy {
	/* May peer call a method of this role? NULL denies every role but
	 * RPC_ROLE_ANY. ctx is passed through. */
	bool (*authorize)(const struct rpc_peer *peer, enum rpc_role role, void *ctx);
	void *ctx;
	/* Token buckets, 0: unlimited (burst 0: the rate). */
	uint32_t stream_msgs_per_s, stream_burst; /* per stream */
	uint32_t unary_calls_per_s, unary_burst;  /* per connection */
};

/* What admission learnt about one call's peer. */
struct rpc_admission_grant {
	/* The peer as authorize() saw it, without certificate names. */
	struct rpc_peer peer;
	bool unix_known; /* a Unix peer whose credentials are on record */
	bool is_sensor;  /* authorize() granted RPC_ROLE_SENSOR */
	bool is_admin;   /* authorize() granted RPC_ROLE_ADMIN */
};

/* A token bucket (one per stream, for its messages); zero it to start. */
struct rpc_admission_bucket {
	double tokens;
	uint64_t last_ns;
	bool primed;
};

/* policy is copied. Returns an owned admission (free it with
 * rpc_admission_free()), or NULL when out of memory. */
struct rpc_admission *rpc_admission_new(const struct rpc_admission_policy *policy);
/* Accepts NULL. */
void rpc_admission_free(struct rpc_admission *a);

/* Records the credentials of the peer on fd (borrowed; a connection just
 * accepted on a Unix listener, before gRPC reads from it), so calls on
 * that connection are judged by them. Thread-safe (the accept thread).
 * Returns 0, or the negative errno of rpc_unix_peer(): then nothing is
 * recorded and the caller closes the connection. */
int rpc_admission_add_unix(struct rpc_admission *a, int fd);

/* Judges a new call to a method of this role (unary or not) on the
 * connection gRPC names peer_key (borrowed, may be NULL). call (borrowed)
 * gives the TLS identity of a TCP peer; method names the method in debug
 * logs. Fills *ret (always) and returns RPC_OK, or the status to end the
 * call with (RPC_PERMISSION_DENIED, RPC_RESOURCE_EXHAUSTED) with
 * *ret_reason set to the text to send (static). Loop thread only. */
enum rpc_status rpc_admission_check_call(struct rpc_admission *a, struct grpc_call *call,
					 const char *peer_key, const char *method, enum rpc_role role,
					 bool unary, struct rpc_admission_grant *ret,
					 const char **ret_reason);

/* Judges one more message on a stream whose bucket is b: RPC_OK, or
 * RPC_RESOURCE_EXHAUSTED with *ret_reason set (static text). */
enum rpc_status rpc_admission_check_message(struct rpc_admission *a,
					    struct rpc_admission_bucket *b,
					    const char **ret_reason);
