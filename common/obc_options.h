/* The one option parser of every subcommand. A command describes its options
 * in a table of ObcOption (name, short form, value placeholder, description,
 * default, where the value goes); obc_options_parse reads argv against the
 * tables and obc_options_print_help prints the option list from the same
 * tables: the names, placeholders and descriptions the help shows are the
 * ones the parser reads. A default is printed from the target's value at
 * help time (a number, a text, or what a custom option's show makes of its
 * target): a command that stores its defaults in the targets before parsing
 * runs with the value its help shows, so the two cannot drift apart. Where
 * the stored value is a sentinel the command resolves later (0 = all cores,
 * NULL = the embedded model), default_text says in words what it means;
 * that text, like any default a description states, is written by hand and
 * is the part of the help that can drift from the code.
 *
 * Every option takes "--opt value" and "--opt=value" (also "-o value" and
 * "-o=value"); a flag takes no value. Arguments that do not start with '-'
 * (and "-" itself, and everything after "--") are positional, returned in
 * order. Errors are one line naming the option:
 *   unknown option '--x' (try obcache CMD --help)
 *   --x: missing value
 *   --x: takes no value
 * and bad numbers fail as in obc_parse.h ("--x: expected ..., got '...'"). */
#ifndef OBC_OPTIONS_H
#define OBC_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
  OBC_OPTION_FLAG,   /* bool *target set to true; value must be NULL */
  OBC_OPTION_TEXT,   /* const char **target = the value */
  OBC_OPTION_SIZE,   /* size_t *target: a non-negative integer */
  OBC_OPTION_UINT64, /* uint64_t *target: a non-negative integer */
  OBC_OPTION_DOUBLE, /* double *target: a finite number */
  OBC_OPTION_CUSTOM, /* parse(target, name, value); value is NULL for a flag */
  OBC_OPTION_HELP,   /* -h, --help: listed in the help, handled by the parser */
} ObcOptionKind;

/* Stores value (NULL for a flag) into target; returns OBC_OK or an OBC_E*
 * code after obc_fail() with a message naming option. */
typedef int (*ObcOptionParse)(void *target, const char *option, const char *value);

/* Writes the value of an OBC_OPTION_CUSTOM target as the help shows it
 * (text[0] = '\0': nothing to show). */
typedef void (*ObcOptionShow)(const void *target, char *text, size_t size);

typedef struct {
  const char *name;         /* "--length", or a short form alone ("-o"); NULL: a heading */
  const char *alias;        /* the short form of name ("-o"), or NULL */
  const char *value;        /* placeholder in the help ("N"); NULL: a flag */
  const char *help;         /* one paragraph, wrapped by the help printer; NULL: hidden;
                             * for a heading (name NULL) the heading line */
  const char *default_text; /* printed as "(default X)"; NULL: none, or said in help */
  ObcOptionKind kind;
  void *target;
  ObcOptionParse parse; /* OBC_OPTION_CUSTOM */
  bool *seen;           /* set to true when the option is given, or NULL */
  ObcOptionShow show;   /* OBC_OPTION_CUSTOM: its default from the target, or NULL */
  const char *renamed;  /* an old spelling of this option: taken with a one-line note on
                         * stderr, hidden from the help (help NULL) */
} ObcOption;

/* A macro's value as text, for a default_text that names a constant:
 * OBC_OPTION_SPELLED(EVICT_DEFAULT_WINDOW) is "64". */
#define OBC_OPTION_SPELLED_(x) #x
#define OBC_OPTION_SPELLED(x) OBC_OPTION_SPELLED_(x)

/* A heading line of the help (text may start with '\n' for a blank line). */
#define OBC_OPTION_HEADING(text) \
  { .help = (text), .kind = OBC_OPTION_HELP }

/* The rows of a table, one builder a kind: the option's name, the value's
 * placeholder in the help, the target, then the description, optionally
 * followed by designators for the other fields:
 *   OBC_OPT_SIZE("--tokens", "N", &a->tokens, "tokens of the text"),
 *   OBC_OPT_TEXT("--output", "DIR", &a->out, "output folder", .alias = "-o"),
 *   OBC_OPT_SIZE("--threads", "N", &a->threads, "OpenMP threads",
 *                .default_text = "all cores"),
 *   OBC_OPT_CUSTOM("--depth", "D", &a->depth, parse_depth, "needle depth",
 *                  .show = obc_option_show_double),
 * (the description stands first among the variadic arguments so that every
 * row has one). */
