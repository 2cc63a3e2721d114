/* Loading the tokenizer from a Hugging Face folder: tokenizer.json (a BPE
 * model: vocab, merges as "left right" strings or [left, right] pairs,
 * added_tokens, and a pre_tokenizer made of Split regexes, Digits and
 * ByteLevel) plus tokenizer_config.json when present (bos/eos tokens,
 * add_bos_token, chat_template) or chat_template.jinja. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_text.h"
#include "formats/json_file.h"
#include "tokenizer/text_input.h"
#include "tokenizer/tokenizer_internal.h"

/* tokenizer.json (required) or tokenizer_config.json (optional: *out stays
 * NULL when absent), through the one JSON file reader (1 GiB cap). */
static int read_json(const char *path, int required, cJSON **out) {
  int rc = json_file_read(path, out);
  if (rc == OBC_ENOTFOUND && !required) {
    obc_error_clear();
    return OBC_OK;
  }
  return rc;
}

/* A token given as "text" or {"content": "text"} in tokenizer_config.json. */
static const char *token_content(const cJSON *item) {
  if (cJSON_IsString(item)) return item->valuestring;
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
  return cJSON_IsString(content) ? content->valuestring : NULL;
}

#define NORMALIZER_NAMES "Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace or Strip"
#define NORMALIZER_MAX_DEPTH 8

/* A string field of a normalizer, required. */
static int normalizer_string(const cJSON *node, const char *field, const char *type,
                             const char *path, const char **out) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(node, field);
  if (!cJSON_IsString(item))
    return obc_fail(OBC_EFORMAT, "%s: normalizer %s without a string '%s'", path, type, field);
  *out = item->valuestring;
  return OBC_OK;
}

/* Appends the steps of one normalizer (a Sequence flattened). */
static int add_normalizer(TokenizerNormalizer *normalizer, const cJSON *node, const char *path,
                          int depth) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (!cJSON_IsString(type))
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: normalizer without a type (expected " NORMALIZER_NAMES ")", path);
  const char *name = type->valuestring;
  static const struct {
    const char *name;
    TokenizerNormalizeKind kind;
  } simple[] = {{"NFC", NORMALIZE_NFC},
                {"NFD", NORMALIZE_NFD},
                {"NFKC", NORMALIZE_NFKC},
                {"NFKD", NORMALIZE_NFKD},
                {"Lowercase", NORMALIZE_LOWERCASE}};
  for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
    if (!strcmp(name, simple[i].name))
      return tokenizer_normalizer_add(normalizer, simple[i].kind, NULL, NULL, path, NULL);
  if (!strcmp(name, "Sequence")) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(node, "normalizers");
    if (!cJSON_IsArray(list))
      return obc_fail(OBC_EFORMAT, "%s: normalizer Sequence without a 'normalizers' array", path);
    if (depth >= NORMALIZER_MAX_DEPTH)
      return obc_fail(OBC_EUNSUPPORTED, "%s: normalizer Sequences nested deeper than %d", path,
                      NORMALIZER_MAX_DEPTH);
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
      int rc = add_normalizer(normalizer, item, path, depth + 1);
      if (rc) return rc;
    }
    return OBC_OK;
  }
  if (!strcmp(name, "Prepend")) {
    const char *text = NULL;
    int rc = normalizer_string(node, "prepend", name, path, &text);
    return rc ? rc
              : tokenizer_normalizer_add(normalizer, NORMALIZE_PREPEND, NULL, text, path, NULL);
  }
  if (!strcmp(name, "Replace")) {
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(node, "pattern");
    const cJSON *literal = cJSON_GetObjectItemCaseSensitive(pattern, "String");
    const char *content = NULL;
    if (cJSON_GetObjectItemCaseSensitive(pattern, "Regex"))
      return obc_fail(OBC_EUNSUPPORTED,
                      "%s: normalizer Replace with a Regex pattern is not supported (a String "
                      "pattern is)",
                      path);
    if (!cJSON_IsString(literal) || !literal->valuestring[0])
      return obc_fail(OBC_EFORMAT, "%s: normalizer Replace without a non-empty String pattern",
                      path);
    int rc = normalizer_string(node, "content", name, path, &content);
    return rc ? rc
              : tokenizer_normalizer_add(normalizer, NORMALIZE_REPLACE, literal->valuestring,
                                         content, path, NULL);
  }
  if (!strcmp(name, "Strip")) {
    TokenizerNormalizeStep *step = NULL;
    int rc = tokenizer_normalizer_add(normalizer, NORMALIZE_STRIP, NULL, NULL, path, &step);
    if (rc) return rc;
    step->strip_left = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(node, "strip_left"));
    step->strip_right = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(node, "strip_right"));
    return OBC_OK;
  }
  char shown[OBC_ESCAPED_SIZE(64)];
  return obc_fail(OBC_EUNSUPPORTED,
                  "%s: normalizer '%s' is not supported (expected " NORMALIZER_NAMES ")", path,
                  obc_text_escape(shown, sizeof shown, name, false));
}

