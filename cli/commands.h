/* The subcommands of `obcache`. Each takes argc/argv starting at its own name
 * (argv[0] == "synth" etc.), handles --help itself, and returns 0 on success
 * or a negative OBC_E* code after obc_fail(); main() prints the message. Each
 * is cli/cmd_NAME.c: it parses the options and calls the library folders
 * below (docs/ARCHITECTURE.md), which never include cli/. */
#ifndef OBC_COMMANDS_H
#define OBC_COMMANDS_H

int cmd_synth(int argc, char **argv);      /* cli/cmd_synth.c */
int cmd_info(int argc, char **argv);       /* cli/cmd_info.c */
int cmd_verify(int argc, char **argv);     /* cli/cmd_verify.c */
int cmd_capture(int argc, char **argv);    /* cli/cmd_capture.c */
int cmd_sweep(int argc, char **argv);      /* cli/cmd_sweep.c */
int cmd_eval(int argc, char **argv);       /* cli/cmd_eval.c */
int cmd_analyze(int argc, char **argv);    /* cli/cmd_analyze.c */
int cmd_generate(int argc, char **argv);   /* cli/cmd_generate.c */
int cmd_tokenize(int argc, char **argv);   /* cli/cmd_tokenize.c */
int cmd_perplexity(int argc, char **argv); /* cli/cmd_perplexity.c */
int cmd_logits(int argc, char **argv);     /* cli/cmd_logits.c */
int cmd_model_info(int argc, char **argv); /* cli/cmd_model_info.c */
int cmd_plot(int argc, char **argv);       /* cli/cmd_plot.c */
int cmd_evict(int argc, char **argv);      /* cli/cmd_evict.c */
int cmd_replay(int argc, char **argv);     /* cli/cmd_replay.c */
int cmd_dynamic(int argc, char **argv);    /* cli/cmd_dynamic.c */
int cmd_upgrade(int argc, char **argv);    /* cli/cmd_upgrade.c */

#endif
