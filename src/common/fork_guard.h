// Telling a child made by fork() from the process that opened a job. After fork() only the
// calling thread exists in the child: the parent's engine thread, I/O threads and their locks
// are copies that nobody will ever release, and the sockets are shared with the parent. So an
// object that belongs to the parent must not be used, stopped or destroyed in the child (it is
// leaked instead), and a collective called there fails at once.
//
//   const ForkOwner owner;                      // a member: made with the object
//   if (owner.inherited()) ...                  // in a child forked since
#pragma once

#include <cstdint>
#include <string>

namespace ringd {

// 0 in the process as started; a child made by fork() sees its parent's value plus one (a
// pthread_atfork child handler, registered by the first call).
uint64_t fork_generation();

// What an object remembers of the process that made it.
class ForkOwner {
 public:
  ForkOwner();
  // True in a child forked since the object was made.
  bool inherited() const { return fork_generation() != generation_; }
  // "rank 3: this process (pid 1234) is a child forked after the job was opened in pid 1200;
  // ..." for an error raised in such a child.
  std::string child_message(int rank) const;

 private:
  uint64_t generation_;
  int pid_;
};

}  // namespace ringd
