/* The eight variants of RULER's niah task (scripts/synthetic.yaml:
 * niah_single_1/2/3, niah_multikey_1/2/3, niah_multivalue,
 * niah_multiquery) as RulerTextFn generators for prompts/ruler_task.c's
 * task table. */
#ifndef OBC_RULER_NIAH_H
#define OBC_RULER_NIAH_H

#include "prompts/ruler_text.h"

int ruler_niah_single_1(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                        RulerText *out);
int ruler_niah_single_2(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                        RulerText *out);
int ruler_niah_single_3(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                        RulerText *out);
int ruler_niah_multikey_1(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                          RulerText *out);
int ruler_niah_multikey_2(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                          RulerText *out);
int ruler_niah_multikey_3(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                          RulerText *out);
int ruler_niah_multivalue(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                          RulerText *out);
int ruler_niah_multiquery(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                          RulerText *out);

#endif
