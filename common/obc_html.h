/* HTML output of the index.html pages (`obcache sweep`, `obcache plot` of an
 * eval folder): text written with the five characters HTML gives a meaning
 * escaped, so a name from an untrusted file reads as text, never as markup. */
#ifndef OBC_HTML_H
#define OBC_HTML_H

#include <stdio.h>

/* Writes text with < > & " ' as entities. */
void obc_html_text(FILE *out, const char *text);

#endif
