/* Check suite for the tokenizer (tokenizer/tokenizer*.c) on the default model's
 * GGUF vocabulary: decode(encode(x)) == x on the corpus, special tokens split
 * out whole and never merged, the chat renderings of the ChatML and Llama 3
 * formats, stop tokens, and bad input. The ids themselves are compared with an
 * independent reference in test_tokenizer_reference.py. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "tests/test_env.h"

static Tokenizer *tok;

static const char *model_path(void) {
  const char *path = getenv("OBC_MODEL");
  return path && path[0] ? path : OBC_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static void load_tokenizer(void) {
  GgufFile *file = NULL;
  int rc = gguf_open(model_path(), &file);
  ck_assert_msg(rc == 0, "gguf_open: %s", obc_error_message());
  rc = tokenizer_from_gguf(file, model_path(), &tok);
  gguf_close(file);
  ck_assert_msg(rc == 0, "tokenizer_from_gguf: %s", obc_error_message());
}

static void free_tokenizer(void) {
  tokenizer_free(tok);
  tok = NULL;
}

static char *read_corpus(size_t *length) {
  const char *source = getenv("OBC_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/tokenizer_corpus.txt", source ? source : OBC_SOURCE_DIR);
  FILE *fp = fopen(path, "rb");
  ck_assert_msg(fp != NULL, "cannot open %s", path);
  char *text = malloc(1 << 20);
  *length = fread(text, 1, (1 << 20) - 1, fp);
  text[*length] = '\0';
  fclose(fp);
  return text;
}

/* Encodes then decodes [text, text + length) and checks the bytes come back. */
static void assert_round_trip(const char *text, size_t length) {
  int32_t *ids = NULL;
  size_t n = 0;
  char *back = NULL;
  ck_assert_msg(tokenizer_encode(tok, text, length, &ids, &n) == 0, "%s", obc_error_message());
  ck_assert_int_eq(tokenizer_decode(tok, ids, n, &back), 0);
  ck_assert_msg(strlen(back) == length && !memcmp(back, text, length),
                "round trip of '%.*s' gave '%s'", (int)length, text, back);
  free(ids);
  free(back);
}

static size_t encode(const char *text, int32_t **ids) {
  size_t n = 0;
  ck_assert_msg(tokenizer_encode(tok, text, strlen(text), ids, &n) == 0, "%s", obc_error_message());
  return n;
}

START_TEST(decode_of_encode_is_the_corpus_whole_and_line_by_line) {
  size_t length = 0;
  char *corpus = read_corpus(&length);
  ck_assert_uint_gt(length, 1000);
  assert_round_trip(corpus, length);
  for (size_t start = 0; start < length;) {
    const char *newline = memchr(corpus + start, '\n', length - start);
    size_t end = newline ? (size_t)(newline - corpus) : length;
    assert_round_trip(corpus + start, end - start);
    start = end + 1;
  }
  free(corpus);
}
END_TEST

START_TEST(long_runs_of_one_character_round_trip) {
  const char fill[] = {' ', 'a', '7', '\n', '\t'};
  size_t length = 20000;
  char *text = malloc(length);
  for (size_t k = 0; k < sizeof fill; k++) {
    memset(text, fill[k], length);
    assert_round_trip(text, length);
  }
  free(text);
}
END_TEST

START_TEST(special_tokens_are_split_out_whole) {
  int32_t start = tokenizer_token_id(tok, "<|im_start|>");
  int32_t end = tokenizer_token_id(tok, "<|im_end|>");
  ck_assert_int_ge(start, 0);
  ck_assert_int_ge(end, 0);
  ck_assert(tokenizer_is_special(tok, start));
  int32_t *ids = NULL;
  size_t n = encode("<|im_start|>user\nhi<|im_end|>", &ids);
  ck_assert_uint_ge(n, 4);
  ck_assert_int_eq(ids[0], start);
  ck_assert_int_eq(ids[n - 1], end);
  free(ids);
  /* Glued to letters on both sides, still one token, never merged with them. */
  n = encode("x<|im_end|>y", &ids);
  ck_assert_uint_eq(n, 3);
  ck_assert_int_eq(ids[1], end);
  free(ids);
  n = encode("<|endoftext|><|endoftext|>", &ids);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(ids[0], tokenizer_token_id(tok, "<|endoftext|>"));
  ck_assert_int_eq(ids[1], ids[0]);
  free(ids);
}
END_TEST

