/* Splits the chat template's rendering around an empty user turn at the
 * first token where it differs from a rendering with text; the rest must be
 * the same tail in both, else the template is not one the builders can
 * fill piece by piece. */
#include "prompts/chat_turn.h"

#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

static int copy_ids(const int32_t *ids, size_t n, int32_t **out) {
  *out = obc_malloc((n ? n : 1) * sizeof **out, "chat template ids");
  if (!*out) return OBC_ENOMEM;
  if (n) memcpy(*out, ids, n * sizeof **out);
  return OBC_OK;
}

int chat_turn_open(const Tokenizer *tokenizer, bool no_chat_template, ChatTurn *out) {
  memset(out, 0, sizeof *out);
  out->chat = !no_chat_template && tokenizer_chat_template(tokenizer) != OBC_CHAT_NONE;
  if (!out->chat) {
    int32_t bos = tokenizer_bos_id(tokenizer);
    bool adds = tokenizer_adds_bos(tokenizer) && bos >= 0;
    out->n_head = adds ? 1 : 0;
    int rc = copy_ids(&bos, out->n_head, &out->head);
    if (!rc) rc = copy_ids(NULL, 0, &out->tail);
    if (rc) chat_turn_close(out);
    return rc;
  }
  int32_t *empty = NULL, *probe = NULL;
  size_t n_empty = 0, n_probe = 0;
  int rc = tokenizer_encode_chat(tokenizer, NULL, "", &empty, &n_empty);
  if (!rc) rc = tokenizer_encode_chat(tokenizer, NULL, "Hello world.", &probe, &n_probe);
  size_t split = 0;
  while (!rc && split < n_empty && split < n_probe && empty[split] == probe[split]) split++;
  size_t tail = n_empty - split;
  if (!rc && !(n_probe >= tail + split &&
               !memcmp(probe + n_probe - tail, empty + split, tail * sizeof *probe)))
    rc = obc_fail(OBC_EUNSUPPORTED,
                  "cannot locate the user turn in the model's chat template (hint: "
                  "--no-chat-template)");
  if (!rc) rc = copy_ids(empty, split, &out->head);
  if (!rc) rc = copy_ids(empty + split, tail, &out->tail);
  if (!rc) {
    out->n_head = split;
    out->n_tail = tail;
  }
  free(empty);
  free(probe);
  if (rc) chat_turn_close(out);
  return rc;
}

void chat_turn_close(ChatTurn *turn) {
  free(turn->head);
  free(turn->tail);
  memset(turn, 0, sizeof *turn);
}

int chat_turn_consistent(const Tokenizer *tokenizer, const ChatTurn *turn, const char *user,
                         size_t user_length, const int32_t *ids, size_t n_ids, bool *consistent) {
  int32_t *whole = NULL;
  size_t n_whole = 0;
  int rc = turn->chat ? tokenizer_encode_chat(tokenizer, NULL, user, &whole, &n_whole)
                      : tokenizer_encode(tokenizer, user, user_length, &whole, &n_whole);
  if (rc) return rc;
  size_t head = turn->chat ? 0 : turn->n_head; /* the chat rendering has its own head */
  *consistent = head + n_whole == n_ids && !memcmp(ids, turn->head, head * sizeof *ids) &&
                !memcmp(ids + head, whole, n_whole * sizeof *ids);
  free(whole);
  return OBC_OK;
}
