/* Files that appear under their final name only when complete.
 *
 * Every output (trace, report, CSV, scores file, plot) is written under a
 * temporary name in the same folder and renamed when complete, so a crash,
 * Ctrl-C or a full disk never leaves a file that looks finished. */
#ifndef OBC_FILE_H
#define OBC_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct {
  char final_path[4096];
  char temp_path[4096];
} ObcPendingFile;

/* Chooses a temporary name beside final_path ("<path>.tmp.<pid>") and checks
 * that the folder is writable. Does not create the file. */
int obc_pending_init(ObcPendingFile *file, const char *final_path);
/* Renames the temporary file to its final name. */
int obc_pending_commit(ObcPendingFile *file);
/* Removes the temporary file if it exists (safe to call twice). */
void obc_pending_abort(ObcPendingFile *file);

/* Opens a text file for writing under a pending name. On success *out is a
 * FILE* on file->temp_path; finish with obc_text_close(file, fp, ok). */
int obc_text_open(ObcPendingFile *file, const char *final_path, FILE **out);
/* The same for the file DIR/NAME: the one way every command opens an output
 * in its output folder. Fails (naming dir) when the path would not fit. */
int obc_text_open_in(ObcPendingFile *file, const char *dir, const char *name, FILE **out);
/* Closes fp; if ok and every write succeeded, renames into place; otherwise
 * removes the temporary file. Returns 0 or an error (e.g. disk full). */
int obc_text_close(ObcPendingFile *file, FILE *fp, int ok);

/* The default output folder beside a file: path without a trailing ".h5",
 * then suffix ("t.h5", "-analysis" -> "t-analysis"). */
void obc_path_beside(const char *path, const char *suffix, char *out, size_t size);

/* Maps the whole regular file at path read-only. On success *map points to
 * its *size bytes (NULL when the file is empty); release with obc_file_unmap.
 * Fails with a one-line message naming the file (missing: OBC_ENOTFOUND). */
int obc_file_map(const char *path, const void **map, size_t *size);
/* Unmaps what obc_file_map returned (a NULL map is a no-op). */
void obc_file_unmap(const void *map, size_t size);

/* Refuses, before anything is written, an output of about `bytes` bytes
 * that cannot fit under the file-size limit (ulimit -f) or in the free space
 * of path's folder (statvfs); what names it in the message ("the trace"). */
int obc_file_check_space(const char *path, double bytes, const char *what);

/* Why a write to path failed, for a message: "disk full" (ENOSPC), "file
 * size limit exceeded (ulimit -f)" (EFBIG), else strerror(err) ("I/O
 * error" for 0). err is errno right after the failing call (HDF5 keeps it);
 * where it was lost (a stdio stream that failed before fclose) path, when
 * not NULL and still there, is probed: at the size limit, or no free space.
 * Returns a static string. */
const char *obc_write_error_text(const char *path, int err);

/* A set of files written into one folder that appear together (an
 * analysis folder, a replay's CSV and JSON): each is written under its
 * temporary name, and obc_output_commit renames them all or, on failure,
 * leaves none; a folder the set had to create is removed again when nothing
 * came of it. The set must not move while files are pending (the signal
 * handler holds their addresses). */
enum { OBC_OUTPUT_MAX = 12 };
typedef struct {
  char dir[4096];
  ObcPendingFile files[OBC_OUTPUT_MAX];
  size_t count;
  int created; /* obc_output_begin made dir */
} ObcOutputSet;

/* Starts a set in dir, creating it (and its parents) when missing. */
int obc_output_begin(ObcOutputSet *set, const char *dir);
/* Opens DIR/name as the set's next text file. */
int obc_output_open(ObcOutputSet *set, const char *name, FILE **fp);
/* Closes the file obc_output_open gave last, keeping it pending; fails,
 * naming it, when a write failed (disk full). */
int obc_output_close(ObcOutputSet *set, FILE *fp);
/* The name (within dir) of pending file i < set->count. */
const char *obc_output_name(const ObcOutputSet *set, size_t i);
/* Renames every file into place. On failure none stays: those already
 * renamed are removed and the set is aborted. */
int obc_output_commit(ObcOutputSet *set);
/* Removes every pending file, and dir when the set created it and nothing
 * else is in it. Safe after a failed begin. */
void obc_output_abort(ObcOutputSet *set);
/* The end of a set whose writing returned rc: commits when rc is 0, else
 * aborts. Returns rc or the commit's error. */
int obc_output_end(ObcOutputSet *set, int rc);

/* Creates a folder and its parents (like mkdir -p). */
int obc_make_dirs(const char *path);

/* Registers a SIGINT/SIGTERM/SIGHUP/SIGQUIT handler that removes every
 * pending file still registered, then re-raises the signal. */
void obc_pending_register(ObcPendingFile *file);
void obc_pending_unregister(ObcPendingFile *file);

/* The child processes writing into the pending files (gnuplot), at most
 * OBC_MAX_CHILDREN at a time: the handler kills and reaps each before
 * removing the files, so that none can create one after they were removed.
 * A child is removed again once it was reaped. */
enum { OBC_MAX_CHILDREN = 16 };
void obc_pending_child_add(pid_t child);
void obc_pending_child_remove(pid_t child);

/* Starts the program at path with argv and envp (NULL: this process's
 * environment), stdin from /dev/null, stdout and stderr into log_fd, as a
 * pending child (above), which on Linux also dies with this process; the
 * handler's signals are held from the fork until it is registered. Returns
 * 0 with its pid in *child, or the errno of a failed fork (the caller
 * words it); a child that cannot exec exits with 127. */
int obc_spawn_logged(const char *path, char *const argv[], char *const envp[], int log_fd,
                     pid_t *child);

#endif
