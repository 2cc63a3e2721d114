/* Pre-tokenization: the regexes that cut text into the pieces BPE merges
 * within, as llama.cpp defines them for each GGUF tokenizer.ggml.pre value
 * (and as the Hugging Face tokenizer.json of those models spells them).
 * Each regex splits every piece left by the one before into its matches and
 * the gaps between them, so the pieces always tile the text. PCRE2 in UTF +
 * UCP mode (\p{L}, \s etc. over all of Unicode), JIT-compiled when available. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"

/* GPT-2's regex. The final "\s+" only changes which regex claims a lone
 * whitespace before a word; as gaps are kept as pieces, llama.cpp's version
 * without it splits the same way. */
static const char REGEX_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Llama 3: case-insensitive contractions, letters with one leading
 * non-letter, numbers in groups of up to three digits, newlines kept apart. */
static const char REGEX_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* Qwen2: as Llama 3 but every digit on its own. */
static const char REGEX_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char REGEX_DIGIT[] = "\\p{N}";

typedef struct {
  const char *names; /* '|'-separated tokenizer.ggml.pre values */
  const char *regexes[TOKENIZER_MAX_REGEXES];
} PreTypeRegexes;

static const PreTypeRegexes PRE_TYPES[] = {
    {"gpt2|gpt-2|mpt|olmo", {REGEX_GPT2}},
    /* SmolLM2 (and the StarCoder family it comes from): digits one by one,
     * then GPT-2's regex. */
    {"smollm|starcoder|refact", {REGEX_DIGIT, REGEX_GPT2}},
    {"llama3|llama-bpe|llama-v3|smaug-bpe|dbrx|falcon3", {REGEX_LLAMA3}},
    {"qwen2|qwen2.5|qwen-2.5|deepseek-r1-qwen", {REGEX_QWEN2}},
    /* llama.cpp's fallback when a file names no pre-tokenizer. */
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", REGEX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
};

static int name_in_list(const char *name, const char *list) {
  size_t length = strlen(name);
  for (const char *p = list; *p;) {
    const char *end = strchr(p, '|');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == length && !memcmp(p, name, n)) return 1;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

/* The characters with Unicode's White_Space property. PCRE2's \s also takes
 * U+180E (a space before Unicode 6.3), which the Hugging Face tokenizers'
 * regex engine and llama.cpp do not; spelling the class out keeps the same
 * pieces as theirs. */
static const char WHITE_SPACE[] =
    "\\t\\n\\x0B\\f\\r "
    "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

/* Copies pattern with \s and \S (outside a character class) and \s (inside
 * one) replaced by the White_Space class; malloc'ed, NULL when out of memory. */
static char *spell_white_space(const char *pattern) {
  size_t length = strlen(pattern);
  size_t n_escapes = 0;
  for (const char *p = pattern; *p; p++) n_escapes += *p == '\\';
  char *out = malloc(length + n_escapes * (sizeof(WHITE_SPACE) + 3) + 1);
  if (!out) return NULL;
  size_t k = 0;
  int in_class = 0;
  for (size_t i = 0; i < length; i++) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < length) {
      char e = pattern[i + 1];
      if (e == 's' || (e == 'S' && !in_class)) {
        const char *open = in_class ? "" : e == 's' ? "[" : "[^";
        k += (size_t)sprintf(out + k, "%s%s%s", open, WHITE_SPACE, in_class ? "" : "]");
      } else {
        out[k++] = c;
        out[k++] = e;
      }
      i++;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = 1;
      out[k++] = c;
      if (pattern[i + 1] == '^') out[k++] = pattern[++i];
      if (pattern[i + 1] == ']') out[k++] = pattern[++i]; /* a leading ']' is literal */
      continue;
    }
    if (c == ']' && in_class) in_class = 0;
    out[k++] = c;
  }
  out[k] = '\0';
  return out;
}