START_TEST(near_misses_of_special_tokens_are_plain_text) {
  const char *texts[] = {"<|im_start|", "<im_start|>", "<|IM_START|>", "< |im_end|>"};
  for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
    int32_t *ids = NULL;
    size_t n = encode(texts[k], &ids);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(!tokenizer_is_special(tok, ids[i]), "'%s' produced special token %d", texts[k],
                    ids[i]);
    free(ids);
  }
}
END_TEST

START_TEST(token_text_unmaps_byte_level_spelling) {
  char text[64];
  int32_t *ids = NULL;
  size_t n = encode(" the", &ids);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(tokenizer_token_text(tok, ids[0], text, sizeof text), 0);
  ck_assert_str_eq(text, " the");
  free(ids);
  ck_assert_int_eq(
      tokenizer_token_text(tok, tokenizer_token_id(tok, "<|im_start|>"), text, sizeof text), 0);
  ck_assert_str_eq(text, "<|im_start|>");
  n = encode("\n", &ids);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(tokenizer_token_text(tok, ids[0], text, sizeof text), 0);
  ck_assert_str_eq(text, "\n");
  free(ids);
  char tiny[2];
  ck_assert_int_eq(
      tokenizer_token_text(tok, tokenizer_token_id(tok, "<|im_start|>"), tiny, sizeof tiny),
      OBC_EINVAL);
}
END_TEST

START_TEST(a_byte_without_a_token_is_dropped) {
  /* SmolLM2's vocabulary has no token for byte 0x04 (as in the reference). */
  ck_assert_int_lt(tok->byte_ids[0x04], 0);
  int32_t *with = NULL, *a = NULL, *b = NULL;
  size_t n_with = encode("a\x04z", &with);
  ck_assert_uint_eq(encode("a", &a), 1);
  ck_assert_uint_eq(encode("z", &b), 1);
  ck_assert_uint_eq(n_with, 2);
  ck_assert_int_eq(with[0], a[0]);
  ck_assert_int_eq(with[1], b[0]);
  free(with);
  free(a);
  free(b);
}
END_TEST

START_TEST(invalid_utf8_is_rejected_with_its_offset) {
  const char bad[] = "ok \xC3\x28 then";
  int32_t *ids = (int32_t *)1;
  size_t n = 7;
  ck_assert_int_eq(tokenizer_encode(tok, bad, strlen(bad), &ids, &n), OBC_EINVAL);
  ck_assert(ids == NULL && n == 0);
  ck_assert_msg(strstr(obc_error_message(), "byte 3") != NULL, "%s", obc_error_message());
  const char surrogate[] = "\xED\xA0\x80";
  ck_assert_int_eq(tokenizer_encode(tok, surrogate, 3, &ids, &n), OBC_EINVAL);
}
END_TEST

START_TEST(out_of_range_ids_do_not_decode) {
  int32_t ids[] = {1, (int32_t)tokenizer_vocab_size(tok)};
  char *text = NULL;
  ck_assert_int_eq(tokenizer_decode(tok, ids, 2, &text), OBC_EINVAL);
  ck_assert_ptr_null(text);
  ids[1] = -1;
  ck_assert_int_eq(tokenizer_decode(tok, ids, 2, &text), OBC_EINVAL);
}
END_TEST

START_TEST(stop_tokens_are_eos_and_end_of_turn_markers) {
  ck_assert(tokenizer_is_stop(tok, tokenizer_eos_id(tok)));
  ck_assert(tokenizer_is_stop(tok, tokenizer_token_id(tok, "<|im_end|>")));
  ck_assert(tokenizer_is_stop(tok, tokenizer_token_id(tok, "<|endoftext|>")));
  ck_assert(!tokenizer_is_stop(tok, tokenizer_token_id(tok, "<|im_start|>")));
  int32_t *ids = NULL;
  ck_assert_uint_eq(encode("Paris", &ids), 1);
  ck_assert(!tokenizer_is_stop(tok, ids[0]));
  free(ids);
}
END_TEST