/* Whether a pre-tokenizer or decoder (Sequences searched) has that type. */
static int has_type(const cJSON *node, const char *name, int depth) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (!cJSON_IsString(type) || depth > 8) return 0;
  if (!strcmp(type->valuestring, name)) return 1;
  const cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(node, "pretokenizers")) {
    if (has_type(item, name, depth + 1)) return 1;
  }
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(node, "decoders")) {
    if (has_type(item, name, depth + 1)) return 1;
  }
  return 0;
}

/* What the decoder does with the space before the first token: a Metaspace
 * decoder that prepends drops the first token's markers, a Strip of a
 * leading " " (Llama 2) drops one space. */
static TokenizerDecodeSpace decoder_space(const cJSON *node, int depth) {
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (!cJSON_IsString(type) || depth > 8) return DECODE_SPACE_KEEP;
  const char *name = type->valuestring;
  if (!strcmp(name, "Metaspace")) {
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(node, "prepend_scheme");
    int prepends = cJSON_IsString(scheme)
                       ? strcmp(scheme->valuestring, "never") != 0
                       : !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(node, "add_prefix_space"));
    return prepends ? DECODE_SPACE_DROP_FIRST_MARKERS : DECODE_SPACE_KEEP;
  }
  if (!strcmp(name, "Strip")) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(node, "content");
    const cJSON *start = cJSON_GetObjectItemCaseSensitive(node, "start");
    int strips = cJSON_IsString(content) && !strcmp(content->valuestring, " ") &&
                 cJSON_IsNumber(start) && start->valuedouble >= 1;
    return strips ? DECODE_SPACE_STRIP_ONE : DECODE_SPACE_KEEP;
  }
  const cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(node, "decoders")) {
    TokenizerDecodeSpace space = decoder_space(item, depth + 1);
    if (space != DECODE_SPACE_KEEP) return space;
  }
  return DECODE_SPACE_KEEP;
}

/* Whether s is one UTF-8 character (the encoder checks the text, not the file). */
static int one_character(const char *s) {
  unsigned char c = (unsigned char)s[0];
  size_t width = c < 0x80                ? 1
                 : c >= 0xC2 && c < 0xE0 ? 2
                 : c >= 0xE0 && c < 0xF0 ? 3
                 : c >= 0xF0 && c < 0xF5 ? 4
                                         : 0;
  if (!c || !width || strlen(s) != width) return 0;
  for (size_t k = 1; k < width; k++)
    if (((unsigned char)s[k] & 0xC0) != 0x80) return 0;
  return 1;
}

/* Metaspace (SentencePiece style): spaces become the replacement character,
 * which is put before the text too (prepend_scheme always, or first: only
 * before the start of the input), as the normalizer's last steps; with split,
 * the text is cut before every replacement character. */
static int add_metaspace(Tokenizer *t, const cJSON *node, const char *path) {
  const cJSON *replacement = cJSON_GetObjectItemCaseSensitive(node, "replacement");
  const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(node, "prepend_scheme");
  const cJSON *legacy = cJSON_GetObjectItemCaseSensitive(node, "add_prefix_space");
  if (!cJSON_IsString(replacement) || !one_character(replacement->valuestring))
    return obc_fail(OBC_EFORMAT, "%s: pre_tokenizer Metaspace without a one-character replacement",
                    path);
  const char *mode = cJSON_IsString(scheme)  ? scheme->valuestring
                     : cJSON_IsFalse(legacy) ? "never"
                                             : "always";
  TokenizerNormalizeKind prefix = NORMALIZE_PREFIX_ALWAYS;
  if (!strcmp(mode, "always"))
    prefix = NORMALIZE_PREFIX_ALWAYS;
  else if (!strcmp(mode, "first"))
    prefix = NORMALIZE_PREFIX_FIRST;
  else if (strcmp(mode, "never"))
    return obc_fail(OBC_EFORMAT,
                    "%s: pre_tokenizer Metaspace prepend_scheme '%s' (expected always, first or "
                    "never)",
                    path, mode);
  snprintf(t->space_marker, sizeof t->space_marker, "%s", replacement->valuestring);
  int rc =
      tokenizer_normalizer_add(&t->normalizer, NORMALIZE_REPLACE, " ", t->space_marker, path, NULL);
  if (!rc && strcmp(mode, "never"))
    rc = tokenizer_normalizer_add(&t->normalizer, prefix, NULL, t->space_marker, path, NULL);
  if (rc || cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(node, "split"))) return rc;
  /* Each piece starts at a replacement character (MergedWithNext). */
  char pattern[128];
  snprintf(pattern, sizeof pattern, "(?s)\\Q%s\\E(?:(?!\\Q%s\\E).)*|(?:(?!\\Q%s\\E).)+",
           t->space_marker, t->space_marker, t->space_marker);
  return tokenizer_pre_add_regex(&t->pre, pattern, path);
}