#define OBC_OPT_FLAG(opt, target_, ...) \
  { .name = (opt), .kind = OBC_OPTION_FLAG, .target = (target_), .help = __VA_ARGS__ }
#define OBC_OPT_TEXT(opt, placeholder, target_, ...)                                     \
  {                                                                                      \
    .name = (opt), .value = (placeholder), .kind = OBC_OPTION_TEXT, .target = (target_), \
    .help = __VA_ARGS__                                                                  \
  }
#define OBC_OPT_SIZE(opt, placeholder, target_, ...)                                     \
  {                                                                                      \
    .name = (opt), .value = (placeholder), .kind = OBC_OPTION_SIZE, .target = (target_), \
    .help = __VA_ARGS__                                                                  \
  }
#define OBC_OPT_UINT64(opt, placeholder, target_, ...)                                     \
  {                                                                                        \
    .name = (opt), .value = (placeholder), .kind = OBC_OPTION_UINT64, .target = (target_), \
    .help = __VA_ARGS__                                                                    \
  }
#define OBC_OPT_DOUBLE(opt, placeholder, target_, ...)                                     \
  {                                                                                        \
    .name = (opt), .value = (placeholder), .kind = OBC_OPTION_DOUBLE, .target = (target_), \
    .help = __VA_ARGS__                                                                    \
  }
/* placeholder NULL: a flag whose parse gets value NULL. */
#define OBC_OPT_CUSTOM(opt, placeholder, target_, parse_, ...)                             \
  {                                                                                        \
    .name = (opt), .value = (placeholder), .kind = OBC_OPTION_CUSTOM, .target = (target_), \
    .parse = (parse_), .help = __VA_ARGS__                                                 \
  }

/* A table of options; commands pass their own and the shared groups'. */
typedef struct {
  const ObcOption *options;
  size_t count;
} ObcOptionList;

#define OBC_OPTION_LIST(array) ((ObcOptionList){(array), sizeof(array) / sizeof *(array)})

enum { OBC_OPTIONS_MAX_POSITIONAL = 16 };

/* `obcache COMMAND --help-options` prints the command's option table, a
 * line per option: command, name, short form, value placeholder, default,
 * and the new spelling of an old one ("hidden" for another option the help
 * does not list), tab-separated (for scripts, completions and
 * tests/test_option_vocabulary.py). */
#define OBC_OPTIONS_TABLE "--help-options"

typedef struct {
  bool help;                                          /* -h or --help given */
  size_t n_positional;                                /* arguments not options */
  const char *positional[OBC_OPTIONS_MAX_POSITIONAL]; /* in argv order */
} ObcArguments;

/* A list of sizes for OBC_OPTION_CUSTOM with obc_option_parse_size_list. */
typedef struct {
  size_t *values; /* [max] */
  size_t *count;
  size_t max;
} ObcSizeList;

/* ObcOptionShow for a double target ("%g"; 0 shows nothing) and for an int
 * target ("%d", 0 included). */
void obc_option_show_double(const void *target, char *text, size_t size);
void obc_option_show_int(const void *target, char *text, size_t size);

/* ObcOptionParse for an ObcSizeList target: "1,2,4" replaces the list. */
int obc_option_parse_size_list(void *target, const char *option, const char *value);
/* Its ObcOptionShow: "1,2,4" (an empty list shows nothing). */
void obc_option_show_size_list(const void *target, char *text, size_t size);

/* Parses argv[1..argc) (argv[0] is the command name) against the tables.
 * When -h or --help is anywhere, sets args->help and parses nothing. */
int obc_options_parse(const char *command, const ObcOptionList *lists, size_t n_lists, int argc,
                      char **argv, ObcArguments *args);

/* Prints every option of the tables: "  -o, --output PATH   description
 * (default X)", wrapped at 80 columns; headings as they are. X is
 * default_text, else the target's value: a TEXT that is set, a SIZE, UINT64
 * or DOUBLE that is not 0 (a 0 prints nothing: say what it means in
 * default_text or the description), a CUSTOM's show. Call it with the targets holding the
 * defaults, as obc_options_parse leaves them when it sees --help. */
void obc_options_print_help(FILE *out, const ObcOptionList *lists, size_t n_lists);

/* A command's whole --help, the one layout of every command: its usage text
 * (the usage line, a blank line, what the command does), then "options:",
 * the list and "-h, --help". */
void obc_options_print_usage(FILE *out, const char *usage, const ObcOptionList *lists,
                             size_t n_lists);

#endif
