/* `obcache tokenize`: the token ids of a text (or of each line of a file, or
 * of the text wrapped in the chat template), and with --show each id beside
 * its token text; --ids turns ids back into text. Opens only the
 * tokenizer: a GGUF file's metadata, never its weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "tokenizer/text_input.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

static const char *usage =
    "usage: obcache tokenize [--model PATH] [--chat] [--system TEXT] [--lines]\n"
    "                        [--show] (--file FILE | TEXT | --ids IDS)\n"
    "\n"
    "Prints the token ids of TEXT (or of the file's contents) on one line,\n"
    "space-separated; BOS first when the tokenizer asks for it. --chat wraps the\n"
    "text in the model's chat template as the user turn (--system: the system\n"
    "message). --lines encodes each line of the input separately (without its\n"
    "newline) and prints one line of ids per line. --show prints one token per line\n"
    "instead: id, tab, its text (\\n, \\t, \\\\ and bytes that are not printable\n"
    "UTF-8 escaped). --ids \"1,2,3\" prints the text of those ids. --model takes\n"
    "a GGUF file or a Hugging Face folder with tokenizer.json.\n";

typedef struct {
  const char *model;
  const char *file;
  const char *text;
  const char *system;
  const char *decode;
  size_t max_text_bytes;
  bool chat, lines, show;
} TokenizeArgs;

static int parse_args(int argc, char **argv, TokenizeArgs *a, bool *help) {
  const ObcOption options[] = {
      OBC_OPT_TEXT("--model", "PATH", &a->model,
                   "GGUF file or Hugging Face folder with tokenizer.json",
                   .default_text = MODEL_DEFAULT_TEXT),
      OBC_OPT_TEXT("--file", "FILE", &a->file, "encode the file's contents instead of TEXT"),
      OBC_OPT_FLAG("--chat", &a->chat,
                   "wrap the text in the model's chat template as the user turn"),
      OBC_OPT_TEXT("--system", "TEXT", &a->system, "the system message of --chat",
                   .default_text = "the template's"),
      OBC_OPT_FLAG("--lines", &a->lines, "encode each line separately, one line of ids per line"),
      OBC_OPT_FLAG("--show", &a->show, "one token per line: id, tab, its text"),
      OBC_OPT_TEXT("--ids", "IDS", &a->decode, "print the text of these comma-separated ids"),
      OBC_OPT_TEXT("--decode", "IDS", &a->decode, NULL, .renamed = "--ids"),
      text_max_bytes_option(&a->max_text_bytes),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("tokenize", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "more than one TEXT argument ('%s'; quote the text)",
                    args.positional[1]);
  if (args.n_positional) a->text = args.positional[0];
  int sources = (a->text != NULL) + (a->file != NULL) + (a->decode != NULL);
  if (sources != 1)
    return obc_fail(
        OBC_EINVAL,
        "give exactly one of TEXT, --file FILE or --ids IDS (see obcache tokenize --help)");
  return OBC_OK;
}

/* The tokenizer alone: a folder is a Hugging Face checkpoint, anything else a GGUF file. */
static int open_tokenizer(const char *path, Tokenizer **out) {
  bool folder = false;
  int rc = model_locate(path, &folder, NULL);
  if (rc) return rc;
  if (folder) return tokenizer_from_hf(path, out);
  GgufFile *file = NULL;
  rc = gguf_open(path, &file);
  if (rc) return rc;
  rc = tokenizer_from_gguf(file, path, out);
  gguf_close(file);
  return rc;
}

/* Token text with the bytes that would garble a terminal line escaped. */
static void print_escaped(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned char c = *p;
    if (c == '\n')
      fputs("\\n", stdout);
    else if (c == '\t')
      fputs("\\t", stdout);
    else if (c == '\r')
      fputs("\\r", stdout);
    else if (c == '\\')
      fputs("\\\\", stdout);
    else if (c < 0x20 || c == 0x7F)
      printf("\\x%02x", c);
    else if (c < 0x80)
      putchar(c);
    else {
      size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      size_t k = 1;
      while (k < n && (p[k] & 0xC0) == 0x80) k++;
      if (n == 0 || k < n) { /* a byte of a character split across tokens */
        printf("\\x%02x", c);
        p++;
        continue;
      }
      fwrite(p, 1, n, stdout);
      p += n;
      continue;
    }
    p++;
  }
}