static int add_pre_tokenizer(Tokenizer *t, const cJSON *node, const char *path) {
  TokenizerPreSplit *pre = &t->pre;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (!cJSON_IsString(type))
    return obc_fail(
        OBC_EUNSUPPORTED,
        "%s: pre_tokenizer without a type (expected Sequence, Split, Digits, ByteLevel or "
        "Metaspace)",
        path);
  const char *name = type->valuestring;
  if (!strcmp(name, "Sequence")) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(node, "pretokenizers")) {
      int rc = add_pre_tokenizer(t, item, path);
      if (rc) return rc;
    }
    return OBC_OK;
  }
  if (!strcmp(name, "Split")) {
    const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(node, "pattern");
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(node, "behavior");
    const cJSON *invert = cJSON_GetObjectItemCaseSensitive(node, "invert");
    if (!cJSON_IsString(regex) || !cJSON_IsString(behavior) ||
        strcmp(behavior->valuestring, "Isolated") || cJSON_IsTrue(invert))
      return obc_fail(OBC_EUNSUPPORTED,
                      "%s: pre_tokenizer Split is supported with a Regex pattern, behavior "
                      "Isolated and invert false only",
                      path);
    return tokenizer_pre_add_regex(pre, regex->valuestring, path);
  }
  if (!strcmp(name, "Digits")) {
    int individual = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(node, "individual_digits"));
    return tokenizer_pre_add_regex(pre, individual ? "\\p{N}" : "\\p{N}+", path);
  }
  if (!strcmp(name, "ByteLevel")) {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(node, "add_prefix_space")))
      return obc_fail(OBC_EUNSUPPORTED,
                      "%s: pre_tokenizer ByteLevel with add_prefix_space is not supported", path);
    const cJSON *use_regex = cJSON_GetObjectItemCaseSensitive(node, "use_regex");
    if (use_regex && cJSON_IsFalse(use_regex)) return OBC_OK;
    return tokenizer_pre_add_regex(
        pre, "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
        path);
  }
  if (!strcmp(name, "Metaspace")) return add_metaspace(t, node, path);
  return obc_fail(OBC_EUNSUPPORTED,
                  "%s: unknown pre_tokenizer type '%s' (expected Sequence, Split, Digits, "
                  "ByteLevel or Metaspace)",
                  path, name);
}

/* A token id: an integer in [0, bound). A vocabulary without holes (which
 * tokenizer_index_vocab demands) has ids below its number of entries
 * (model.vocab plus added_tokens), so that count bounds every id before it
 * sizes the tables: a damaged id of 2e9 is an error, not gigabytes. */
static int check_id(const cJSON *id, size_t bound, const char *path, const char *what,
                    size_t *out) {
  if (!cJSON_IsNumber(id)) return obc_fail(OBC_EFORMAT, "%s: %s has no numeric id", path, what);
  double v = id->valuedouble;
  if (!(v >= 0.0 && v < (double)bound) || v != floor(v))
    return obc_fail(OBC_EFORMAT,
                    "%s: %s has id %g (expected an integer below %zu, the number of vocab and "
                    "added entries)",
                    path, what, v, bound);
  *out = (size_t)v;
  return OBC_OK;
}

static void vocab_entry_name(const cJSON *item, char *out, size_t size) {
  snprintf(out, size, "model.vocab['%.64s']", item->string);
}

static void added_entry_name(size_t index, char *out, size_t size) {
  snprintf(out, size, "added_tokens[%zu]", index);
}

