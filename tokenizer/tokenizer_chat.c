/* Chat templates: which format the model's own template (GGUF
 * tokenizer.chat_template or tokenizer_config.json) uses, the default system
 * message it inserts, and the rendering of a one-turn chat that generation
 * continues from. We recognise the two formats of the models we run (ChatML
 * for SmolLM2, Qwen2 and Qwen3, header tokens for Llama 3) rather than run
 * Jinja; the tests compare the rendering with the template run by jinja2.
 * Qwen3's template can open the assistant turn with a reasoning block; we
 * render it as transformers does with enable_thinking=False, an empty
 * "<think>\n\n</think>\n\n", so that the model answers at once and captured
 * prompts never contain a thinking block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"

/* A growing NUL-terminated string. */
typedef struct {
  char *data;
  size_t length, capacity;
  int failed;
} ChatText;

static void text_append(ChatText *t, const char *s, size_t n) {
  if (t->failed) return;
  size_t need = t->length + n + 1;
  if (need > t->capacity) {
    size_t capacity = 2 * need + 64;
    char *data = realloc(t->data, capacity);
    if (!data) {
      t->failed = 1;
      return;
    }
    t->data = data;
    t->capacity = capacity;
  }
  for (size_t i = 0; i < n; i++) t->data[t->length + i] = s[i];
  t->length += n;
  t->data[t->length] = '\0';
}

static void text_add(ChatText *t, const char *s) { text_append(t, s, strlen(s)); }

/* Appends s without leading and trailing whitespace (Jinja's `trim`). */
static void text_add_trimmed(ChatText *t, const char *s) {
  size_t n = strlen(s);
  while (n && strchr(" \t\n\r\f\v", s[n - 1])) n--;
  size_t start = 0;
  while (start < n && strchr(" \t\n\r\f\v", s[start])) start++;
  text_append(t, s + start, n - start);
}

/* Copies a Jinja string literal's contents [s, s + n), turning \n, \t, \\,
 * \' and \" escapes into their characters. */
static char *unescape_literal(const char *s, size_t n) {
  char *out = malloc(n + 1);
  if (!out) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 1 < n) {
      char e = s[++i];
      out[k++] = e == 'n' ? '\n' : e == 't' ? '\t' : e;
    } else {
      out[k++] = s[i];
    }
  }
  out[k] = '\0';
  return out;
}

static int has_unescaped_quote(const char *s, const char *end) {
  for (; s < end; s++) {
    if (*s == '\\' && s + 1 < end)
      s++;
    else if (*s == '\'' || *s == '"')
      return 1;
  }
  return 0;
}

/* After "<|im_start|>system" and a newline (real or the escape "\n"), a
 * default system message is the text up to "<|im_end|>" when it lies inside
 * one string literal (no unescaped quote in between), as in SmolLM2's and Qwen2's
 * templates; the branch that writes a given system message has
 * `+ message['content'] +` there instead. */
static int find_chatml_default_system(const char *template_text, char **out) {
  *out = NULL;
  const char *marker = "<|im_start|>system";
  for (const char *p = strstr(template_text, marker); p; p = strstr(p + 1, marker)) {
    const char *q = p + strlen(marker);
    if (*q == '\n')
      q++;
    else if (q[0] == '\\' && q[1] == 'n')
      q += 2;
    else
      continue;
    const char *end = strstr(q, "<|im_end|>");
    if (!end || end == q) continue;
    if (has_unescaped_quote(q, end)) continue;
    *out = unescape_literal(q, (size_t)(end - q));
    return *out ? 0 : obc_fail(OBC_ENOMEM, "out of memory for the default system message");
  }
  return 0;
}

/* Llama 3.1 opens every system turn with its knowledge cutoff and a date
 * (the template's date_string default). */
static int find_llama3_preamble(const char *template_text, char **out) {
  *out = NULL;
  const char *cutoff = strstr(template_text, "Cutting Knowledge Date:");
  if (!cutoff) return OBC_OK;
  const char *cutoff_end = strstr(cutoff, "\\n");
  const char *date = strstr(template_text, "date_string = \"");
  if (!cutoff_end) return OBC_OK;
  ChatText t = {0};
  text_append(&t, cutoff, (size_t)(cutoff_end - cutoff));
  text_add(&t, "\n");
  if (date) {
    date += strlen("date_string = \"");
    const char *date_end = strchr(date, '"');
    if (date_end) {
      text_add(&t, "Today Date: ");
      text_append(&t, date, (size_t)(date_end - date));
      text_add(&t, "\n");
    }
  }
  text_add(&t, "\n");
  if (t.failed) {
    free(t.data);
    return obc_fail(OBC_ENOMEM, "out of memory for the chat preamble");
  }
  *out = t.data;
  return OBC_OK;
}

