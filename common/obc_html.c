/* HTML-escaped text (common/obc_html.h). */
#include "common/obc_html.h"

void obc_html_text(FILE *out, const char *text) {
  for (const char *p = text; *p; p++) switch (*p) {
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '&': fputs("&amp;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&#39;", out); break;
      default: fputc(*p, out);
    }
}