int tokenizer_pre_add_regex(TokenizerPreSplit *pre, const char *pattern, const char *source) {
  if (pre->n_regexes == TOKENIZER_MAX_REGEXES)
    return obc_fail(OBC_EUNSUPPORTED, "%s: more than %d pre-tokenizer regexes", source,
                    TOKENIZER_MAX_REGEXES);
  char *spelled = spell_white_space(pattern);
  if (!spelled) return obc_fail(OBC_ENOMEM, "%s: out of memory compiling a regex", source);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code *code = pcre2_compile((PCRE2_SPTR)spelled, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, NULL);
  free(spelled);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return obc_fail(OBC_EFORMAT, "%s: pre-tokenizer regex does not compile at offset %zu: %s (%s)",
                    source, (size_t)offset, (const char *)message, pattern);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* interpreted when JIT is unavailable */
  pre->codes[pre->n_regexes++] = code;
  return OBC_OK;
}

int tokenizer_pre_from_name(TokenizerPreSplit *pre, const char *name, const char *source) {
  for (size_t i = 0; i < sizeof(PRE_TYPES) / sizeof(PRE_TYPES[0]); i++) {
    if (!name_in_list(name, PRE_TYPES[i].names)) continue;
    snprintf(pre->name, sizeof(pre->name), "%s", name);
    for (size_t r = 0; r < TOKENIZER_MAX_REGEXES && PRE_TYPES[i].regexes[r]; r++) {
      int rc = tokenizer_pre_add_regex(pre, PRE_TYPES[i].regexes[r], source);
      if (rc) return rc;
    }
    return OBC_OK;
  }
  return obc_fail(OBC_EUNSUPPORTED,
                  "%s: unknown pre-tokenizer type '%s' in tokenizer.ggml.pre (expected one of "
                  "smollm, llama3/llama-bpe, qwen2, gpt2, default)",
                  source, name);
}

void tokenizer_pre_free(TokenizerPreSplit *pre) {
  for (size_t i = 0; i < pre->n_regexes; i++) pcre2_code_free(pre->codes[i]);
  memset(pre, 0, sizeof(*pre));
}

typedef struct {
  const TokenizerPreSplit *pre;
  pcre2_match_data *match[TOKENIZER_MAX_REGEXES];
  TokenizerPieceFn piece;
  void *context;
} SplitState;

static int split_level(SplitState *state, size_t level, const char *text, size_t length) {
  if (length == 0) return 0;
  if (level == state->pre->n_regexes) return state->piece(state->context, text, length);
  const pcre2_code *code = state->pre->codes[level];
  pcre2_match_data *match = state->match[level];
  size_t done = 0, offset = 0;
  while (offset < length) {
    int rc = pcre2_match(code, (PCRE2_SPTR)text, length, offset, PCRE2_NO_UTF_CHECK, match, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      return obc_fail(OBC_EINVAL, "tokenizer: pre-tokenizer regex failed: %s",
                      (const char *)message);
    }
    PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(match);
    size_t start = ovector[0], end = ovector[1];
    if (end == start) { /* never for the regexes above; step one character */
      offset = end + 1;
      while (offset < length && ((unsigned char)text[offset] & 0xC0) == 0x80) offset++;
      continue;
    }
    int err = split_level(state, level + 1, text + done, start - done);
    if (!err) err = split_level(state, level + 1, text + start, end - start);
    if (err) return err;
    done = offset = end;
  }
  return split_level(state, level + 1, text + done, length - done);
}

int tokenizer_pre_split(const TokenizerPreSplit *pre, const char *text, size_t length,
                        TokenizerPieceFn piece, void *context) {
  SplitState state = {.pre = pre, .piece = piece, .context = context};
  int rc = 0;
  for (size_t i = 0; i < pre->n_regexes && !rc; i++) {
    state.match[i] = pcre2_match_data_create_from_pattern(pre->codes[i], NULL);
    if (!state.match[i]) rc = obc_fail(OBC_ENOMEM, "tokenizer: out of memory for regex match data");
  }
  if (!rc) rc = split_level(&state, 0, text, length);
  for (size_t i = 0; i < pre->n_regexes; i++) pcre2_match_data_free(state.match[i]);
  return rc;
}