/* Checks every id of model.vocab and added_tokens; *n_vocab = largest + 1. */
static int count_vocab(const cJSON *vocab, const cJSON *added, const char *path, size_t *n_vocab) {
  size_t bound = (size_t)cJSON_GetArraySize(vocab) + (size_t)cJSON_GetArraySize(added);
  size_t top = 0, id = 0, index = 0;
  char what[96];
  const cJSON *item;
  cJSON_ArrayForEach(item, vocab) {
    vocab_entry_name(item, what, sizeof what);
    int rc = check_id(item, bound, path, what, &id);
    if (rc) return rc;
    if (id + 1 > top) top = id + 1;
  }
  cJSON_ArrayForEach(item, added) {
    added_entry_name(index++, what, sizeof what);
    int rc = check_id(cJSON_GetObjectItemCaseSensitive(item, "id"), bound, path, what, &id);
    if (rc) return rc;
    if (id + 1 > top) top = id + 1;
  }
  if (top == 0) return obc_fail(OBC_EFORMAT, "%s: empty model.vocab", path);
  if (top > INT32_MAX)
    return obc_fail(OBC_EFORMAT, "%s: %zu tokens (at most %d supported)", path, top, INT32_MAX);
  *n_vocab = top;
  return OBC_OK;
}

static int read_model(Tokenizer **out, const cJSON *root, const char *path) {
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
  char escaped[OBC_ESCAPED_SIZE(64)];
  if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
    return obc_fail(OBC_EUNSUPPORTED, "%s: model.type is '%s' (expected 'BPE')", path,
                    cJSON_IsString(type)
                        ? obc_text_escape(escaped, sizeof escaped, type->valuestring, false)
                        : "missing");
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
    return obc_fail(OBC_EFORMAT, "%s: model.vocab (object) or model.merges (array) missing", path);
  if (!cJSON_IsArray(added) && added && !cJSON_IsNull(added))
    return obc_fail(OBC_EFORMAT, "%s: added_tokens is not an array", path);
  size_t n_vocab = 0;
  int rc = count_vocab(vocab, added, path, &n_vocab);
  if (rc) return rc;

  Tokenizer *t = NULL;
  rc = tokenizer_alloc(n_vocab, &t);
  *out = t;
  if (rc) return rc;
  const cJSON *item;
  size_t id = 0, index = 0; /* ids were checked by count_vocab */
  char what[96];
  cJSON_ArrayForEach(item, vocab) {
    vocab_entry_name(item, what, sizeof what);
    if ((rc = check_id(item, n_vocab, path, what, &id)) ||
        (rc = tokenizer_set_token(t, id, item->string, strlen(item->string), TOKEN_TYPE_NORMAL)))
      return rc;
  }
  cJSON_ArrayForEach(item, added) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
    const cJSON *special = cJSON_GetObjectItemCaseSensitive(item, "special");
    added_entry_name(index++, what, sizeof what);
    rc = check_id(cJSON_GetObjectItemCaseSensitive(item, "id"), n_vocab, path, what, &id);
    if (rc) return rc;
    if (!cJSON_IsString(content))
      return obc_fail(OBC_EFORMAT, "%s: %s has no content string", path, what);
    rc = tokenizer_set_token(t, id, content->valuestring, strlen(content->valuestring),
                             cJSON_IsTrue(special) ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_USER_DEFINED);
    if (rc) return rc;
  }
  rc = tokenizer_index_vocab(t, (size_t)cJSON_GetArraySize(merges), path);
  if (rc) return rc;
  int32_t rank = 0;
  cJSON_ArrayForEach(item, merges) {
    if (cJSON_IsString(item)) {
      const char *s = item->valuestring;
      const char *space = s[0] ? strchr(s + 1, ' ') : NULL;
      if (!space)
        return obc_fail(OBC_EFORMAT, "%s: merge %d is '%s' (expected \"left right\")", path, rank,
                        obc_text_escape(escaped, sizeof escaped, s, false));
      tokenizer_add_merge(t, s, (size_t)(space - s), space + 1, strlen(space + 1), rank);
    } else if (cJSON_IsArray(item) && cJSON_GetArraySize(item) == 2 &&
               cJSON_IsString(cJSON_GetArrayItem(item, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(item, 1))) {
      const char *left = cJSON_GetArrayItem(item, 0)->valuestring;
      const char *right = cJSON_GetArrayItem(item, 1)->valuestring;
      tokenizer_add_merge(t, left, strlen(left), right, strlen(right), rank);
    } else {
      return obc_fail(OBC_EFORMAT, "%s: merge %d is neither \"left right\" nor [left, right]", path,
                      rank);
    }
    rank++;
  }
  t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
  const cJSON *normalizer = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
  if (normalizer && !cJSON_IsNull(normalizer)) {
    rc = add_normalizer(&t->normalizer, normalizer, path, 0);
    if (rc) return rc;
  }
  snprintf(t->pre.name, sizeof(t->pre.name), "tokenizer.json");
  const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
  const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(root, "decoder");
  /* Without ByteLevel the BPE works on characters, SentencePiece style. */
  if (!has_type(pre, "ByteLevel", 0) && !has_type(decoder, "ByteLevel", 0)) {
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) t->unk_id = tokenizer_token_id(t, unk->valuestring);
    tokenizer_sentencepiece_bytes(
        t, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")));
    t->decode_space = decoder_space(decoder, 0);
    return pre && !cJSON_IsNull(pre) ? add_pre_tokenizer(t, pre, path) : OBC_OK;
  }
  if (!pre || cJSON_IsNull(pre))
    return obc_fail(OBC_EUNSUPPORTED, "%s: no pre_tokenizer (expected ByteLevel or a Split regex)",
                    path);
  return add_pre_tokenizer(t, pre, path);
}

