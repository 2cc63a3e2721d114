/* The model's chat template around one user turn, in token ids, for the
 * prompt builders (prompts/niah.c, prompts/ruler_task.c) that tokenize the
 * user text themselves, piece by piece, so that their spans are exact: the
 * template is rendered once around an empty user turn and split where the
 * user text goes. Without a template (or when plain text is asked for) the
 * head is the BOS the tokenizer adds, if any, and the tail is empty. */
#ifndef OBC_CHAT_TURN_H
#define OBC_CHAT_TURN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef struct {
  bool chat;     /* the model's template is used */
  int32_t *head; /* (n_head) the ids before the user text */
  size_t n_head;
  int32_t *tail; /* (n_tail) the ids after it: end of turn, assistant header */
  size_t n_tail;
} ChatTurn;

/* Fails (one line, hint --no-chat-template) when the user turn cannot be
 * located in the template's rendering. */
int chat_turn_open(const Tokenizer *tokenizer, bool no_chat_template, ChatTurn *out);
void chat_turn_close(ChatTurn *turn);

/* Whether ids[0, n_ids) (head + user ids + tail) equal what the template and
 * tokenizer give for the whole user text in one go. */
int chat_turn_consistent(const Tokenizer *tokenizer, const ChatTurn *turn, const char *user,
                         size_t user_length, const int32_t *ids, size_t n_ids, bool *consistent);

#endif