int tokenizer_chat_detect(Tokenizer *tokenizer) {
  const char *text = tokenizer->chat_template;
  free(tokenizer->default_system);
  tokenizer->default_system = NULL;
  tokenizer->chat = OBC_CHAT_NONE;
  tokenizer->empty_think = 0;
  if (!text) return 0;
  if (strstr(text, "<|im_start|>")) {
    tokenizer->chat = OBC_CHAT_CHATML;
    tokenizer->empty_think = strstr(text, "enable_thinking") && strstr(text, "</think>");
    return find_chatml_default_system(text, &tokenizer->default_system);
  }
  if (strstr(text, "<|start_header_id|>")) {
    tokenizer->chat = OBC_CHAT_LLAMA3;
    return find_llama3_preamble(text, &tokenizer->default_system);
  }
  return 0;
}

/* The template writes the BOS text itself when it names bos_token. */
static void add_template_bos(const Tokenizer *tokenizer, ChatText *t) {
  if (tokenizer->chat_template && strstr(tokenizer->chat_template, "bos_token") &&
      tokenizer->bos_id >= 0)
    text_add(t, tokenizer->tokens[tokenizer->bos_id]);
}

int tokenizer_render_chat(const Tokenizer *tokenizer, const char *system, const char *user,
                          char **text) {
  *text = NULL;
  ChatText t = {0};
  text_append(&t, "", 0);
  switch (tokenizer->chat) {
    case OBC_CHAT_CHATML:
      add_template_bos(tokenizer, &t);
      if (!system) system = tokenizer->default_system;
      if (system) {
        text_add(&t, "<|im_start|>system\n");
        text_add(&t, system);
        text_add(&t, "<|im_end|>\n");
      }
      text_add(&t, "<|im_start|>user\n");
      text_add(&t, user);
      text_add(&t, "<|im_end|>\n<|im_start|>assistant\n");
      if (tokenizer->empty_think) text_add(&t, "<think>\n\n</think>\n\n");
      break;
    case OBC_CHAT_LLAMA3:
      add_template_bos(tokenizer, &t);
      /* default_system holds Llama 3.1's preamble, which opens every system turn. */
      if (system || tokenizer->default_system) {
        text_add(&t, "<|start_header_id|>system<|end_header_id|>\n\n");
        if (tokenizer->default_system) text_add(&t, tokenizer->default_system);
        if (system) text_add_trimmed(&t, system);
        text_add(&t, "<|eot_id|>");
      }
      text_add(&t, "<|start_header_id|>user<|end_header_id|>\n\n");
      text_add_trimmed(&t, user);
      text_add(&t, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case OBC_CHAT_NONE:
      if (system) {
        text_add(&t, system);
        text_add(&t, "\n\n");
      }
      text_add(&t, user);
      break;
  }
  if (t.failed) {
    free(t.data);
    return obc_fail(OBC_ENOMEM, "tokenizer: out of memory rendering the chat");
  }
  *text = t.data;
  return OBC_OK;
}

int tokenizer_encode_chat(const Tokenizer *tokenizer, const char *system, const char *user,
                          int32_t **ids, size_t *n_ids) {
  *ids = NULL;
  *n_ids = 0;
  char *text = NULL;
  int rc = tokenizer_render_chat(tokenizer, system, user, &text);
  if (rc) return rc;
  int32_t *body = NULL;
  size_t n_body = 0;
  rc = tokenizer_encode(tokenizer, text, strlen(text), &body, &n_body);
  free(text);
  if (rc) return rc;
  /* Without a template the BOS comes from the tokenizer's add_bos flag. */
  int bos = tokenizer->chat == OBC_CHAT_NONE && tokenizer->add_bos && tokenizer->bos_id >= 0;
  if (!bos) {
    *ids = body;
    *n_ids = n_body;
    return OBC_OK;
  }
  int32_t *all = malloc((n_body + 1) * sizeof(*all));
  if (!all) {
    free(body);
    return obc_fail(OBC_ENOMEM, "tokenizer: out of memory");
  }
  all[0] = tokenizer->bos_id;
  memcpy(all + 1, body, n_body * sizeof(*all));
  free(body);
  *ids = all;
  *n_ids = n_body + 1;
  return OBC_OK;
}