/* Whether the post-processor's template for one sequence starts with bos. */
static int post_processor_adds(const cJSON *node, const char *bos) {
  if (!node || !bos) return 0;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
  if (cJSON_IsString(type) && !strcmp(type->valuestring, "Sequence")) {
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(
                                 node, "processors")) if (post_processor_adds(item, bos)) return 1;
    return 0;
  }
  if (!cJSON_IsString(type) || strcmp(type->valuestring, "TemplateProcessing")) return 0;
  const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(node, "single"), 0);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(first, "SpecialToken"), "id");
  return cJSON_IsString(id) && !strcmp(id->valuestring, bos);
}

static int read_config(Tokenizer *t, const cJSON *root, const cJSON *config, const char *path) {
  const char *bos = token_content(cJSON_GetObjectItemCaseSensitive(config, "bos_token"));
  const char *eos = token_content(cJSON_GetObjectItemCaseSensitive(config, "eos_token"));
  if (bos) t->bos_id = tokenizer_token_id(t, bos);
  if (eos) t->eos_id = tokenizer_token_id(t, eos);
  const cJSON *add_bos = cJSON_GetObjectItemCaseSensitive(config, "add_bos_token");
  if (cJSON_IsBool(add_bos))
    t->add_bos = cJSON_IsTrue(add_bos);
  else
    t->add_bos = post_processor_adds(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), bos);
  const cJSON *chat = cJSON_GetObjectItemCaseSensitive(config, "chat_template");
  if (cJSON_IsArray(chat)) { /* [{"name": "default", "template": ...}, ...] */
    const cJSON *item, *found = NULL;
    cJSON_ArrayForEach(item, chat) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
      if (cJSON_IsString(name) && !strcmp(name->valuestring, "default")) found = item;
    }
    chat = cJSON_GetObjectItemCaseSensitive(found, "template");
  }
  if (cJSON_IsString(chat))
    return tokenizer_set_chat_template(t, chat->valuestring, strlen(chat->valuestring));
  (void)path;
  return 0;
}

/* Newer checkpoints keep the template in chat_template.jinja beside the config. */
static int read_template_file(Tokenizer *t, const char *folder) {
  if (t->chat_template) return 0;
  char path[4096];
  snprintf(path, sizeof(path), "%s/chat_template.jinja", folder);
  if (access(path, F_OK) != 0) return 0;
  char *text = NULL;
  size_t length = 0;
  int rc = text_read_file(path, OBC_TEXT_MAX_BYTES, &text, &length);
  if (!rc) rc = tokenizer_set_chat_template(t, text, length);
  free(text);
  return rc;
}

int tokenizer_from_hf(const char *folder, Tokenizer **out) {
  *out = NULL;
  char path[4096], config_path[4096];
  snprintf(path, sizeof(path), "%s/tokenizer.json", folder);
  snprintf(config_path, sizeof(config_path), "%s/tokenizer_config.json", folder);
  cJSON *root = NULL, *config = NULL;
  int rc = read_json(path, 1, &root);
  if (!rc) rc = read_json(config_path, 0, &config);
  Tokenizer *t = NULL;
  if (!rc) rc = read_model(&t, root, path);
  if (!rc) rc = read_config(t, root, config, config_path);
  if (!rc) rc = read_template_file(t, folder);
  if (!rc) rc = tokenizer_finish(t, path);
  cJSON_Delete(root);
  cJSON_Delete(config);
  if (rc) {
    tokenizer_free(t);
    return rc;
  }
  *out = t;
  return 0;
}
