/* Table-driven option parsing and help for the subcommands; see obc_options.h. */
#include "common/obc_options.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"

enum {
  HELP_INDENT = 2,       /* columns before an option's name */
  HELP_DESCRIPTION = 23, /* column where descriptions start */
  HELP_WIDTH = 80,       /* the longest help line */
};

/* Whether arg is the option spelled name: "name" alone or "name=value". */
static bool matches(const char *arg, const char *name) {
  if (!name) return false;
  size_t len = strlen(name);
  return !strncmp(arg, name, len) && (arg[len] == '\0' || arg[len] == '=');
}

static const ObcOption *find_option(const ObcOptionList *lists, size_t n_lists, const char *arg) {
  for (size_t l = 0; l < n_lists; l++)
    for (size_t o = 0; o < lists[l].count; o++) {
      const ObcOption *option = &lists[l].options[o];
      if (option->name && (matches(arg, option->name) || matches(arg, option->alias)))
        return option;
    }
  return NULL;
}

static int store_value(const ObcOption *option, const char *value) {
  size_t size = 0;
  int rc = OBC_OK;
  switch (option->kind) {
    case OBC_OPTION_FLAG: *(bool *)option->target = true; return OBC_OK;
    case OBC_OPTION_TEXT: *(const char **)option->target = value; return OBC_OK;
    case OBC_OPTION_SIZE: return obc_parse_size(option->name, value, option->target);
    case OBC_OPTION_UINT64:
      rc = obc_parse_size(option->name, value, &size);
      if (!rc) *(uint64_t *)option->target = (uint64_t)size;
      return rc;
    case OBC_OPTION_DOUBLE: return obc_parse_double(option->name, value, option->target);
    case OBC_OPTION_CUSTOM: return option->parse(option->target, option->name, value);
    case OBC_OPTION_HELP: break;
  }
  return OBC_OK;
}

void obc_option_show_double(const void *target, char *text, size_t size) {
  double value = *(const double *)target;
  text[0] = '\0';
  if (value != 0) snprintf(text, size, "%g", value);
}

void obc_option_show_int(const void *target, char *text, size_t size) {
  snprintf(text, size, "%d", *(const int *)target);
}

int obc_option_parse_size_list(void *target, const char *option, const char *value) {
  ObcSizeList *list = target;
  *list->count = 0;
  return obc_parse_size_list(option, value, list->values, list->count, list->max);
}

void obc_option_show_size_list(const void *target, char *text, size_t size) {
  const ObcSizeList *list = target;
  size_t used = 0;
  text[0] = '\0';
  for (size_t i = 0; i < *list->count && used < size; i++)
    used += (size_t)snprintf(text + used, size - used, "%s%zu", i ? "," : "", list->values[i]);
}

/* The default the help shows: default_text, else the target's value
 * (formatted into buf), else NULL. */
static const char *default_shown(const ObcOption *option, char *buf, size_t size) {
  if (option->default_text) return option->default_text;
  if (!option->target) return NULL;
  switch (option->kind) {
    case OBC_OPTION_TEXT: {
      const char *text = *(const char *const *)option->target;
      return text && text[0] ? text : NULL;
    }
    case OBC_OPTION_SIZE: {
      size_t value = *(const size_t *)option->target;
      if (!value) return NULL;
      snprintf(buf, size, "%zu", value);
      return buf;
    }
    case OBC_OPTION_UINT64: {
      uint64_t value = *(const uint64_t *)option->target;
      if (!value) return NULL;
      snprintf(buf, size, "%" PRIu64, value);
      return buf;
    }
    case OBC_OPTION_DOUBLE:
    case OBC_OPTION_CUSTOM: {
      ObcOptionShow show =
          option->kind == OBC_OPTION_DOUBLE ? obc_option_show_double : option->show;
      if (!show) return NULL;
      show(option->target, buf, size);
      return buf[0] ? buf : NULL;
    }
    default: return NULL;
  }
}

static bool is_help(const char *arg) {
  return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, OBC_OPTIONS_TABLE);
}

/* Set when the command line asked for the option table: the usage the
 * command then prints is the table. */
static bool table_asked;

