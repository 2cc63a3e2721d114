/* The table of formats/float16.h. */
#include "formats/float16.h"

#include <pthread.h>

static float table[1 << 16];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void fill_table(void) {
  for (uint32_t h = 0; h < 1u << 16; h++) table[h] = float16_f16_to_f32((uint16_t)h);
}

const float *float16_table(void) {
  pthread_once(&table_once, fill_table);
  return table;
}
