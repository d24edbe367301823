// Rendezvous: where the ranks of a tensor-parallel group meet to set up
// their connections. Two forms:
//   file:///path/to/store   a c10d FileStore (ranks on one machine sharing a
//                           file system; the engine's default, in a fresh
//                           temporary directory)
//   tcp://host:port         a c10d TCPStore served by rank 0 on host:port
//                           (ranks on one or several machines)
#pragma once

#include <string>

namespace nnsight::tp {

struct Rendezvous {
  enum class Kind { kFile, kTcp };
  Kind kind = Kind::kFile;
  std::string path;  // kFile
  std::string host;  // kTcp
  int port = 0;      // kTcp, 1..65535

  // Throws nnsight::ConfigError naming the spec and what is wrong with it.
  static Rendezvous parse(const std::string& spec);
  std::string str() const;
  bool loopback() const;  // a file store, or a TCP store on 127.x / localhost / ::1
};

}  // namespace nnsight::tp