START_TEST(unknown_pre_tokenizer_names_file_and_type) {
  TokenizerPreSplit pre = {0};
  ck_assert_int_eq(tokenizer_pre_from_name(&pre, "mystery-pre", "some/model.gguf"),
                   OBC_EUNSUPPORTED);
  ck_assert(strstr(obc_error_message(), "some/model.gguf") != NULL);
  ck_assert(strstr(obc_error_message(), "mystery-pre") != NULL);
  tokenizer_pre_free(&pre);
}
END_TEST

static char *render(const char *system, const char *user) {
  char *text = NULL;
  ck_assert_int_eq(tokenizer_render_chat(tok, system, user, &text), 0);
  return text;
}

START_TEST(chatml_uses_the_templates_default_system_message) {
  ck_assert_int_eq(tokenizer_chat_template(tok), OBC_CHAT_CHATML);
  char *text = render(NULL, "What is 2+2?");
  ck_assert_str_eq(
      text,
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  free(text);
  text = render("Be brief.", "  hi  ");
  ck_assert_str_eq(text,
                   "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n  hi  <|im_end|>\n"
                   "<|im_start|>assistant\n");
  free(text);
}
END_TEST

START_TEST(chat_prompt_encodes_the_rendered_text_without_bos) {
  int32_t *chat = NULL, *plain = NULL;
  size_t n_chat = 0;
  ck_assert_int_eq(tokenizer_encode_chat(tok, "S", "U", &chat, &n_chat), 0);
  char *text = render("S", "U");
  size_t n_plain = encode(text, &plain);
  ck_assert_uint_eq(n_chat, n_plain);
  ck_assert_int_eq(memcmp(chat, plain, n_chat * sizeof(int32_t)), 0);
  ck_assert_int_eq(chat[0], tokenizer_token_id(tok, "<|im_start|>"));
  free(chat);
  free(plain);
  free(text);
}
END_TEST

/* Templates of our own in the shapes the real ones take (the Jinja is not run). */
START_TEST(chatml_default_system_inside_an_escaped_literal) {
  const char *t =
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
      "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou "
      "are Tester, a \\'quiet\\' helper.<|im_end|>\\n' }}{%- endif %}";
  ck_assert_int_eq(tokenizer_set_chat_template(tok, t, strlen(t)), 0);
  ck_assert_int_eq(tokenizer_chat_detect(tok), 0);
  ck_assert_int_eq(tokenizer_chat_template(tok), OBC_CHAT_CHATML);
  /* The branch that concatenates the given message is skipped; escapes are undone. */
  ck_assert_str_eq(tokenizer_default_system(tok), "You are Tester, a 'quiet' helper.");
  const char *t2 = "{{- '<|im_start|>system\\nYou are Tester.\\nBe kind.<|im_end|>\\n' }}";
  ck_assert_int_eq(tokenizer_set_chat_template(tok, t2, strlen(t2)), 0);
  ck_assert_int_eq(tokenizer_chat_detect(tok), 0);
  ck_assert_str_eq(tokenizer_default_system(tok), "You are Tester.\nBe kind.");
}
END_TEST

/* Qwen3's generation prompt: with enable_thinking false (how we render it),
 * an empty reasoning block after the assistant header; no default system. */
START_TEST(qwen3_template_renders_with_thinking_off) {
  const char *t =
      "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + "
      "messages[0].content + '<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{{- "
      "'<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- "
      "endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if "
      "enable_thinking is defined and enable_thinking is false %}{{- "
      "'<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
  ck_assert_int_eq(tokenizer_set_chat_template(tok, t, strlen(t)), 0);
  ck_assert_int_eq(tokenizer_chat_detect(tok), 0);
  ck_assert_int_eq(tokenizer_chat_template(tok), OBC_CHAT_CHATML);
  ck_assert_ptr_null(tokenizer_default_system(tok));
  char *text = render(NULL, "Where is the key?");
  ck_assert_str_eq(text,
                   "<|im_start|>user\nWhere is the key?<|im_end|>\n<|im_start|>assistant\n"
                   "<think>\n\n</think>\n\n");
  free(text);
  text = render("Be brief.", "hi");
  ck_assert_str_eq(text,
                   "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                   "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  free(text);
}
END_TEST

START_TEST(llama3_header_format) {
  const char *t =
      "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' "
      "}}{%- endfor %}";
  ck_assert_int_eq(tokenizer_set_chat_template(tok, t, strlen(t)), 0);
  ck_assert_int_eq(tokenizer_chat_detect(tok), 0);
  ck_assert_int_eq(tokenizer_chat_template(tok), OBC_CHAT_LLAMA3);
  ck_assert_ptr_null(tokenizer_default_system(tok));
  char bos[64];
  ck_assert_int_eq(tokenizer_token_text(tok, tokenizer_bos_id(tok), bos, sizeof bos), 0);
  char want[512];
  snprintf(want, sizeof want,
           "%s<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           bos);
  char *text = render(" Be brief.\n", " hi ");
  ck_assert_str_eq(text, want);
  free(text);
  snprintf(want, sizeof want,
           "%s<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           bos);
  text = render(NULL, "hi");
  ck_assert_str_eq(text, want);
  free(text);
}
END_TEST

START_TEST(llama31_system_turn_opens_with_knowledge_cutoff_and_date) {
  const char *t =
      "{%- set date_string = \"1 Jan 2030\" %}{{- bos_token }}{{- "
      "'<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- \"Cutting Knowledge Date: "
      "March 2029\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}";
  ck_assert_int_eq(tokenizer_set_chat_template(tok, t, strlen(t)), 0);
  ck_assert_int_eq(tokenizer_chat_detect(tok), 0);
  ck_assert_str_eq(tokenizer_default_system(tok),
                   "Cutting Knowledge Date: March 2029\nToday Date: 1 Jan 2030\n\n");
  char *text = render(NULL, "hi");
  ck_assert(strstr(text,
                   "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: March "
                   "2029\nToday Date: 1 Jan 2030\n\n<|eot_id|><|start_header_id|>user") != NULL);
  free(text);
}
END_TEST

START_TEST(no_template_is_plain_text) {
  free(tok->chat_template);
  tok->chat_template = NULL;
  ck_assert_int_eq(tokenizer_chat_detect(tok), 0);
  ck_assert_int_eq(tokenizer_chat_template(tok), OBC_CHAT_NONE);
  char *text = render("S", "U");
  ck_assert_str_eq(text, "S\n\nU");
  free(text);
}
END_TEST

/* ---- tokenizer.json ids ---- */

/* GPT-2's stand-in for byte b (printable bytes stand for themselves, the
 * others for U+0100 onwards in byte order), as JSON string content. */
static void byte_stand_in(int b, char out[8]) {
  int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174, code = b;
  if (!printable) {
    code = 256;
    for (int c = 0; c < b; c++)
      code += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174);
  }
  if (code == '"' || code == '\\')
    snprintf(out, 8, "\\%c", code);
  else if (code < 0x80)
    snprintf(out, 8, "%c", code);
  else
    snprintf(out, 8, "%c%c", 0xC0 | (code >> 6), 0x80 | (code & 0x3F));
}

/* Writes FOLDER/tokenizer.json: a byte-level BPE whose vocab is the 256 byte
 * tokens (id = byte) and {"ab": VOCAB_ID}, with added_tokens [{"id":
 * ADDED_ID, ...}]: 258 entries. Returns the folder (static). */
static const char *hf_folder(const char *vocab_id, const char *added_id) {
  static char folder[4096], path[4200];
  test_scratch_path("tokenizer_hf", folder, sizeof folder, 1);
  snprintf(path, sizeof path, "%s/tokenizer.json", folder);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  fprintf(fp, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
  for (int b = 0; b < 256; b++) {
    char text[8];
    byte_stand_in(b, text);
    fprintf(fp, "\"%s\": %d, ", text, b);
  }
  fprintf(fp,
          "\"ab\": %s}, \"merges\": [\"a b\"]},"
          " \"added_tokens\": [{\"id\": %s, \"content\": \"<s>\", \"special\": true}],"
          " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
          vocab_id, added_id);
  fclose(fp);
  return folder;
}

/* Writes FOLDER/tokenizer.json: the 256 byte tokens (no merges) with the
 * given "normalizer" and "pre_tokenizer" JSON values. Returns the folder. */
static const char *hf_folder_with(const char *normalizer, const char *pre_tokenizer) {
  static char folder[4096], path[4200];
  test_scratch_path("tokenizer_hf_normalizer", folder, sizeof folder, 1);
  snprintf(path, sizeof path, "%s/tokenizer.json", folder);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  fprintf(fp, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
  for (int b = 0; b < 256; b++) {
    char text[8];
    byte_stand_in(b, text);
    fprintf(fp, "%s\"%s\": %d", b ? ", " : "", text, b);
  }
  fprintf(fp, "}, \"merges\": []}, \"normalizer\": %s, \"pre_tokenizer\": %s}", normalizer,
          pre_tokenizer);
  fclose(fp);
  return folder;
}

/* Loading fails with code and a message naming tokenizer.json and fragment. */
static void assert_hf_fails(const char *folder, int code, const char *fragment) {
  Tokenizer *t = (Tokenizer *)1;
  ck_assert_int_eq(tokenizer_from_hf(folder, &t), code);
  ck_assert_ptr_null(t);
  const char *msg = obc_error_message();
  ck_assert_msg(strstr(msg, "tokenizer.json") && strstr(msg, fragment), "message: %s", msg);
}

/* Loading fails with OBC_EFORMAT and a message naming tokenizer.json and fragment. */
static void assert_hf_refused(const char *folder, const char *fragment) {
  Tokenizer *t = (Tokenizer *)1;
  ck_assert_int_eq(tokenizer_from_hf(folder, &t), OBC_EFORMAT);
  ck_assert_ptr_null(t);
  const char *msg = obc_error_message();
  ck_assert_msg(strstr(msg, "tokenizer.json") && strstr(msg, fragment), "message: %s", msg);
}

START_TEST(hf_ids_are_integers_below_the_number_of_entries) {
  Tokenizer *t = NULL;
  ck_assert_msg(tokenizer_from_hf(hf_folder("256", "257"), &t) == 0, "%s", obc_error_message());
  ck_assert_uint_eq(tokenizer_vocab_size(t), 258);
  ck_assert_int_eq(tokenizer_token_id(t, "ab"), 256);
  tokenizer_free(t);
  /* 258 entries: ids 0..257. A huge id was cast with undefined behaviour (or
   * sized 48 GB of tables for 2e9) before the bound. */
  assert_hf_refused(hf_folder("2e9", "257"), "model.vocab['ab'] has id 2e+09");
  assert_hf_refused(hf_folder("1e300", "257"), "model.vocab['ab']");
  assert_hf_refused(hf_folder("258", "257"), "expected an integer below 258");
  assert_hf_refused(hf_folder("2.5", "257"), "model.vocab['ab'] has id 2.5");
  assert_hf_refused(hf_folder("-1", "257"), "model.vocab['ab']");
  assert_hf_refused(hf_folder("\"x\"", "257"), "model.vocab['ab'] has no numeric id");
  assert_hf_refused(hf_folder("256", "2000000000"), "added_tokens[0] has id 2e+09");
  assert_hf_refused(hf_folder("256", "1e20"), "added_tokens[0]");
  assert_hf_refused(hf_folder("256", "null"), "added_tokens[0] has no numeric id");
}
END_TEST

/* Twelve Replace("a", "aaaa") would make 4^12 bytes of each "a": the
 * normalized text is capped, and encoding fails at once instead. */
START_TEST(normalizer_growth_is_capped) {
  char normalizer[2048] = "{\"type\": \"Sequence\", \"normalizers\": [";
  for (int i = 0; i < 12; i++)
    strcat(normalizer, i ? ", {\"type\": \"Replace\", \"pattern\": {\"String\": \"a\"}, "
                           "\"content\": \"aaaa\"}"
                         : "{\"type\": \"Replace\", \"pattern\": {\"String\": \"a\"}, "
                           "\"content\": \"aaaa\"}");
  strcat(normalizer, "]}");
  Tokenizer *t = NULL;
  ck_assert_msg(tokenizer_from_hf(hf_folder_with(normalizer, "{\"type\": \"ByteLevel\"}"), &t) == 0,
                "%s", obc_error_message());
  char text[101];
  memset(text, 'a', 100);
  text[100] = '\0';
  int32_t *ids = NULL;
  size_t n = 0;
  ck_assert_int_eq(tokenizer_encode(t, text, 100, &ids, &n), OBC_EINVAL);
  ck_assert_msg(strstr(obc_error_message(), "grows the text"), "%s", obc_error_message());
  ck_assert_int_eq(tokenizer_encode(t, "b", 1, &ids, &n), 0); /* no "a": nothing grows */
  ck_assert_uint_eq(n, 1);
  free(ids);
  tokenizer_free(t);
}
END_TEST

START_TEST(normalizer_nesting_and_steps_are_bounded) {
  char nested[1024] = "";
  for (int i = 0; i < 10; i++) strcat(nested, "{\"type\": \"Sequence\", \"normalizers\": [");
  strcat(nested, "{\"type\": \"NFC\"}");
  for (int i = 0; i < 10; i++) strcat(nested, "]}");
  assert_hf_fails(hf_folder_with(nested, "{\"type\": \"ByteLevel\"}"), OBC_EUNSUPPORTED,
                  "nested deeper than 8");
  char many[4096] = "{\"type\": \"Sequence\", \"normalizers\": [";
  for (int i = 0; i < 65; i++) strcat(many, i ? ", {\"type\": \"NFC\"}" : "{\"type\": \"NFC\"}");
  strcat(many, "]}");
  assert_hf_fails(hf_folder_with(many, "{\"type\": \"ByteLevel\"}"), OBC_EUNSUPPORTED,
                  "more than 64 normalizer steps");
  assert_hf_fails(hf_folder_with("{\"type\": \"Replace\", \"pattern\": {\"String\": \"\"}, "
                                 "\"content\": \"x\"}",
                                 "{\"type\": \"ByteLevel\"}"),
                  OBC_EFORMAT, "non-empty String pattern");
  assert_hf_fails(hf_folder_with("{\"type\": \"Prepend\"}", "{\"type\": \"ByteLevel\"}"),
                  OBC_EFORMAT, "Prepend without a string 'prepend'");
}
END_TEST

START_TEST(metaspace_replacement_is_one_character) {
  assert_hf_fails(hf_folder_with("null", "{\"type\": \"Metaspace\", \"replacement\": \"ab\"}"),
                  OBC_EFORMAT, "one-character replacement");
  assert_hf_fails(hf_folder_with("null",
                                 "{\"type\": \"Metaspace\", \"replacement\": \"_\", "
                                 "\"prepend_scheme\": \"sometimes\"}"),
                  OBC_EFORMAT, "prepend_scheme 'sometimes'");
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("tokenizer");
  TCase *encode_case = tcase_create("encode");
  tcase_add_checked_fixture(encode_case, load_tokenizer, free_tokenizer);
  tcase_add_test(encode_case, decode_of_encode_is_the_corpus_whole_and_line_by_line);
  tcase_add_test(encode_case, long_runs_of_one_character_round_trip);
  tcase_add_test(encode_case, special_tokens_are_split_out_whole);
  tcase_add_test(encode_case, near_misses_of_special_tokens_are_plain_text);
  tcase_add_test(encode_case, token_text_unmaps_byte_level_spelling);
  tcase_add_test(encode_case, a_byte_without_a_token_is_dropped);
  tcase_add_test(encode_case, invalid_utf8_is_rejected_with_its_offset);
  tcase_add_test(encode_case, out_of_range_ids_do_not_decode);
  tcase_add_test(encode_case, stop_tokens_are_eos_and_end_of_turn_markers);
  tcase_add_test(encode_case, unknown_pre_tokenizer_names_file_and_type);
  suite_add_tcase(suite, encode_case);
  TCase *chat_case = tcase_create("chat");
  tcase_add_checked_fixture(chat_case, load_tokenizer, free_tokenizer);
  tcase_add_test(chat_case, chatml_uses_the_templates_default_system_message);
  tcase_add_test(chat_case, qwen3_template_renders_with_thinking_off);
  tcase_add_test(chat_case, chat_prompt_encodes_the_rendered_text_without_bos);
  tcase_add_test(chat_case, chatml_default_system_inside_an_escaped_literal);
  tcase_add_test(chat_case, llama3_header_format);
  tcase_add_test(chat_case, llama31_system_turn_opens_with_knowledge_cutoff_and_date);
  tcase_add_test(chat_case, no_template_is_plain_text);
  suite_add_tcase(suite, chat_case);
  TCase *hf_case = tcase_create("hf");
  tcase_add_test(hf_case, hf_ids_are_integers_below_the_number_of_entries);
  tcase_add_test(hf_case, normalizer_growth_is_capped);
  tcase_add_test(hf_case, normalizer_nesting_and_steps_are_bounded);
  tcase_add_test(hf_case, metaspace_replacement_is_one_character);
  suite_add_tcase(suite, hf_case);
  test_scratch_begin("tokenizer");
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