static int print_ids(const Tokenizer *tok, const int32_t *ids, size_t n, int show) {
  if (!show) {
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    return 0;
  }
  char text[1024];
  for (size_t i = 0; i < n; i++) {
    int rc = tokenizer_token_text(tok, ids[i], text, sizeof(text));
    if (rc) return rc;
    printf("%d\t", ids[i]);
    print_escaped(text);
    putchar('\n');
  }
  return 0;
}

static int encode_one(const Tokenizer *tok, const TokenizeArgs *a, const char *text,
                      size_t length) {
  int32_t *ids = NULL;
  size_t n = 0;
  int rc;
  if (a->chat) {
    char *copy = malloc(length + 1);
    if (!copy) return obc_fail(OBC_ENOMEM, "out of memory");
    memcpy(copy, text, length);
    copy[length] = '\0';
    rc = tokenizer_encode_chat(tok, a->system, copy, &ids, &n);
    free(copy);
  } else {
    int32_t *body = NULL;
    rc = tokenizer_encode(tok, text, length, &body, &n);
    int bos = !rc && tokenizer_adds_bos(tok) && tokenizer_bos_id(tok) >= 0;
    if (bos) {
      ids = malloc((n + 1) * sizeof(*ids));
      if (!ids)
        rc = obc_fail(OBC_ENOMEM, "out of memory");
      else {
        ids[0] = tokenizer_bos_id(tok);
        memcpy(ids + 1, body, n * sizeof(*ids));
        n++;
      }
      free(body);
    } else {
      ids = body;
    }
  }
  if (!rc) rc = print_ids(tok, ids, n, a->show);
  free(ids);
  return rc;
}

static int run(const Tokenizer *tok, const TokenizeArgs *a) {
  if (a->decode) {
    int32_t *ids = NULL;
    size_t n = 0;
    char *text = NULL;
    int rc = text_parse_ids("--ids", a->decode, &ids, &n);
    if (!rc) rc = tokenizer_decode(tok, ids, n, &text);
    if (!rc) fputs(text, stdout);
    free(ids);
    free(text);
    return rc;
  }
  char *file_text = NULL;
  size_t length = 0;
  const char *text = a->text;
  if (a->file) {
    int rc = text_read_file(a->file, a->max_text_bytes, &file_text, &length);
    if (rc) return rc;
    text = file_text;
  } else {
    length = strlen(text);
  }
  int rc = 0;
  if (!a->lines) {
    rc = encode_one(tok, a, text, length);
    if (rc && a->file) obc_fail_context(rc, "%s", a->file);
  } else {
    size_t line = 1;
    for (size_t start = 0; start < length && !rc; line++) {
      const char *newline = memchr(text + start, '\n', length - start);
      size_t end = newline ? (size_t)(newline - text) : length;
      rc = encode_one(tok, a, text + start, end - start);
      if (rc) obc_fail_context(rc, "%s: line %zu", a->file ? a->file : "TEXT", line);
      start = end + 1;
    }
  }
  free(file_text);
  return rc;
}

int cmd_tokenize(int argc, char **argv) {
  TokenizeArgs args = {.max_text_bytes = OBC_TEXT_MAX_BYTES};
  bool help = false;
  int rc = parse_args(argc, argv, &args, &help);
  if (rc || help) return rc;
  Tokenizer *tok = NULL;
  rc = open_tokenizer(args.model ? args.model : model_default_path(), &tok);
  if (rc) return rc;
  rc = run(tok, &args);
  tokenizer_free(tok);
  if (!rc && fflush(stdout) != 0) rc = obc_fail(OBC_EIO, "write error on standard output");
  return rc;
}
