/* Work that may crash or hang, run in a child process.
 *
 * Reading an HDF5 file in the unchecksummed formats (schema-1 traces and
 * keep files) can crash, hang or exhaust memory inside the HDF5 library when
 * the file is damaged. obc_child_run forks, runs the work in the child under
 * a wall-clock and an address-space limit, and collects what the child
 * sends back through a pipe; a child that dies, overruns its limits or
 * exits without its reply is a failure the caller words. */
#ifndef OBC_CHILD_H
#define OBC_CHILD_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
  double seconds;      /* wall-clock limit; the child is killed when it runs longer */
  size_t memory_bytes; /* address space the child may add to what it inherits; 0 = none */
} ObcChildLimits;

/* What came back from the child. */
typedef struct {
  pid_t pid;           /* the child's process id (its temporary files carry it) */
  int finished;        /* 1 when the work returned and its reply arrived whole */
  int timed_out;       /* 1 when it was killed for running past the limit */
  unsigned char *data; /* (size) bytes the work sent with obc_child_send; malloc'd */
  size_t size;
} ObcChildReply;

/* The work: runs in the child; returns OBC_OK or an error after obc_fail,
 * and may send bytes to the parent with obc_child_send(reply_fd, ...). */
typedef int (*ObcChildWork)(void *arg, int reply_fd);

/* Runs work(arg) in a child under limits. Returns the work's code, with its
 * message, when the child finished; OBC_EEXTERNAL, with no message, when it
 * did not (reply->finished 0: it crashed, was killed, or ran out of time);
 * OBC_EIO when no child could be started. Free reply->data in every case
 * (obc_child_reply_free). The child's stderr, and any sanitizer report of
 * its crash, is discarded (OBC_CHILD_STDERR=1 keeps it): its output after a
 * crash is the library's, and the parent words the failure. */
int obc_child_run(ObcChildWork work, void *arg, const ObcChildLimits *limits, ObcChildReply *reply);
void obc_child_reply_free(ObcChildReply *reply);
/* Sends size bytes to the parent; OBC_EIO when the pipe is gone. */
int obc_child_send(int reply_fd, const void *data, size_t size);
/* Whether this process is such a child (work that takes locks shared with
 * threads of the parent skips them: the child has one thread). */
int obc_child_active(void);

#endif
