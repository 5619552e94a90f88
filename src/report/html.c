/* report/html.c: the HTML/SVG writer of the reports (html.h): escaping, the page and its stylesheet, and the few
 * chart pieces both reports draw (cards, bars, axes, legends). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report/html_int.h"

static void vraw(sl__html *h, bool escape, const char *fmt, va_list ap) {
  if (h->rc) return;
  char tmp[512];
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  if (n < 0) {
    va_end(ap2);
    h->rc = sl__err(SL_EINVAL, "report: format error");
    return;
  }
  char *buf = tmp;
  if ((size_t)n >= sizeof tmp) {
    buf = sl__malloc((size_t)n + 1);
    if (!buf) {
      va_end(ap2);
      h->rc = sl__oom("the report");
      return;
    }
    vsnprintf(buf, (size_t)n + 1, fmt, ap2);
  }
  va_end(ap2);
  if (escape) sl__h_text(h, buf);
  else h->rc = sl__str_append(&h->s, buf, (size_t)n);
  if (buf != tmp) sl__free(buf);
}

void sl__h_raw(sl__html *h, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vraw(h, false, fmt, ap);
  va_end(ap);
}

void sl__h_textf(sl__html *h, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vraw(h, true, fmt, ap);
  va_end(ap);
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not one (overlong forms and surrogates
 * included). */
static size_t utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  size_t n;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000;
  else return 0;
  unsigned cp = c & (0x3f >> (n - 1));
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

void sl__h_text(sl__html *h, const char *text) {
  if (h->rc || !text) return;
  const unsigned char *p = (const unsigned char *)text;
  while (*p && !h->rc) {
    const unsigned char *q = p;
    /* A run of bytes that need nothing. */
    while (*q >= 0x20 && *q < 0x80 && !strchr("&<>\"'", *q)) q++;
    if (q > p) {
      h->rc = sl__str_append(&h->s, (const char *)p, (size_t)(q - p));
      p = q;
      continue;
    }
    const char *rep = NULL;
    size_t n = 1;
    switch (*p) {
    case '&': rep = "&amp;"; break;
    case '<': rep = "&lt;"; break;
    case '>': rep = "&gt;"; break;
    case '"': rep = "&quot;"; break;
    case '\'': rep = "&#39;"; break;
    case '\t': case '\n': case '\r': rep = " "; break;
    default:
      if (*p < 0x20) rep = "\xef\xbf\xbd"; /* a control character: not allowed in XML */
      else if ((n = utf8_len(p)) == 0) rep = "\xef\xbf\xbd", n = 1;
    }
    h->rc = rep ? sl__str_append(&h->s, rep, strlen(rep)) : sl__str_append(&h->s, (const char *)p, n);
    p += n;
  }
}

