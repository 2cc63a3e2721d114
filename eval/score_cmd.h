/* Scores from a command, one run per eval sample (`eval --score-cmd
 * NAME=CMD`, docs/CLI.md). After a sample's capture, CMD runs under
 * /bin/sh -c in obcache's working directory, stdin from /dev/null, its
 * stdout and stderr into the cell's score-cmd-NAME.log, with
 *   OBC_TRACE       the sample's trace (HDF5, schema 3: K, V, Q rows, spans)
 *   OBC_SCORES      where it writes its scores: HDF5, one float32/float64
 *                   dataset (layers, kv_heads, >= prompt positions),
 *                   higher = keep, attribute trace_hash = the trace's
 *   OBC_SCORE_NAME  NAME
 *   OBC_PROMPT      the sample's prompt.json (text, ids, spans, answers)
 *   OBC_MODEL       the model the eval runs (GGUF file or HF folder)
 *   OBC_SAMPLE      the sample's name (task_Llength_Ssample)
 * all paths absolute. NAME is then kept from OBC_SCORES as a score from a
 * file is (evict/score_file.h). A command that fails (non-zero exit, a
 * signal, no file) fails the sample with one line naming NAME, how it
 * ended and the last line of its log. */
#ifndef OBC_EVAL_SCORE_CMD_H
#define OBC_EVAL_SCORE_CMD_H

#include "eval/eval.h"

/* Parses NAME=CMD into cmd (the text stays the caller's): NAME as a score
 * file's (A-Z a-z 0-9 _ . -, at most 31), CMD not empty. */
int eval_score_cmd_parse(const char *option, const char *text, EvalScoreCmd *cmd);

/* Runs every command of config for the sample in folder dir (its trace
 * and prompt.json written) and points each NAME at the file it wrote. */
int eval_score_cmds_run(const EvalConfig *config, const char *model_path, const char *sample,
                        const char *dir, const char *trace);

/* Removes the score files the commands wrote into dir. */
void eval_score_cmds_clean(const EvalConfig *config, const char *dir);

#endif
