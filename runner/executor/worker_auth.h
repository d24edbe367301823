// Worker authentication: a worker started by hand (`nnsight-worker --listen`)
// takes its engine arguments -- the model path, plugin libraries to load --
// from whoever connects, so it must know the connection is its engine's.
// With a shared secret (a file, or $NNSIGHT_WORKER_SECRET), each accepted
// connection first gets a challenge, before any message is read:
//
//   worker -> engine   "NNSIGHT-AUTH1" + 32 random bytes (OpenSSL RAND_bytes)
//   engine -> worker   HMAC-SHA256(secret, those 32 bytes)
//   worker -> engine   "Y" when it matches (else it closes the connection)
//
// The secret itself never crosses the wire; a wrong, late or missing answer
// closes the connection without decoding anything, and the worker keeps
// listening. Tensor-parallel traffic between ranks (gloo/NCCL, the TCP
// store) is not covered: it must run on a trusted network
// (docs/tensor_parallel.md).
#pragma once

#include <string>

namespace nnsight::runner {

// The secret: the file's contents (trailing newlines dropped) when `file` is
// set, else $NNSIGHT_WORKER_SECRET, else "" (no authentication). Throws
// ConfigError for an unreadable or empty file.
std::string load_worker_secret(const std::string& file);

// Worker side: sends a challenge on fd and checks the answer (timeout_s for
// it). False when the peer answered wrongly, late or not at all.
bool challenge_peer(int fd, const std::string& secret, double timeout_s);

// Engine side: reads the worker's challenge and answers it. Throws
// nnsight::Error naming `who` when no challenge arrives in time.
void answer_challenge(int fd, const std::string& secret, double timeout_s, const std::string& who);

}  // namespace nnsight::runner