static void print_table(FILE *out, const char *command, const ObcOptionList *lists,
                        size_t n_lists) {
  for (size_t l = 0; l < n_lists; l++)
    for (size_t o = 0; o < lists[l].count; o++) {
      const ObcOption *option = &lists[l].options[o];
      if (!option->name) continue;
      char fallback[64];
      const char *shown = default_shown(option, fallback, sizeof fallback);
      fprintf(out, "%s\t%s\t%s\t%s\t%s\t%s\n", command, option->name,
              option->alias ? option->alias : "", option->value ? option->value : "",
              shown ? shown : "",
              option->renamed ? option->renamed
              : option->help  ? ""
                              : "hidden");
    }
}

int obc_options_parse(const char *command, const ObcOptionList *lists, size_t n_lists, int argc,
                      char **argv, ObcArguments *args) {
  memset(args, 0, sizeof *args);
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (is_help(argv[i])) {
      args->help = true;
      table_asked = !strcmp(argv[i], OBC_OPTIONS_TABLE);
      if (table_asked) print_table(stdout, command, lists, n_lists);
      return OBC_OK;
    }
  bool options_done = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!options_done && !strcmp(arg, "--")) {
      options_done = true;
      continue;
    }
    if (options_done || arg[0] != '-' || arg[1] == '\0') {
      if (args->n_positional == OBC_OPTIONS_MAX_POSITIONAL)
        return obc_fail(OBC_EINVAL, "too many arguments ('%s'; try obcache %s --help)", arg,
                        command);
      args->positional[args->n_positional++] = arg;
      continue;
    }
    const ObcOption *option = find_option(lists, n_lists, arg);
    if (!option)
      return obc_fail(OBC_EINVAL, "unknown option '%s' (try obcache %s --help)", arg, command);
    const char *equals = strchr(arg, '=');
    const char *value = NULL;
    if (!option->value) {
      if (equals) return obc_fail(OBC_EINVAL, "%s: takes no value", option->name);
    } else {
      value = equals ? equals + 1 : i + 1 < argc ? argv[++i] : NULL;
      if (!value || !value[0]) return obc_fail(OBC_EINVAL, "%s: missing value", option->name);
    }
    if (option->renamed)
      fprintf(stderr, "obcache %s: note: %s is spelled %s\n", command, option->name,
              option->renamed);
    int rc = store_value(option, value);
    if (rc) return rc;
    if (option->seen) *option->seen = true;
  }
  return OBC_OK;
}

static void print_option(FILE *out, const ObcOption *option) {
  char left[128];
  snprintf(left, sizeof left, "%s%s%s%s%s", option->alias ? option->alias : "",
           option->alias ? ", " : "", option->name, option->value ? " " : "",
           option->value ? option->value : "");
  int width = fprintf(out, "%*s%s", HELP_INDENT, "", left);
  if (width + 1 > HELP_DESCRIPTION)
    fprintf(out, "\n%*s", HELP_DESCRIPTION, "");
  else
    fprintf(out, "%*s", HELP_DESCRIPTION - width, "");
  char fallback[64], text[2048];
  const char *shown = default_shown(option, fallback, sizeof fallback);
  snprintf(text, sizeof text, "%s%s%s%s", option->help, shown ? " (default " : "",
           shown ? shown : "", shown ? ")" : "");
  obc_text_print_wrapped(out, text, HELP_DESCRIPTION, HELP_DESCRIPTION, HELP_WIDTH);
}

void obc_options_print_help(FILE *out, const ObcOptionList *lists, size_t n_lists) {
  for (size_t l = 0; l < n_lists; l++)
    for (size_t o = 0; o < lists[l].count; o++) {
      const ObcOption *option = &lists[l].options[o];
      if (!option->help) continue;
      if (!option->name)
        fprintf(out, "%s\n", option->help);
      else
        print_option(out, option);
    }
}

void obc_options_print_usage(FILE *out, const char *usage, const ObcOptionList *lists,
                             size_t n_lists) {
  if (table_asked) return; /* printed by obc_options_parse */
  fputs(usage, out);
  fputs("\noptions:\n", out);
  obc_options_print_help(out, lists, n_lists);
  static const ObcOption help = {
      .name = "--help", .alias = "-h", .help = "this help", .kind = OBC_OPTION_HELP};
  print_option(out, &help);
}