static const char CSS[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#1d2430;"
    "background:#fff;margin:0}\n"
    "main{max-width:1180px;margin:0 auto;padding:14px 20px 36px}\n"
    "h1{font-size:22px;margin:6px 0 2px}\n"
    "h2{font-size:17px;margin:24px 0 8px;padding-bottom:4px;border-bottom:1px solid #dde2ea}\n"
    ".sub{color:#5b6575;margin:0 0 8px}\n"
    ".cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}\n"
    ".card{border:1px solid #dde2ea;border-radius:6px;padding:6px 12px;min-width:140px}\n"
    ".card .k{font-size:12px;color:#5b6575;text-transform:uppercase;letter-spacing:.03em}\n"
    ".card .v{font-size:20px;font-weight:600}\n"
    ".card .n{font-size:12px;color:#5b6575}\n"
    "table{border-collapse:collapse;font-size:13px;margin:4px 0}\n"
    "th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #eef1f5}\n"
    "th{color:#5b6575;font-weight:600}\n"
    "td.l,th.l{text-align:left}\n"
    ".mono{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:13px}\n"
    "svg{display:block;max-width:100%;height:auto;margin:4px 0}\n"
    "svg text{font-size:12px;fill:#1d2430}\n"
    "svg text.small{font-size:11px;fill:#5b6575}\n"
    "svg text.on-dark{fill:#fff}\n"
    "svg text.title{font-size:13px;font-weight:600}\n"
    ".warn{background:#fff4e5;border-left:4px solid #f0a020;padding:6px 10px;margin:8px 0}\n"
    ".note{color:#5b6575;font-size:13px}\n"
    ".prose p{margin:4px 0}\n"
    "ins{background:#e3f6e8;text-decoration:none}\n"
    "del{background:#fde8e8}\n"
    "footer{color:#5b6575;font-size:12px;margin-top:28px}\n";

void sl__h_begin(sl__html *h, const char *title) {
  sl__h_raw(h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>");
  sl__h_text(h, title);
  sl__h_raw(h, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n<h1>", CSS);
  sl__h_text(h, title);
  sl__h_raw(h, "</h1>\n");
}

int sl__h_end(sl__html *h, char **out) {
  *out = NULL;
  sl__h_raw(h, "<footer>Written by sluice %s. Self-contained: no scripts, nothing loaded from the network.</footer>\n"
               "</main>\n</body>\n</html>\n", SL_VERSION);
  if (h->rc) {
    sl__str_dispose(&h->s);
    return h->rc;
  }
  *out = h->s.s;
  h->s.s = NULL;
  h->s.len = h->s.cap = 0;
  return 0;
}

void sl__h_card(sl__html *h, const char *key, const char *id, const char *value, const char *note) {
  sl__h_raw(h, "<div class=\"card\"><div class=\"k\">");
  sl__h_text(h, key);
  sl__h_raw(h, "</div><div class=\"v\"");
  if (id) sl__h_raw(h, " id=\"%s\"", id);
  sl__h_raw(h, ">");
  sl__h_text(h, value);
  sl__h_raw(h, "</div>");
  if (note) {
    sl__h_raw(h, "<div class=\"n\">");
    sl__h_text(h, note);
    sl__h_raw(h, "</div>");
  }
  sl__h_raw(h, "</div>\n");
}

void sl__svg_begin(sl__html *h, double width, double height, const char *cls, const char *label) {
  sl__h_raw(h, "<svg class=\"%s\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"",
            cls ? cls : "chart", width, height, width, height);
  sl__h_text(h, label);
  sl__h_raw(h, "\">\n");
}

void sl__svg_end(sl__html *h) { sl__h_raw(h, "</svg>\n"); }

void sl__svg_text(sl__html *h, double x, double y, const char *anchor, const char *cls, const char *text) {
  sl__h_raw(h, "<text x=\"%.1f\" y=\"%.1f\"", x, y);
  if (anchor && strcmp(anchor, "start")) sl__h_raw(h, " text-anchor=\"%s\"", anchor);
  if (cls) sl__h_raw(h, " class=\"%s\"", cls);
  sl__h_raw(h, ">");
  sl__h_text(h, text);
  sl__h_raw(h, "</text>\n");
}

void sl__svg_rect(sl__html *h, double x, double y, double w, double hgt, const char *fill, const char *tip) {
  sl__h_raw(h, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"", x, y, w > 0 ? w : 0,
            hgt > 0 ? hgt : 0, fill);
  if (tip) {
    sl__h_raw(h, "><title>");
    sl__h_text(h, tip);
    sl__h_raw(h, "</title></rect>\n");
  } else {
    sl__h_raw(h, "/>\n");
  }
}

void sl__svg_line(sl__html *h, double x1, double y1, double x2, double y2, const char *stroke, double width,
                  bool dashed) {
  sl__h_raw(h, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>\n", x1,
            y1, x2, y2, stroke, width, dashed ? " stroke-dasharray=\"5 4\"" : "");
}

const char *sl__fit(char *b, size_t n, const char *s, size_t max) {
  size_t bytes = 0, chars = 0, len = strlen(s);
  /* Count characters, not bytes: a byte that does not continue a UTF-8 sequence starts one. */
  while (bytes < len && chars < max) {
    bytes++;
    while (bytes < len && ((unsigned char)s[bytes] & 0xc0) == 0x80) bytes++;
    chars++;
  }
  if (bytes == len) snprintf(b, n, "%s", s);
  else {
    size_t keep = bytes;
    for (int k = 0; k < 3 && keep > 0; k++) /* room for the "...": back off three characters */
      do keep--; while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80);
    snprintf(b, n, "%.*s...", (int)keep, s);
  }
  return b;
}

double sl__nice_step(double max, int want) {
  if (!(max > 0) || !isfinite(max)) return 1;
  double raw = max / (want > 0 ? want : 5);
  double mag = pow(10, floor(log10(raw)));
  double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

const char *sl__fmt_tick(char *b, size_t n, double v, double step) {
  if (fabs(v) < 1e-12) snprintf(b, n, "0");
  else if (step >= 1 && v < 1e4) snprintf(b, n, "%.0f", v);
  else sl__fmt_si(b, n, v);
  return b;
}

void sl__svg_hbars(sl__html *h, const sl__hbar_chart *c, const sl__hbar *bars, size_t n) {
  const double top = 8, axis_h = 38;
  double row = c->row > 0 ? c->row : 24;
  double x0 = c->label_width, plot_w = c->width - c->label_width - c->note_width;
  double max = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(bars[i].value) && bars[i].value > max) max = bars[i].value;
  for (size_t i = 0; i < c->nlines; i++)
    if (isfinite(c->lines[i].value) && c->lines[i].value > max) max = c->lines[i].value;
  double step = sl__nice_step(max, 5), hi = max > 0 ? ceil(max / step - 1e-9) * step : 1;
  double height = top + row * (double)n + axis_h;
  sl__svg_begin(h, c->width, height, "chart hbars", c->aria);
  char b[48];
  /* Grid and ticks. */
  double y_axis = top + row * (double)n;
  for (double v = 0; v <= hi * (1 + 1e-9); v += step) {
    double x = x0 + plot_w * v / hi;
    sl__svg_line(h, x, top, x, y_axis, "#eef1f5", 1, false);
    sl__svg_text(h, x, y_axis + 14, "middle", "small", sl__fmt_tick(b, sizeof b, v, step));
  }
  sl__svg_line(h, x0, y_axis, x0 + plot_w, y_axis, "#9aa3b2", 1, false);
  if (c->axis) sl__svg_text(h, x0 + plot_w / 2, y_axis + 32, "middle", "small", c->axis);
  for (size_t i = 0; i < n; i++) {
    const sl__hbar *r = &bars[i];
    double y = top + row * (double)i, bh = row * 0.7, by = y + (row - bh) / 2;
    double v = isfinite(r->value) ? fmin(r->value, hi) : hi;
    sl__h_raw(h, "<g class=\"%s\">\n", r->cls ? r->cls : "bar");
    char fit[160];
    sl__svg_text(h, x0 - 8, y + row / 2 + 4, "end", NULL,
                 sl__fit(fit, sizeof fit, r->label ? r->label : "", (size_t)((c->label_width - 12) / 7)));
    char tip[256];
    snprintf(tip, sizeof tip, "%s: %s", r->label ? r->label : "", r->note ? r->note : "");
    sl__svg_rect(h, x0, by, plot_w * v / hi, bh, r->fill ? r->fill : "#6b8fc7", r->tip ? r->tip : tip);
    if (r->part >= 0) sl__svg_rect(h, x0, by, plot_w * fmin(r->part, v) / hi, bh, r->part_fill, NULL);
    if (r->note) sl__svg_text(h, x0 + plot_w * v / hi + 6, y + row / 2 + 4, "start", NULL, r->note);
    sl__h_raw(h, "</g>\n");
  }
  for (size_t i = 0; i < c->nlines; i++) {
    const sl__refline *l = &c->lines[i];
    if (!isfinite(l->value)) continue;
    double x = x0 + plot_w * fmin(l->value, hi) / hi;
    sl__svg_line(h, x, top - 4, x, y_axis, l->stroke, 2, l->dashed);
    if (l->label) sl__svg_text(h, x + 4, top + 6 + 12 * (double)i, "start", "small", l->label);
  }
  sl__svg_end(h);
}

void sl__svg_legend(sl__html *h, double x, double y, const char *const *labels, const char *const *fills, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sl__svg_rect(h, x, y - 10, 14, 12, fills[i], NULL);
    sl__svg_text(h, x + 19, y, "start", "small", labels[i]);
    x += 28 + 7.0 * (double)strlen(labels[i]);
  }
}
